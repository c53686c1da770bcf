/**
 * Phase 3 of `podmin setup`: the bucket, the dependencies (manifest last), the sandbox image, the
 * cluster CAs and the empty indexes; for a dry run, the dependency plan alone.
 */

import { SSMClient } from "@aws-sdk/client-ssm";
import { awsRequestHandler, requestTimeoutMs } from "../../core/kit/request_bounds.ts";
import {
  dependencyBlobKey,
  DEPLOYMENT_INDEX,
  SERVICE_INDEX,
} from "../../core/bucket/bucket_layout.ts";
import {
  type Architecture,
  type DependencyEntry,
  emptyDependencyManifest,
} from "../../core/bucket/dependency_manifest.ts";
import {
  emptyDeploymentIndex,
  serializeDeploymentIndex,
} from "../../core/bucket/deployment_index.ts";
import { PreconditionFailedError } from "../../core/kit/errors.ts";
import type { ObjectStore } from "../../core/store/object_store.ts";
import { sha256Hex } from "../../core/kit/digest.ts";
import { formatBytes } from "../../core/kit/progress.ts";
import { emptyServiceIndex, serializeServiceIndex } from "../../core/bucket/service_index.ts";
import { ensureClusterCas } from "./cluster_cas.ts";
import { defaultCacheDir, DependencyCache } from "./dependency_cache.ts";
import {
  planAgainst,
  planDependencies,
  type PlannedDependency,
  publishDependencies,
  resolveWanted,
} from "./dependency_sync.ts";
import type { SetupPlan } from "./setup_plan.ts";
import { mirrorSandboxImage } from "./sandbox_mirror.ts";
import { ensureBucket } from "./s3_admin.ts";

/** The dependency set the nodes get: the plan and each architecture's manifest entries. */
export interface PublishedDependencies {
  plan: PlannedDependency[];
  entries: (arch: Architecture) => DependencyEntry[];
}

/** Phase 3 of a dry run: the dependency plan against an empty manifest (nothing uploaded). */
export async function previewDependencies(plan: SetupPlan): Promise<PublishedDependencies> {
  const cache = new DependencyCache({ dir: defaultCacheDir() });
  const current = emptyDependencyManifest();
  const resolved = await resolveWanted(plan.wanted, { current, log: plan.log });
  const items = planAgainst(resolved, { current }).items;
  for (const item of items) {
    if (item.size !== undefined) continue;
    try {
      item.size = (await Deno.stat(cache.pathOf(item.sha256))).size; // known from an earlier download
    } catch { /* unknown until the first download */ }
  }
  // A missing agent binary shows up in the preview as an explicit "unbuilt" pin.
  for (const arch of plan.agents.missing) {
    items.push({
      name: "podmin-agent",
      version: "unbuilt",
      arch,
      sha256: sha256Hex(new Uint8Array()),
      size: 0,
      source: "missing: deno task bundle or compile, or --agent-binary",
      action: "upload",
    });
  }
  return { plan: items, entries: (arch) => manifestEntriesOf(items, arch) };
}

/** Phase 3: the bucket, the dependencies (manifest last), the sandbox image, CAs and indexes. */
export async function publish(plan: SetupPlan): Promise<PublishedDependencies> {
  const { store, log } = plan;
  await ensureBucket(store, plan.region, log);

  // Dependencies: only what the published manifest lacks; the manifest last.
  const planned = await planDependencies(store, plan.wanted, { log });
  const published = await publishDependencies({
    store,
    cache: new DependencyCache({ dir: defaultCacheDir(), log }),
    plan: planned,
    local: plan.local,
    log,
  });
  log(
    `dependencies: ${published.uploadedFiles} file(s) uploaded (${
      formatBytes(published.uploadedBytes)
    }), ` +
      (published.manifestWritten
        ? `manifest generation ${published.manifest.generation} published`
        : "manifest unchanged"),
  );
  await mirrorSandboxImage(plan);
  // CAs, directly in SSM.
  const ssm = new SSMClient({
    region: plan.region,
    requestHandler: awsRequestHandler(requestTimeoutMs()),
  });
  for (const r of await ensureClusterCas({ ssm, cluster: plan.flags.cluster })) {
    log(`${r.name}: ${r.outcome}`);
  }
  await ensureIndexes(store);
  return {
    plan: planned.items,
    entries: (arch) => published.manifest.architectures[arch] ?? [],
  };
}

function manifestEntriesOf(items: PlannedDependency[], arch: Architecture): DependencyEntry[] {
  return items.filter((i) => i.arch === arch).map((i) => ({
    name: i.name,
    version: i.version,
    sha256: i.sha256,
    size: i.size ?? 0,
    key: dependencyBlobKey(i.sha256),
  }));
}

/** Creates the empty indexes so agents read an object (not a 403 for an absent key). */
async function ensureIndexes(store: ObjectStore): Promise<void> {
  for (
    const [key, bytes] of [
      [DEPLOYMENT_INDEX, serializeDeploymentIndex(emptyDeploymentIndex())],
      [SERVICE_INDEX, serializeServiceIndex(emptyServiceIndex())],
    ] as const
  ) {
    try {
      await store.put(key, bytes, { ifNoneMatch: "*", contentType: "application/json" });
    } catch (err) {
      if (!(err instanceof PreconditionFailedError)) throw err;
    }
  }
}

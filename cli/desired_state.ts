/**
 * Writing desired state: apply, diff and delete Deployments and Services.
 * Spec objects are content-addressed and written before the index that
 * references them (core/bucket/spec_objects.ts); the indexes are updated by the CAS
 * loop over the core index objects.
 */

import { casUpdate } from "../core/store/cas_update.ts";
import { type DeploymentEntry, readDeploymentIndex } from "../core/bucket/deployment_index.ts";
import { loadIndexSigner, signedDeploymentIndexObject } from "../core/bucket/index_signing.ts";
import { INDEX_SIGNING_KEY } from "../core/bucket/bucket_layout.ts";
import { NotFoundError, PodminError, UsageError } from "../core/kit/errors.ts";
import type { ObjectStore } from "../core/store/object_store.ts";
import type { Deployment, Resource, Service } from "../core/model/resources.ts";
import {
  allocateVip,
  readServiceIndex,
  type ServiceEntry,
  type ServiceIndex,
  serviceIndexObject,
} from "../core/bucket/service_index.ts";
import { type EncodedSpec, encodeSpec, writeSpec } from "../core/bucket/spec_objects.ts";
import { recordRevision } from "../core/bucket/deployment_history.ts";
import { mapBounded } from "../core/kit/bounded.ts";
import { formatIpv6Prefix, parseIpv6Prefix } from "../core/model/ipv6.ts";

/** Spec and history objects written at once by one apply (each its own key). */
const WRITES_AT_ONCE = 8;

/**
 * The deployments index as the CLI writes it: signed with the cluster's index signing key
 * (core/bucket/index_signing.ts; created by the first write), so members can verify an index
 * rebuilt from a mesh peer's change (spec §7.9).
 */
async function signedIndexObject(store: ObjectStore) {
  try {
    return signedDeploymentIndexObject(await loadIndexSigner(store));
  } catch (err) {
    throw new PodminError(`cannot load the index signing key: ${(err as Error).message}`, {
      hint: `the operator's credentials need s3:GetObject and s3:PutObject on ${INDEX_SIGNING_KEY}`,
      cause: err,
    });
  }
}

/** What apply did (or, for diff, would do) to one resource. */
export interface Change {
  kind: "Deployment" | "Service";
  namespace: string;
  name: string;
  action: "created" | "configured" | "unchanged";
  /** The stored spec digest before the change, when there was one. */
  before?: string;
  after: string;
  /** Services: the VIP (after apply). */
  vip?: string;
  /** Deployments created or configured: the revision of the new spec in its history. */
  revision?: number;
}

/** Options of `applyResources`. */
export interface ApplyOptions {
  store: ObjectStore;
  resources: Resource[];
  /** Service range used when the Service index does not exist yet. */
  serviceCidr?: string;
  /** Compute the changes only; write nothing. */
  dryRun?: boolean;
}

/** Applies resources idempotently; unchanged objects cause no write at all. */
export async function applyResources(options: ApplyOptions): Promise<Change[]> {
  const deployments = options.resources.filter((r): r is Deployment => r.kind === "Deployment");
  const services = options.resources.filter((r): r is Service => r.kind === "Service");
  const changes: Change[] = [];
  if (deployments.length) changes.push(...await applyDeployments(options, deployments));
  if (services.length) changes.push(...await applyServices(options, services));
  return changes;
}

function changeAction(current: string | undefined, same: boolean): Change["action"] {
  return current === undefined ? "created" : same ? "unchanged" : "configured";
}

async function applyDeployments(options: ApplyOptions, deployments: Deployment[]) {
  const { store } = options;
  const index = await readDeploymentIndex(store);
  const planned = deployments.map((d) => {
    const spec = encodeSpec(d);
    const current = index.deployments.find((e) =>
      e.namespace === d.metadata.namespace && e.name === d.metadata.name
    );
    const entry: DeploymentEntry = {
      namespace: d.metadata.namespace,
      name: d.metadata.name,
      nodeGroup: d.spec.nodeGroup,
      spec: spec.ref,
    };
    const same = current?.spec === entry.spec && current?.nodeGroup === entry.nodeGroup;
    const change: Change = {
      kind: "Deployment",
      namespace: entry.namespace,
      name: entry.name,
      action: changeAction(current?.spec, same),
      before: current?.spec,
      after: entry.spec,
    };
    return { entry, spec, change };
  });
  const dirty = planned.filter((p) => p.change.action !== "unchanged");
  if (dirty.length && !options.dryRun) {
    // Specs first (immutable, put-if-absent, several at once; the signing key read beside them),
    // the index that names them after.
    const [object] = await Promise.all([
      signedIndexObject(store),
      mapBounded(dirty, WRITES_AT_ONCE, (p) => writeSpec(store, p.spec)),
    ]);
    await casUpdate({
      store,
      object,
      mutate: (current) => {
        let changed = false;
        const next = [...current.deployments];
        for (const { entry } of dirty) {
          const i = next.findIndex((e) => e.namespace === entry.namespace && e.name === entry.name);
          if (i >= 0 && next[i].spec === entry.spec && next[i].nodeGroup === entry.nodeGroup) {
            continue;
          }
          if (i >= 0) next[i] = entry;
          else next.push(entry);
          changed = true;
        }
        return changed
          ? { ...current, generation: current.generation + 1, deployments: next }
          : undefined;
      },
    });
    // The history follows the index: a revision is a spec the index held.
    // One history object per Deployment: independent, so several at once.
    await mapBounded(dirty, WRITES_AT_ONCE, async (p) => {
      p.change.revision = await recordRevision({
        store,
        namespace: p.entry.namespace,
        name: p.entry.name,
        spec: p.entry.spec,
      });
    });
  }
  return planned.map((p) => p.change);
}

async function applyServices(options: ApplyOptions, services: Service[]) {
  const { store } = options;
  const existing = await readServiceIndex(store);
  if (existing && options.serviceCidr && !sameCidr(existing.serviceCIDR, options.serviceCidr)) {
    throw new UsageError(
      `the cluster's Service range is ${existing.serviceCIDR}, not ${options.serviceCidr}`,
      { hint: "the range is fixed when the first Service is applied; omit --service-cidr" },
    );
  }
  const object = serviceIndexObject(options.serviceCidr);
  const base = existing ?? object.empty();
  const planned = services.map((s) => {
    const spec = encodeSpec(s);
    const current = base.services.find((e) =>
      e.namespace === s.metadata.namespace && e.name === s.metadata.name
    );
    const change: Change = {
      kind: "Service",
      namespace: s.metadata.namespace,
      name: s.metadata.name,
      action: changeAction(current?.spec, current?.spec === spec.ref),
      before: current?.spec,
      after: spec.ref,
      vip: current?.vip,
    };
    return { s, spec, change };
  });
  const dirty = planned.filter((p) => p.change.action !== "unchanged");
  if (dirty.length && !options.dryRun) {
    // Specs first (immutable, put-if-absent, several at once), the index that names them after.
    await mapBounded(dirty, WRITES_AT_ONCE, (p) => writeSpec(store, p.spec));
    const result = await casUpdate({
      store,
      object,
      mutate: (current) => withServices(current, dirty),
    });
    for (const p of dirty) {
      p.change.vip = result.value.services.find((e) =>
        e.namespace === p.change.namespace && e.name === p.change.name
      )?.vip;
    }
  }
  return planned.map((p) => p.change);
}

/** The index with `dirty` Services set (a VIP allocated for new ones), or undefined if unchanged. */
function withServices(
  current: ServiceIndex,
  dirty: { s: Service; spec: EncodedSpec }[],
): ServiceIndex | undefined {
  let changed = false;
  const next: ServiceIndex = { ...current, services: [...current.services] };
  for (const { s, spec } of dirty) {
    const i = next.services.findIndex((e) =>
      e.namespace === s.metadata.namespace && e.name === s.metadata.name
    );
    if (i >= 0 && next.services[i].spec === spec.ref) continue;
    const vip = i >= 0
      ? next.services[i].vip
      : allocateVip(next, { namespace: s.metadata.namespace, name: s.metadata.name });
    const entry: ServiceEntry = {
      namespace: s.metadata.namespace,
      name: s.metadata.name,
      spec: spec.ref,
      vip,
    };
    if (i >= 0) next.services[i] = entry;
    else next.services.push(entry);
    changed = true;
  }
  return changed ? { ...next, generation: current.generation + 1 } : undefined;
}

function sameCidr(a: string, b: string): boolean {
  return formatIpv6Prefix(parseIpv6Prefix(a)) === formatIpv6Prefix(parseIpv6Prefix(b));
}

/** Deletes a Deployment or Service from its index. Throws NotFoundError when absent. */
export async function deleteResource(options: {
  store: ObjectStore;
  kind: "Deployment" | "Service";
  namespace: string;
  name: string;
}): Promise<void> {
  const { store, kind, namespace, name } = options;
  let found = false;
  const match = (e: { namespace: string; name: string }) =>
    e.namespace === namespace && e.name === name;
  if (kind === "Deployment") {
    await casUpdate({
      store,
      object: await signedIndexObject(store),
      mutate: (current) => {
        // Sticky: an earlier attempt may have removed it and only lost the response.
        found ||= current.deployments.some(match);
        if (!found) return undefined;
        return {
          ...current,
          generation: current.generation + 1,
          deployments: current.deployments.filter((e) => !match(e)),
        };
      },
    });
  } else {
    const existing = await readServiceIndex(store);
    if (existing) {
      await casUpdate({
        store,
        object: serviceIndexObject(existing.serviceCIDR),
        mutate: (current) => {
          found ||= current.services.some(match);
          if (!found) return undefined;
          return {
            ...current,
            generation: current.generation + 1,
            services: current.services.filter((e) => !match(e)),
          };
        },
      });
    }
  }
  if (!found) {
    throw new NotFoundError(`${kind.toLowerCase()} ${namespace}/${name} not found`, {
      hint: `list them with 'podmin get ${kind.toLowerCase()}s -n ${namespace}'`,
    });
  }
}

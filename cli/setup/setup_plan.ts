/**
 * Phase 1 of `podmin setup`: its flags checked, the region resolved, the local artefacts (vmconfig,
 * agent binaries) read and the wanted dependency set chosen, before any AWS call.
 */

import { SSMClient } from "@aws-sdk/client-ssm";
import {
  booleanFlag,
  type CommandContext,
  stringFlag,
  stringsFlag,
} from "../../core/kit/cli_kit.ts";
import type { Architecture } from "../../core/bucket/dependency_manifest.ts";
import { UsageError } from "../../core/kit/errors.ts";
import type { ObjectStore } from "../../core/store/object_store.ts";
import { isProgressUpdate } from "../../core/kit/progress.ts";
import { openStore } from "../../core/store/store_url.ts";
import { buildVmconfigArchive } from "../../vmconfig/archive.ts";
import {
  DEFAULT_SANDBOX_IMAGE,
  OPTIONAL_DEPENDENCIES,
  REQUIRED_DEPENDENCIES,
} from "../../vmconfig/render_user_data.ts";
import { architectureOf } from "../infra/instance_types.ts";
import {
  type AgentDistributions,
  chooseAgentDistributions,
  defaultDistDir,
  RUNTIME_DEPENDENCY,
} from "./agent_distribution.ts";
import { type CatalogSpec, readCatalogFile, requireFluentBit } from "./dependency_catalog.ts";
import { type LocalDependency, wantedDependencies } from "./dependency_sync.ts";
import { DEFAULT_CATALOG } from "./default_catalog.ts";
import { parseReleaseMirror, RELEASE_MIRROR_ENV, withReleaseVersions } from "./vendor_releases.ts";
import { parseSetupFlags, type SetupFlags } from "./setup_flags.ts";
import { defaultWorkDir } from "./work_dir.ts";

/** What setup decided from its flags and local files, before any AWS call. */
export interface SetupPlan {
  flags: SetupFlags;
  region: string;
  /** Where the region came from, for the summary. */
  regionSource: string;
  /** True when --cluster was not given (the documented default was used). */
  clusterDefaulted: boolean;
  dryRun: boolean;
  /** --out of a dry run. */
  out?: string;
  bucket: string;
  store: ObjectStore;
  log: (line: string) => void;
  sandboxImage: string;
  mirrorPlainHttp: boolean;
  workDir: string;
  nodeArches: Architecture[];
  agents: AgentDistributions;
  amiFlags: Partial<Record<Architecture, string>>;
  /** Files setup publishes itself (vmconfig, agent binaries). */
  local: LocalDependency[];
  /** Every dependency the nodes and NAT instances need. */
  wanted: ReturnType<typeof wantedDependencies>;
  allArches: Architecture[];
}

/** Phase 1: flags checked, local artefacts read, the wanted dependency set. */
export async function planSetup(ctx: CommandContext): Promise<SetupPlan> {
  const { region, source: regionSource } = await resolveRegion(stringFlag(ctx, "region"));
  const flags = setupFlagsOf(ctx, region);
  const dryRun = booleanFlag(ctx, "dry-run");
  const out = stringFlag(ctx, "out");
  if (dryRun && !out) {
    throw new UsageError("--dry-run needs --out DIR", { hint: "e.g. --dry-run --out ./plan" });
  }
  if (!dryRun && out) throw new UsageError("--out is only used with --dry-run");
  const bucketUrl = clusterBucketUrl(ctx, flags.cluster);
  const catalogFile = stringFlag(ctx, "dependency-catalog");
  const catalog = withReleaseVersions(
    catalogFile ? await readCatalogFile(catalogFile) : DEFAULT_CATALOG,
    {
      versions: flags.releaseVersions,
      mirror: parseReleaseMirror(Deno.env.get(RELEASE_MIRROR_ENV)),
    },
  );
  const nodeArches = [...new Set(flags.nodeGroups.map((ng) => ng.architecture))];
  if (flags.otelLogs) requireFluentBit(catalog, nodeArches);
  const allArches = [...new Set([...nodeArches, ...natArchitectures(flags)])]
    .sort() as Architecture[];
  const vmconfig = buildVmconfigArchive();
  const agents = await chooseAgentDistributions({
    binaries: parseKeyed(stringsFlag(ctx, "agent-binary"), "--agent-binary", (p) => p.length > 0),
    arches: nodeArches,
    catalog,
    dist: stringFlag(ctx, "dist") ?? defaultDistDir(),
    log: ctx.err,
  });
  for (const line of agents.summary) ctx.err(line);
  const amiFlags = parseKeyed(
    stringsFlag(ctx, "ami"),
    "--ami",
    (a) => /^ami-[0-9a-f]{8,17}$/.test(a),
  );
  const local: LocalDependency[] = [
    ...allArches.map((arch) => ({
      name: "vmconfig",
      version: vmconfig.version,
      arch,
      bytes: vmconfig.bytes,
    })),
    ...agents.local,
  ];
  const wanted = wantedFor({ catalog, local, allArches, nodeArches, flags, agents });
  return {
    flags,
    region,
    regionSource,
    clusterDefaulted: stringFlag(ctx, "cluster") === undefined,
    dryRun,
    out,
    bucket: bucketUrl.slice(5),
    store: openStore(bucketUrl, { region }),
    // Download and upload progress is redrawn in place on a terminal.
    log: (l) => (isProgressUpdate(l) ? ctx.status(l) : ctx.err(l)),
    sandboxImage: stringFlag(ctx, "sandbox-image") ?? DEFAULT_SANDBOX_IMAGE,
    mirrorPlainHttp: booleanFlag(ctx, "mirror-plain-http"),
    workDir: stringFlag(ctx, "work-dir") ?? defaultWorkDir(flags.cluster),
    nodeArches,
    agents,
    amiFlags,
    local,
    wanted,
    allArches,
  };
}

/** setup's cluster flags, parsed and checked (NAT64 instances share one architecture). */
function setupFlagsOf(ctx: CommandContext, region: string): SetupFlags {
  const flags = parseSetupFlags({
    cluster: stringFlag(ctx, "cluster"),
    region,
    vpcCidr: stringFlag(ctx, "vpc-cidr"),
    nat64: stringFlag(ctx, "nat64"),
    nodeGroups: stringsFlag(ctx, "nodegroup"),
    workloadCaPublish: stringFlag(ctx, "workload-ca-publish"),
    otelLogs: stringFlag(ctx, "otel-logs"),
    kmsKeyArns: stringsFlag(ctx, "kms-key-arn"),
    releaseVersions: {
      kubelet: stringFlag(ctx, "kubernetes-version"),
      crictl: stringFlag(ctx, "crictl-version"),
      containerd: stringFlag(ctx, "containerd-version"),
    },
  });
  if (natArchitectures(flags).length > 1) {
    throw new UsageError("all NAT64 instance types must share one architecture", {
      hint: "NAT64 instances share one user-data; use e.g. t4g.* everywhere",
    });
  }
  return flags;
}

/** The cluster bucket: --bucket, $PODMIN_BUCKET or s3://podmin-<cluster>; S3 only. */
function clusterBucketUrl(ctx: CommandContext, cluster: string): string {
  const bucketUrl = stringFlag(ctx, "bucket") ?? Deno.env.get("PODMIN_BUCKET") ??
    `s3://podmin-${cluster}`;
  if (!bucketUrl.startsWith("s3://")) {
    throw new UsageError("setup needs an S3 cluster bucket (s3://NAME)", {
      hint: "the filesystem store serves local clusters; AWS nodes read S3",
    });
  }
  return bucketUrl;
}

/** The dependencies the nodes and NAT instances need, out of everything the catalog pins. */
function wantedFor(o: {
  catalog: CatalogSpec;
  local: LocalDependency[];
  allArches: Architecture[];
  nodeArches: Architecture[];
  flags: SetupFlags;
  agents: AgentDistributions;
}): ReturnType<typeof wantedDependencies> {
  const natArches = natArchitectures(o.flags);
  return wantedDependencies({ catalog: o.catalog, local: o.local, architectures: o.allArches })
    .filter((w) =>
      w.name === "vmconfig" ||
      // Node dependencies for node architectures (the runtime only where the agent needs it)…
      (o.nodeArches.includes(w.arch) &&
        (w.name !== RUNTIME_DEPENDENCY || o.agents.runtimeArches.includes(w.arch))) ||
      // …and the NAT kind's pinned extras (Jool, SSM Agent) for the NAT architecture.
      (natArches.includes(w.arch) &&
        [...REQUIRED_DEPENDENCIES.nat, ...OPTIONAL_DEPENDENCIES.nat].includes(w.name))
    );
}

/**
 * The region: --region, then the standard AWS configuration chain (AWS_REGION, the profile's
 * region in the shared config file, as the AWS SDK resolves it; AWS_DEFAULT_REGION too), then
 * us-east-1.
 */
async function resolveRegion(flag?: string): Promise<{ region: string; source: string }> {
  if (flag) return { region: flag, source: "--region" };
  for (const name of ["AWS_REGION", "AWS_DEFAULT_REGION"]) {
    const v = Deno.env.get(name);
    if (v) return { region: v, source: `from $${name}` };
  }
  try {
    const region = await new SSMClient({}).config.region();
    if (region) return { region, source: "from the AWS configuration" };
  } catch { /* no region configured */ }
  return { region: "us-east-1", source: "the default; no region in the AWS configuration" };
}

function parseKeyed(
  values: string[] | undefined,
  flag: string,
  check: (v: string) => boolean,
): Partial<Record<Architecture, string>> {
  const out: Partial<Record<Architecture, string>> = {};
  for (const v of values ?? []) {
    const m = /^(amd64|arm64)=(.+)$/.exec(v);
    if (!m || !check(m[2])) {
      throw new UsageError(
        `${flag}: expected amd64=VALUE or arm64=VALUE, got ${JSON.stringify(v)}`,
      );
    }
    out[m[1] as Architecture] = m[2];
  }
  return out;
}

/** Architectures of the NAT64 instances setup will run. */
export function natArchitectures(flags: SetupFlags): Architecture[] {
  const types = [
    ...(flags.nat64 ? [flags.nat64.instanceType] : []),
    ...flags.nodeGroups.flatMap((ng) => (ng.nat64 ? [ng.nat64] : [])),
  ];
  return [...new Set(types.map((t) => architectureOf(t)))];
}

/**
 * `podmin setup`: publishes pinned dependencies (manifest last), mirrors the
 * Pod sandbox image, creates the CA parameters, renders user-data, generates
 * the OpenTofu configuration, saves it (bucket `infra/` and locally) BEFORE
 * applying it, applies it and waits for healthy capacity.
 *
 * `--dry-run --out DIR` writes the configuration, the user-data per NodeGroup
 * and the dependency plan under DIR and touches nothing else (no AWS call).
 *
 * Its help and flags: cli/setup/setup_command.ts.
 */

import * as path from "node:path";
import { AutoScalingClient } from "@aws-sdk/client-auto-scaling";
import {
  CreateBucketCommand,
  HeadBucketCommand,
  PutBucketLifecycleConfigurationCommand,
  PutPublicAccessBlockCommand,
  type S3Client,
} from "@aws-sdk/client-s3";
import { EC2Client } from "@aws-sdk/client-ec2";
import { GetParameterCommand, SSMClient } from "@aws-sdk/client-ssm";
import { awsRequestHandler, requestTimeoutMs } from "../../core/kit/request_bounds.ts";
import {
  dependencyBlobKey,
  DEPLOYMENT_INDEX,
  imageManifestKey,
  type ImageRepository,
  imageTagKey,
  INFRA_CONFIG,
  parseImageRepository,
  SERVICE_INDEX,
} from "../../core/bucket/bucket_layout.ts";
import { parseManifest, platformOf } from "../../registry/manifest.ts";
import {
  booleanFlag,
  type CommandContext,
  stringFlag,
  stringsFlag,
} from "../../core/kit/cli_kit.ts";
import {
  type Architecture,
  type DependencyEntry,
  emptyDependencyManifest,
} from "../../core/bucket/dependency_manifest.ts";
import {
  emptyDeploymentIndex,
  serializeDeploymentIndex,
} from "../../core/bucket/deployment_index.ts";
import {
  PermanentStoreError,
  PodminError,
  PreconditionFailedError,
  UsageError,
} from "../../core/kit/errors.ts";
import { mirrorPathOf, parseUpstreamRef } from "../../core/model/image_ref.ts";
import { getIfExists, type ObjectStore } from "../../core/store/object_store.ts";
import { sha256Hex } from "../../core/kit/digest.ts";
import { formatBytes, isProgressUpdate } from "../../core/kit/progress.ts";
import { S3Store } from "../../core/store/s3_store.ts";
import { emptyServiceIndex, serializeServiceIndex } from "../../core/bucket/service_index.ts";
import { openStore } from "../../core/store/store_url.ts";
import { s3AdminClient } from "./s3_admin.ts";
import { writeImage } from "../../registry/image_writer.ts";
import { UpstreamSource } from "../../registry/upstream.ts";
import { buildVmconfigArchive } from "../../vmconfig/archive.ts";
import {
  DEFAULT_SANDBOX_IMAGE,
  dependenciesForKind,
  OPTIONAL_DEPENDENCIES,
  POOL4_DETECT,
  renderUserData,
  REQUIRED_DEPENDENCIES,
  SOURCES_DETECT,
} from "../../vmconfig/render_user_data.ts";
import type { ClusterSpec, ExistingVpc, InfraInputs } from "../infra/infra_inputs.ts";
import { describeInfra, generateTofu, serializeTofu } from "../infra/generate_tofu.ts";
import { architectureOf } from "../infra/instance_types.ts";
import { TF } from "../infra/context.ts";
import { checkTofuSyntax } from "../infra/tofu_syntax.ts";
import {
  type AgentDistributions,
  chooseAgentDistributions,
  defaultDistDir,
  RUNTIME_DEPENDENCY,
} from "./agent_distribution.ts";
import { availableZones, describeReusedVpc, findReusableVpc } from "./aws_lookup.ts";
import { ensureClusterCas } from "./cluster_cas.ts";
import { managedResource, readSavedState, refuseLockedState } from "./tofu_state.ts";
import { readCatalogFile, requireFluentBit } from "./dependency_catalog.ts";
import { defaultCacheDir, DependencyCache } from "./dependency_cache.ts";
import {
  LOCAL_SOURCE,
  type LocalDependency,
  planAgainst,
  planDependencies,
  type PlannedDependency,
  publishDependencies,
  resolveWanted,
  wantedDependencies,
} from "./dependency_sync.ts";
import { DEFAULT_CATALOG } from "./default_catalog.ts";
import { parseReleaseMirror, RELEASE_MIRROR_ENV, withReleaseVersions } from "./vendor_releases.ts";
import { parseSetupFlags, resolveZones, type SetupFlags } from "./setup_flags.ts";
import { tofuApply } from "./tofu_runner.ts";
import { confirmPlan } from "./confirm.ts";
import { CAPACITY_TIMEOUTS, waitForCapacity } from "./wait_capacity.ts";
import { defaultWorkDir } from "./work_dir.ts";

/** Dependencies injected by tests. */
export interface SetupDeps {
  tofuBinary?: string;
  /** Reads the operator's answer to the confirmation (tests inject it). */
  readLine?: () => Promise<string | null>;
  isTerminal?: boolean;
  /** Capacity poll interval (tests shorten it). */
  capacityPollMs?: number;
}

/** Where Debian publishes its current AMIs (SSM public parameters). */
export function debianAmiParameter(arch: Architecture): string {
  return `/aws/service/debian/release/12/latest/${arch}`;
}

/** A stand-in AMI id for --dry-run, which resolves nothing in AWS. */
const DRY_RUN_AMI = "ami-00000000";

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

function manifestEntriesOf(items: PlannedDependency[], arch: Architecture): DependencyEntry[] {
  return items.filter((i) => i.arch === arch).map((i) => ({
    name: i.name,
    version: i.version,
    sha256: i.sha256,
    size: i.size ?? 0,
    key: dependencyBlobKey(i.sha256),
  }));
}

async function ensureBucket(
  store: ObjectStore,
  region: string,
  log: (l: string) => void,
): Promise<void> {
  if (!(store instanceof S3Store)) return;
  const s3: S3Client = s3AdminClient(store);
  try {
    await s3.send(new HeadBucketCommand({ Bucket: store.bucket }));
  } catch (err) {
    const status = (err as { $metadata?: { httpStatusCode?: number } }).$metadata?.httpStatusCode;
    if (status !== 404) {
      throw new PodminError(`cannot reach ${store.url}: ${(err as Error).message}`, { cause: err });
    }
    log(`creating bucket ${store.bucket} in ${region}`);
    await s3.send(
      new CreateBucketCommand({
        Bucket: store.bucket,
        CreateBucketConfiguration: region === "us-east-1"
          ? undefined
          : { LocationConstraint: region as never },
      }),
    );
    // A bucket Podmin creates is private and drops multipart uploads orphaned by killed writers.
    await s3.send(
      new PutPublicAccessBlockCommand({
        Bucket: store.bucket,
        PublicAccessBlockConfiguration: {
          BlockPublicAcls: true,
          IgnorePublicAcls: true,
          BlockPublicPolicy: true,
          RestrictPublicBuckets: true,
        },
      }),
    );
    await s3.send(
      new PutBucketLifecycleConfigurationCommand({
        Bucket: store.bucket,
        LifecycleConfiguration: {
          Rules: [{
            ID: "podmin-abort-incomplete-uploads",
            Status: "Enabled",
            Filter: { Prefix: "" },
            AbortIncompleteMultipartUpload: { DaysAfterInitiation: 1 },
          }],
        },
      }),
    );
  }
}

/**
 * True when the tag is stored and, for an index, the linux manifest of every
 * node architecture is stored too (a NodeGroup of a new architecture needs it).
 */
async function sandboxMirrored(
  store: ObjectStore,
  repo: ImageRepository,
  tag: string,
  arches: Architecture[],
): Promise<boolean> {
  const got = await getIfExists(store, imageTagKey(repo, tag));
  if (!got) return false;
  const parsed = parseManifest(got.body, got.info.contentType);
  for (const arch of arches) {
    const child = parsed.manifests.find((m) => platformOf(m) === `linux/${arch}`);
    if (parsed.manifests.length && !child) return false;
    if (child && !(await getIfExists(store, imageManifestKey(repo, child.digest.slice(7))))) {
      return false;
    }
  }
  return true;
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

async function resolveAmis(
  ssm: SSMClient,
  arches: Architecture[],
  given: Partial<Record<Architecture, string>>,
): Promise<Partial<Record<Architecture, string>>> {
  const out: Partial<Record<Architecture, string>> = { ...given };
  for (const arch of arches) {
    if (out[arch]) continue;
    try {
      const p = await ssm.send(new GetParameterCommand({ Name: debianAmiParameter(arch) }));
      out[arch] = p.Parameter!.Value!;
    } catch (err) {
      throw new PodminError(
        `cannot resolve the Debian 12 ${arch} AMI (${debianAmiParameter(arch)}): ${
          (err as Error).message
        }`,
        {
          hint: `pass --ami ${arch}=ami-…`,
        },
      );
    }
  }
  return out;
}

/**
 * The generator's cluster spec from setup's flags, the bucket and each NodeGroup's resolved
 * zone (exported for the tests that check generated configurations per flag combination).
 */
export function clusterSpecOf(
  { flags, bucket, zones }: { flags: SetupFlags; bucket: string; zones: Map<string, string> },
): ClusterSpec {
  return {
    cluster: flags.cluster,
    region: flags.region,
    bucket,
    vpcCidr: flags.vpcCidr,
    nat64: flags.nat64,
    nodeGroups: flags.nodeGroups.map((ng) => ({
      name: ng.name,
      size: ng.size,
      diskSizeGiB: ng.diskSizeGiB,
      instanceType: ng.instanceType,
      architecture: ng.architecture,
      zone: zones.get(ng.name)!,
      nat64: ng.nat64,
    })),
    workloadCaPublish: flags.workloadCaPublish,
    otelLogsCa: flags.otelLogs?.ca,
    kmsKeyArns: flags.kmsKeyArns,
  };
}

/** Architectures of the NAT64 instances setup will run. */
function natArchitectures(flags: SetupFlags): Architecture[] {
  const types = [
    ...(flags.nat64 ? [flags.nat64.instanceType] : []),
    ...flags.nodeGroups.flatMap((ng) => (ng.nat64 ? [ng.nat64] : [])),
  ];
  return [...new Set(types.map((t) => architectureOf(t)))];
}

/**
 * `podmin setup` in named phases: plan (flags, local artefacts) → resolve the cluster in AWS, or
 * preview it for a dry run → publish (bucket, dependencies, sandbox image, CAs, indexes) → render
 * the configuration → apply it (saved first) → wait for healthy capacity.
 */
export async function runSetup(ctx: CommandContext, deps: SetupDeps = {}): Promise<number> {
  const plan = await planSetup(ctx);
  if (plan.dryRun) {
    const resolved = previewCluster(plan);
    for (const line of planSummary(plan, resolved)) ctx.out(line);
    const published = await previewDependencies(plan);
    const rendered = renderConfig({ plan, resolved, published });
    await writeDryRun(plan.out!, {
      flags: plan.flags,
      bucket: plan.bucket,
      configBytes: rendered.configBytes,
      userData: rendered.userData,
      natUserData: rendered.natUserData,
      plan: published.plan,
      missing: plan.agents.missing,
    });
    const files = [
      ...Object.keys(rendered.userData),
      ...(rendered.natUserData ? ["nat64"] : []),
    ].map((n) => `${n}.sh`);
    ctx.out(
      `dry run: wrote ${plan.out}/main.tf.json, ${files.length} user-data file${
        files.length === 1 ? "" : "s"
      } (${files.join(", ")}) and dependencies.json; nothing was changed`,
    );
    return 0;
  }
  const bucketExists = await bucketExistsIn(plan.store);
  const resolved = await resolveCluster(plan, { bucketExists });
  for (const line of planSummary(plan, resolved, { bucketExists })) ctx.out(line);
  const verb = bucketExists ? "update" : "create";
  await confirmPlan({
    yes: booleanFlag(ctx, "yes"),
    question: `${verb[0].toUpperCase()}${
      verb.slice(1)
    } cluster ${plan.flags.cluster} as planned above?`,
    what: `${verb} cluster ${plan.flags.cluster}`,
    readLine: deps.readLine,
    isTerminal: deps.isTerminal,
  });
  const published = await publish(plan);
  const rendered = renderConfig({ plan, resolved, published });
  await applyConfig({ plan, rendered, deps });
  await waitHealthy({ plan, rendered, deps });
  ctx.out(
    `cluster ${plan.flags.cluster} is set up: ${plan.flags.nodeGroups.length} NodeGroup(s) healthy, bucket ${plan.store.url}`,
  );
  return 0;
}

/** What setup decided from its flags and local files, before any AWS call. */
interface SetupPlan {
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
async function planSetup(ctx: CommandContext): Promise<SetupPlan> {
  const { region, source: regionSource } = await resolveRegion(stringFlag(ctx, "region"));
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
  const dryRun = booleanFlag(ctx, "dry-run");
  const out = stringFlag(ctx, "out");
  if (dryRun && !out) {
    throw new UsageError("--dry-run needs --out DIR", { hint: "e.g. --dry-run --out ./plan" });
  }
  if (!dryRun && out) throw new UsageError("--out is only used with --dry-run");
  const bucketUrl = stringFlag(ctx, "bucket") ?? Deno.env.get("PODMIN_BUCKET") ??
    `s3://podmin-${flags.cluster}`;
  if (!bucketUrl.startsWith("s3://")) {
    throw new UsageError("setup needs an S3 cluster bucket (s3://NAME)", {
      hint: "the filesystem store serves local clusters; AWS nodes read S3",
    });
  }
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
  const natArches = natArchitectures(flags);
  const wanted = wantedDependencies({ catalog, local, architectures: allArches })
    .filter((w) =>
      w.name === "vmconfig" ||
      // Node dependencies for node architectures (the runtime only where the agent needs it)…
      (nodeArches.includes(w.arch) &&
        (w.name !== RUNTIME_DEPENDENCY || agents.runtimeArches.includes(w.arch))) ||
      // …and the NAT kind's pinned extras (Jool, SSM Agent) for the NAT architecture.
      (natArches.includes(w.arch) &&
        [...REQUIRED_DEPENDENCIES.nat, ...OPTIONAL_DEPENDENCIES.nat].includes(w.name))
    );
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

/** True when the cluster bucket exists (a real setup's plan says whether it creates it). */
async function bucketExistsIn(store: ObjectStore): Promise<boolean> {
  if (!(store instanceof S3Store)) return true;
  try {
    await s3AdminClient(store).send(new HeadBucketCommand({ Bucket: store.bucket }));
    return true;
  } catch (err) {
    const status = (err as { $metadata?: { httpStatusCode?: number } }).$metadata?.httpStatusCode;
    if (status === 404) return false;
    throw new PodminError(`cannot reach ${store.url}: ${(err as Error).message}`, { cause: err });
  }
}

/** What setup will create (or a dry run would): one `Key: value` line per item. */
function planSummary(
  plan: SetupPlan,
  resolved: ResolvedCluster,
  real?: { bucketExists: boolean },
): string[] {
  const { flags } = plan;
  const lines: [string, string][] = [
    [
      "Cluster",
      `${flags.cluster} (${
        plan.clusterDefaulted ? "the default; --cluster ID to choose" : "--cluster"
      })`,
    ],
    [
      "Bucket",
      `s3://${plan.bucket}${real ? (real.bucketExists ? " (exists)" : " (will be created)") : ""}`,
    ],
    ["Region", `${plan.region} (${plan.regionSource})`],
    [
      "VPC",
      real
        ? resolved.existingVpc
          ? `reuse ${resolved.existingVpc.id} (never deleted by Podmin)`
          : resolved.ownVpcId
          ? `keep ${resolved.ownVpcId} (${flags.vpcCidr}, created by this cluster)`
          : `new ${flags.vpcCidr}`
        : `${flags.vpcCidr} (setup reuses a VPC with exactly this CIDR, else creates one)`,
    ],
  ];
  for (const arch of plan.allArches) {
    const given = plan.amiFlags[arch];
    lines.push([
      `AMI ${arch}`,
      given
        ? `${given} (--ami)`
        : real
        ? `${resolved.amiIds[arch]} (Debian 12 from ${debianAmiParameter(arch)})`
        : `placeholder ${DRY_RUN_AMI} (setup reads ${debianAmiParameter(arch)})`,
    ]);
  }
  for (const ng of flags.nodeGroups) {
    lines.push([
      `NodeGroup ${ng.name}`,
      `${ng.size} x ${ng.instanceType} (${ng.architecture}), ${ng.diskSizeGiB} GiB, zone ${
        resolved.zones.get(ng.name)
      }${ng.size === 0 ? "; size=0: no VMs until you raise size" : ""}`,
    ]);
  }
  const nat = [
    ...(flags.nat64 ? [`shared ${flags.nat64.instanceType} per zone`] : []),
    ...flags.nodeGroups.filter((ng) => ng.nat64).map((ng) => `${ng.name}: dedicated ${ng.nat64}`),
  ];
  lines.push(["NAT64", nat.join("; ") || "none"]);
  // Every upstream pin with its digest: what every node will download and verify.
  for (const w of plan.wanted.filter((w) => w.source !== LOCAL_SOURCE)) {
    lines.push([`Pin ${w.name} ${w.arch}`, `${w.version} sha256:${w.sha256}`]);
  }
  for (const arch of plan.agents.missing) {
    lines.push([`podmin-agent ${arch}`, "not built yet: run 'deno task bundle' before setup"]);
  }
  const width = Math.max(...lines.map(([k]) => k.length)) + 2;
  return lines.map(([k, v]) => `${`${k}:`.padEnd(width)}${v}`);
}

/** Zones, the VPC to reuse and the AMIs: looked up in AWS, or stand-ins for a dry run. */
interface ResolvedCluster {
  zones: Map<string, string>;
  /** A VPC this cluster did not create, reused (a data source). */
  existingVpc?: ExistingVpc;
  /** The VPC this cluster created on an earlier run (kept as the managed `aws_vpc.main`). */
  ownVpcId?: string;
  amiIds: Partial<Record<Architecture, string>>;
}

/** Phase 2 of a dry run: the cluster as a preview (no AWS call). */
function previewCluster(plan: SetupPlan): ResolvedCluster {
  const { flags, region } = plan;
  return {
    zones: resolveZones(flags, ["a", "b", "c", "d", "e", "f"].map((l) => `${region}${l}`)),
    amiIds: Object.fromEntries(plan.allArches.map((a) => [a, plan.amiFlags[a] ?? DRY_RUN_AMI])),
  };
}

/**
 * Phase 2: zones, the VPC and the AMIs, looked up in AWS. The cluster's saved OpenTofu state
 * (when the bucket exists) says which VPC and gateway this cluster created: those stay managed
 * resources; only a VPC the cluster did not create is reused.
 */
async function resolveCluster(
  plan: SetupPlan,
  { bucketExists }: { bucketExists: boolean },
): Promise<ResolvedCluster> {
  const { agents, flags, region, log } = plan;
  if (agents.missing.length) {
    throw new UsageError(`no podmin-agent for ${agents.missing.join(", ")}`, {
      hint: "run 'deno task bundle' (runtime-plus-bundle), or pass --agent-binary ARCH=PATH",
    });
  }
  await checkExternalBuckets(plan);
  const ec2 = new EC2Client({ region });
  const ssm = new SSMClient({ region, requestHandler: awsRequestHandler(requestTimeoutMs()) });
  const state = bucketExists ? await readSavedState(plan.store) : undefined;
  const ownVpc = managedResource(state, "aws_vpc", TF.vpc);
  const ownIgw = managedResource(state, "aws_internet_gateway", TF.igw);
  if (ownVpc && typeof ownVpc.cidr_block === "string" && ownVpc.cidr_block !== flags.vpcCidr) {
    throw new UsageError(
      `cluster ${flags.cluster}'s VPC ${ownVpc.id} is ${ownVpc.cidr_block}: --vpc-cidr ${flags.vpcCidr} would replace it and every node in it`,
      { hint: `pass --vpc-cidr ${ownVpc.cidr_block}` },
    );
  }
  log(`checking ${region}: zones and VPC ${flags.vpcCidr}`);
  const zones = resolveZones(flags, await availableZones(ec2));
  const found = await findReusableVpc(ec2, {
    cidr: flags.vpcCidr,
    cluster: flags.cluster,
    managedVpcId: typeof ownVpc?.id === "string" ? ownVpc.id : undefined,
    workDir: plan.workDir,
  });
  const reused = found.kind === "reuse" ? found.vpc : undefined;
  const contents = reused &&
    await describeReusedVpc(ec2, {
      vpcId: reused.id,
      cluster: flags.cluster,
      managedIgwId: typeof ownIgw?.id === "string" ? ownIgw.id : undefined,
    });
  log(
    reused && contents
      ? `reusing VPC ${reused.id} (never deleted by Podmin): ${
        contents.internetGatewayId
          ? `its internet gateway ${contents.internetGatewayId}`
          : ownIgw
          ? `this cluster's internet gateway ${ownIgw.id}`
          : "a new internet gateway"
      }, ${contents.foreignSubnetCidrs.length} other subnet CIDR(s) kept clear${
        contents.foreignSubnetCidrs.length ? ` (${contents.foreignSubnetCidrs.join(", ")})` : ""
      }`
      : found.kind === "own"
      ? `keeping VPC ${found.id}: created by this cluster (its OpenTofu state manages it)`
      : `a new VPC ${flags.vpcCidr} will be created`,
  );
  return {
    zones,
    ...(found.kind === "own" ? { ownVpcId: found.id } : {}),
    existingVpc: reused
      ? { id: reused.id, ipv6CidrBlock: reused.ipv6CidrBlock, ...contents }
      : undefined,
    amiIds: await resolveAmis(ssm, plan.allArches, plan.amiFlags),
  };
}

/**
 * The buckets outside the cluster's (`--workload-ca-publish s3://B/K`, `--otel-logs ca=s3://B/K`):
 * each must exist (Podmin publishes into or reads from it, never creates it), and may be in any
 * region: setup asks S3 for the bucket's region (HeadBucket, following S3's region redirect) and
 * logs it; the agents' stores follow the same redirect (core/store/s3_store.ts). The cluster bucket is
 * fine (setup creates it); a 403 means it exists but is not ours to read.
 */
async function checkExternalBuckets(plan: SetupPlan): Promise<void> {
  const { store, flags, log } = plan;
  if (!(store instanceof S3Store)) return;
  const external: [string, string][] = [
    ...(flags.workloadCaPublish
      ? [["--workload-ca-publish", flags.workloadCaPublish.bucket] as [string, string]]
      : []),
    ...(flags.otelLogs?.ca
      ? [["--otel-logs ca=", flags.otelLogs.ca.bucket] as [string, string]]
      : []),
  ];
  for (const [flag, bucket] of external) {
    if (bucket === store.bucket) continue;
    let located: { region: string; readable: boolean };
    try {
      located = await new S3Store({ bucket, region: plan.region, endpoint: store.endpoint })
        .locate();
    } catch (err) {
      if (err instanceof PermanentStoreError && /does not exist/.test(err.message)) {
        throw new UsageError(`${flag.replace(/ ca=$/, "")}: bucket ${bucket} does not exist`, {
          hint: flag === "--workload-ca-publish"
            ? "create the bucket first (Podmin publishes the workload CA bundle into it)"
            : "create the bucket and its CA bundle first (nodes read the OTel CA from it)",
        });
      }
      throw new PodminError(`cannot check bucket ${bucket}: ${(err as Error).message}`, {
        cause: err,
      });
    }
    log(
      `${flag}: bucket ${bucket} is in ${located.region}${
        located.region === plan.region ? "" : " (another region: requests follow S3's redirect)"
      }${located.readable ? "" : "; it exists, owned elsewhere (not readable here)"}`,
    );
  }
}

/** The dependency set the nodes get: the plan and each architecture's manifest entries. */
interface PublishedDependencies {
  plan: PlannedDependency[];
  entries: (arch: Architecture) => DependencyEntry[];
}

/** Phase 3 of a dry run: the dependency plan against an empty manifest (nothing uploaded). */
async function previewDependencies(plan: SetupPlan): Promise<PublishedDependencies> {
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
async function publish(plan: SetupPlan): Promise<PublishedDependencies> {
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

/** The Pod sandbox image, mirrored for the node architectures unless already there. */
async function mirrorSandboxImage(plan: SetupPlan): Promise<void> {
  const { store, log, sandboxImage } = plan;
  const ref = parseUpstreamRef(sandboxImage);
  const repo = parseImageRepository(mirrorPathOf(ref));
  if (ref.tag && (await sandboxMirrored(store, repo, ref.tag, plan.nodeArches))) {
    log(`sandbox image ${sandboxImage} already mirrored`);
    return;
  }
  log(`mirroring sandbox image ${sandboxImage}`);
  await writeImage({
    store,
    source: new UpstreamSource({ ref, plainHttp: plan.mirrorPlainHttp }),
    repo,
    tag: ref.tag,
    platforms: plan.nodeArches.map((a) => `linux/${a}`),
    log,
  });
}

/** The rendered user-data and OpenTofu configuration. */
interface RenderedConfig {
  userData: Record<string, string>;
  natUserData?: string;
  topology: ReturnType<typeof describeInfra>;
  configBytes: Uint8Array;
}

/** Phase 4: user-data per NodeGroup (and for NAT64 instances), then the configuration. */
function renderConfig(options: {
  plan: SetupPlan;
  resolved: ResolvedCluster;
  published: PublishedDependencies;
}): RenderedConfig {
  const { plan, resolved, published } = options;
  const { flags, bucket, region, dryRun } = plan;
  const userData: Record<string, string> = {};
  for (const ng of flags.nodeGroups) {
    userData[ng.name] = renderUserData({
      kind: "node",
      cluster: flags.cluster,
      bucket,
      region,
      nodeGroup: ng.name,
      architecture: ng.architecture,
      dependencies: dependenciesForKind("node", published.entries(ng.architecture)),
      sandboxImage: plan.sandboxImage,
      workloadCaPublish: flags.workloadCaPublish &&
        `s3://${flags.workloadCaPublish.bucket}/${flags.workloadCaPublish.key}`,
      otelLogs: flags.otelLogs && {
        endpoint: flags.otelLogs.endpoint,
        ca: flags.otelLogs.ca && `s3://${flags.otelLogs.ca.bucket}/${flags.otelLogs.ca.key}`,
      },
      preview: dryRun,
    }).text;
  }
  const inputs: InfraInputs = {
    spec: clusterSpecOf({ flags, bucket, zones: resolved.zones }),
    existingVpc: resolved.existingVpc,
    zones: [...new Set(resolved.zones.values())].sort(),
    userData,
    amiIds: resolved.amiIds,
  };
  const natArches = natArchitectures(flags);
  if (natArches.length) {
    const arch = natArches[0];
    inputs.nat64UserData = renderUserData({
      kind: "nat",
      cluster: flags.cluster,
      bucket,
      region,
      architecture: arch,
      dependencies: dependenciesForKind("nat", published.entries(arch)),
      preview: dryRun,
      nat: {
        ipv4SourceCidrs: [flags.vpcCidr],
        nat64: {
          // A new VPC's IPv6 block is assigned during apply: the NAT VM reads it at boot.
          sourceIpv6Cidrs: [resolved.existingVpc?.ipv6CidrBlock ?? SOURCES_DETECT],
          pool4Address: POOL4_DETECT,
        },
      },
    }).text;
  }
  const topology = describeInfra(inputs);
  const config = generateTofu(inputs);
  checkTofuSyntax(config);
  return {
    userData,
    natUserData: inputs.nat64UserData,
    topology,
    configBytes: serializeTofu(config),
  };
}

/** Phase 5: save the configuration BEFORE applying it (an interrupted setup can be torn down). */
async function applyConfig(options: {
  plan: SetupPlan;
  rendered: RenderedConfig;
  deps: SetupDeps;
}): Promise<void> {
  const { plan: { workDir, store, log, region }, rendered: { configBytes } } = options;
  await Deno.mkdir(workDir, { recursive: true });
  await Deno.writeFile(path.join(workDir, "main.tf.json"), configBytes);
  // A killed tofu's lock: named with its release (in workDir, which now holds the
  // configuration), before the bucket's saved configuration changes.
  await refuseLockedState(store, {
    release: (id) =>
      `tofu -chdir=${workDir} init && tofu -chdir=${workDir} force-unlock -force ${id}, then run setup again`,
  });
  await store.put(INFRA_CONFIG, configBytes, { contentType: "application/json" });
  log(`configuration saved to ${workDir}/main.tf.json and ${store.url}/${INFRA_CONFIG}`);
  await tofuApply({ workDir, log, binary: options.deps.tofuBinary, env: { AWS_REGION: region } });
}

/** Phase 6: wait for healthy capacity of every NodeGroup and NAT64 group. */
async function waitHealthy(options: {
  plan: SetupPlan;
  rendered: RenderedConfig;
  deps: SetupDeps;
}): Promise<void> {
  const { topology } = options.rendered;
  await waitForCapacity({
    asg: new AutoScalingClient({ region: options.plan.region }),
    groups: [
      ...topology.nodeGroups.map((ng) => ({
        asgName: ng.asgName,
        label: `NodeGroup ${ng.name}`,
        timeoutMs: CAPACITY_TIMEOUTS.nodeGroupMs,
      })),
      ...topology.nat64.map((n) => ({
        asgName: n.asgName,
        label: `NAT64 ${n.key}`,
        timeoutMs: CAPACITY_TIMEOUTS.nat64Ms,
      })),
    ],
    log: options.plan.log,
    pollMs: options.deps.capacityPollMs,
  });
}

async function writeDryRun(
  out: string,
  o: {
    flags: SetupFlags;
    bucket: string;
    configBytes: Uint8Array;
    userData: Record<string, string>;
    natUserData?: string;
    plan: PlannedDependency[];
    missing: Architecture[];
  },
): Promise<void> {
  await Deno.mkdir(path.join(out, "user-data"), { recursive: true });
  await Deno.writeFile(path.join(out, "main.tf.json"), o.configBytes);
  for (const [name, text] of Object.entries(o.userData)) {
    await Deno.writeTextFile(path.join(out, "user-data", `${name}.sh`), text);
  }
  if (o.natUserData) {
    await Deno.writeTextFile(path.join(out, "user-data", "nat64.sh"), o.natUserData);
  }
  const plan = {
    cluster: o.flags.cluster,
    region: o.flags.region,
    bucket: o.bucket,
    note:
      "dry run: nothing was uploaded or created; sizes of files never downloaded are unknown (0) until setup fetches them",
    dependencies: o.plan.map((p) => ({
      name: p.name,
      version: p.version,
      arch: p.arch,
      sha256: p.sha256,
      ...(p.sha256Url ? { sha256Url: p.sha256Url } : {}),
      size: p.size ?? null,
      source: p.source,
    })),
    missing: o.missing.map((arch) => ({
      name: "podmin-agent",
      arch,
      hint: "deno task bundle or compile, or --agent-binary",
    })),
  };
  await Deno.writeTextFile(
    path.join(out, "dependencies.json"),
    JSON.stringify(plan, null, 2) + "\n",
  );
}

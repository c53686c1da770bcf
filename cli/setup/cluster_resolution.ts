/**
 * Phase 2 of `podmin setup`: the cluster's zones, the VPC to reuse and the AMIs, looked up in AWS
 * (the buckets outside the cluster's checked on the way), or stand-ins for a dry run.
 */

import { EC2Client } from "@aws-sdk/client-ec2";
import { GetParameterCommand, SSMClient } from "@aws-sdk/client-ssm";
import { awsRequestHandler, requestTimeoutMs } from "../../core/kit/request_bounds.ts";
import type { Architecture } from "../../core/bucket/dependency_manifest.ts";
import { PermanentStoreError, PodminError, UsageError } from "../../core/kit/errors.ts";
import { S3Store } from "../../core/store/s3_store.ts";
import type { ExistingVpc } from "../infra/infra_inputs.ts";
import { TF } from "../infra/context.ts";
import { availableZones, describeReusedVpc, findReusableVpc } from "./aws_lookup.ts";
import { managedResource, readSavedState } from "./tofu_state.ts";
import { resolveZones } from "./setup_flags.ts";
import type { SetupPlan } from "./setup_plan.ts";

/** Where Debian publishes its current AMIs (SSM public parameters). */
export function debianAmiParameter(arch: Architecture): string {
  return `/aws/service/debian/release/12/latest/${arch}`;
}

/** A stand-in AMI id for --dry-run, which resolves nothing in AWS. */
export const DRY_RUN_AMI = "ami-00000000";

/** Zones, the VPC to reuse and the AMIs: looked up in AWS, or stand-ins for a dry run. */
export interface ResolvedCluster {
  zones: Map<string, string>;
  /** A VPC this cluster did not create, reused (a data source). */
  existingVpc?: ExistingVpc;
  /** The VPC this cluster created on an earlier run (kept as the managed `aws_vpc.main`). */
  ownVpcId?: string;
  amiIds: Partial<Record<Architecture, string>>;
}

/** Phase 2 of a dry run: the cluster as a preview (no AWS call). */
export function previewCluster(plan: SetupPlan): ResolvedCluster {
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
export async function resolveCluster(
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
  const ownIpv6 = managedResource(state, "aws_vpc_ipv6_cidr_block_association", TF.ipv6Association);
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
    managedIpv6AssociationId: typeof ownIpv6?.id === "string" ? ownIpv6.id : undefined,
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
      }, ${
        reused.ipv6CidrBlock
          ? `its IPv6 block ${reused.ipv6CidrBlock}`
          : "an Amazon-provided IPv6 /56 associated by Podmin (teardown removes it)"
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

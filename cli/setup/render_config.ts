/**
 * Phase 4 of `podmin setup`: user-data per NodeGroup (and for the NAT64 instances), then the
 * OpenTofu configuration, checked.
 */

import {
  dependenciesForKind,
  POOL4_DETECT,
  renderUserData,
  SOURCES_DETECT,
} from "../../vmconfig/render_user_data.ts";
import type { ClusterSpec, InfraInputs } from "../infra/infra_inputs.ts";
import { describeInfra, generateTofu, serializeTofu } from "../infra/generate_tofu.ts";
import { checkTofuSyntax } from "../infra/tofu_syntax.ts";
import type { SetupFlags } from "./setup_flags.ts";
import type { SetupPlan } from "./setup_plan.ts";
import { natArchitectures } from "./setup_plan.ts";
import type { ResolvedCluster } from "./cluster_resolution.ts";
import type { PublishedDependencies } from "./setup_publish.ts";

/** The rendered user-data and OpenTofu configuration. */
export interface RenderedConfig {
  userData: Record<string, string>;
  natUserData?: string;
  topology: ReturnType<typeof describeInfra>;
  configBytes: Uint8Array;
}

/** Phase 4: user-data per NodeGroup (and for NAT64 instances), then the configuration. */
export function renderConfig(options: {
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

/** What `podmin setup` prints before it asks: the plan, one `Key: value` line per item. */

import { LOCAL_SOURCE } from "./dependency_sync.ts";
import type { SetupPlan } from "./setup_plan.ts";
import type { ResolvedCluster } from "./cluster_resolution.ts";
import { debianAmiParameter, DRY_RUN_AMI } from "./cluster_resolution.ts";

/** What setup will create (or a dry run would): one `Key: value` line per item. */
export function planSummary(
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
          ? `reuse ${resolved.existingVpc.id} (never deleted by Podmin)${
            resolved.existingVpc.ipv6CidrBlock === undefined
              ? ", plus an Amazon-provided IPv6 /56 of Podmin's (teardown removes it)"
              : ""
          }`
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

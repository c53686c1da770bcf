/**
 * Fixtures and readers for the generator's tests: sample inputs, and helpers that look into
 * a generated configuration the way a reviewer would (by resource type, by reference).
 */

import type { ClusterSpec, InfraInputs, NodeGroupSpec } from "../../cli/infra/infra_inputs.ts";
import type { PolicyDocument } from "../../cli/infra/iam.ts";
import type { TfBody, TofuConfig } from "../../cli/infra/tofu_json.ts";

/** The account-independent ARN prefix the generator writes (partition resolved at apply). */
export const P = "arn:${data.aws_partition.current.partition}";
/** The account id interpolation in regional ARNs. */
export const ACCOUNT = "${data.aws_caller_identity.current.account_id}";

/** A NodeGroup in zone `eu-west-1<letter>`. */
export function nodeGroup(
  name: string,
  letter = "a",
  over: Partial<NodeGroupSpec> = {},
): NodeGroupSpec {
  return {
    name,
    size: 2,
    instanceType: "t4g.small",
    architecture: "arm64",
    zone: `eu-west-1${letter}`,
    ...over,
  };
}

/** Sample inputs: cluster `demo` in eu-west-1, one NodeGroup `default`, no NAT64. */
export function sampleInputs(
  spec: Partial<ClusterSpec> = {},
  over: Partial<InfraInputs> = {},
): InfraInputs {
  const nodeGroups = spec.nodeGroups ?? [nodeGroup("default")];
  const zones = [...new Set(nodeGroups.map((ng) => ng.zone))];
  return {
    spec: {
      cluster: "demo",
      region: "eu-west-1",
      bucket: "demo-cluster-bucket",
      vpcCidr: "10.0.0.0/16",
      ...spec,
      nodeGroups,
    },
    zones,
    userData: Object.fromEntries(
      nodeGroups.map((ng) => [ng.name, `#cloud-config\n# ${ng.name}\n`]),
    ),
    nat64UserData: "#cloud-config\n# nat64\n",
    amiIds: { amd64: "ami-0aaaaaaaaaaaaaaaa", arm64: "ami-0bbbbbbbbbbbbbbbb" },
    ...over,
  };
}

/** The resources of one type (empty when none). */
export function resources(config: TofuConfig, type: string): Record<string, TfBody> {
  return config.resource[type] ?? {};
}

/** One resource; throws when absent. */
export function resource(config: TofuConfig, type: string, name: string): TfBody {
  const body = config.resource[type]?.[name];
  if (!body) throw new Error(`no resource ${type}.${name}`);
  return body;
}

/** Parses a whole-string reference `${TYPE.NAME.ATTR}` (or `${data.TYPE.NAME.ATTR}`). */
export function refOf(value: unknown): { type: string; name: string; attr: string } | undefined {
  if (typeof value !== "string") return undefined;
  const m = /^\$\{(?:data\.)?([A-Za-z_][\w-]*)\.([A-Za-z_][\w-]*)\.([A-Za-z_][\w-]*)\}$/.exec(
    value,
  );
  return m ? { type: m[1], name: m[2], attr: m[3] } : undefined;
}

/** The inline policy of an IAM role, parsed. */
export function rolePolicy(config: TofuConfig, name: string): PolicyDocument {
  return JSON.parse(resource(config, "aws_iam_role_policy", name).policy as string);
}

/** Every (action, resource) pair a policy allows, as `action resource` strings. */
export function grants(policy: PolicyDocument): Set<string> {
  const out = new Set<string>();
  for (const st of policy.Statement) {
    if (st.Effect !== "Allow") throw new Error(`unexpected effect ${st.Effect}`);
    for (const a of st.Action) for (const r of st.Resource) out.add(`${a} ${r}`);
  }
  return out;
}

/** Sorted array of a set, for readable assertion diffs. */
export function sorted(set: Iterable<string>): string[] {
  return [...set].sort();
}

/**
 * The configurations `podmin setup` generates for a representative set of flag combinations,
 * shared by the tests that check them: against the AWS provider's schema
 * (tests/cluster_setup/generated_config_schema_test.ts) and with real `tofu validate`
 * (tests/cluster_setup/generated_config_validate_test.ts).
 *
 * Flags go through setup's own parsing (`parseSetupFlags`, `resolveZones`, `clusterSpecOf`);
 * what setup finds in AWS (a reused VPC) and what no flag sets yet (KMS keys) are given as
 * the generator's inputs directly.
 */

import type { ExistingVpc, InfraInputs } from "../../cli/infra/infra_inputs.ts";
import { clusterSpecOf } from "../../cli/setup/render_config.ts";
import { parseSetupFlags, type RawSetupFlags, resolveZones } from "../../cli/setup/setup_flags.ts";

const REGION = "eu-west-1";
const AVAILABLE_ZONES = ["eu-west-1a", "eu-west-1b", "eu-west-1c"];
const KMS_KEYS = [
  "arn:aws:kms:eu-west-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab",
  "arn:aws:kms:eu-west-1:123456789012:key/mrk-0123456789abcdef0123456789abcdef",
];
const REUSED_VPC: ExistingVpc = {
  id: "vpc-0123456789abcdef0",
  ipv6CidrBlock: "2a05:d018:1234:5600::/56",
  internetGatewayId: "igw-0123456789abcdef0",
  foreignSubnetCidrs: ["10.0.0.0/24", "2a05:d018:1234:5600::/64"],
};

/** Setup's raw flags from command-line words (`--flag value`, `--nat64[=…]`). */
function rawFlags(args: string[]): RawSetupFlags {
  const raw: RawSetupFlags = { cluster: "demo", region: REGION, nodeGroups: [] };
  for (let i = 0; i < args.length; i++) {
    const [flag, inline] = args[i].split(/=(.*)/s, 2);
    const value = () => inline ?? args[++i];
    if (flag === "--vpc-cidr") raw.vpcCidr = value();
    else if (flag === "--nat64") raw.nat64 = inline ?? "";
    else if (flag === "--nodegroup") raw.nodeGroups.push(value());
    else if (flag === "--workload-ca-publish") raw.workloadCaPublish = value();
    else if (flag === "--otel-logs") raw.otelLogs = value();
    else throw new Error(`test helper: unknown flag ${flag}`);
  }
  return raw;
}

/** The generator's inputs for setup flags, as setup builds them. */
function inputsFor(args: string[], over: Partial<InfraInputs> & { kmsKeyArns?: string[] } = {}) {
  const { kmsKeyArns, ...rest } = over;
  const flags = parseSetupFlags(rawFlags(args));
  const zones = resolveZones(flags, AVAILABLE_ZONES);
  const spec = clusterSpecOf({ flags, bucket: "demo-cluster-bucket", zones });
  if (kmsKeyArns) spec.kmsKeyArns = kmsKeyArns;
  const inputs: InfraInputs = {
    spec,
    zones: [...new Set(zones.values())].sort(),
    userData: Object.fromEntries(
      flags.nodeGroups.map((ng) => [ng.name, `#!/bin/sh\n# ${ng.name}\n`]),
    ),
    nat64UserData: "#!/bin/sh\n# nat64\n",
    amiIds: { amd64: "ami-0aaaaaaaaaaaaaaaa", arm64: "ami-0bbbbbbbbbbbbbbbb" },
    ...rest,
  };
  return inputs;
}

const SEED = [
  "--vpc-cidr",
  "10.0.0.0/16",
  "--nat64",
  "--nodegroup",
  "default",
  "--nodegroup",
  "workers,size=3,disk-size=100,instance-type=c8g.large,zone=b,nat64=t4g.small",
];

/** Each combination: its name and the generator's inputs. */
export const GENERATED_CONFIGURATIONS: [string, InfraInputs][] = [
  ["the seed's example", inputsFor(SEED)],
  ["no NAT64 at all", inputsFor(["--vpc-cidr", "10.0.0.0/16", "--nodegroup", "default"])],
  [
    "--nat64=instance-type=… (an amd64 NAT64 for arm64 nodes)",
    inputsFor([
      "--vpc-cidr",
      "10.20.0.0/16",
      "--nat64=instance-type=t3.micro",
      "--nodegroup",
      "default,zone=a",
      "--nodegroup",
      "batch,zone=c,size=0",
    ]),
  ],
  [
    "a dedicated NAT64 per NodeGroup, no shared one",
    inputsFor([
      "--vpc-cidr",
      "10.0.0.0/20",
      "--nodegroup",
      "web,nat64=t4g.nano",
      "--nodegroup",
      "api,zone=b,nat64=c7g.medium",
      "--nodegroup",
      "jobs,zone=b,nat64=t3.nano,instance-type=m7i.large",
    ]),
  ],
  [
    "mixed amd64 and arm64 NodeGroups",
    inputsFor([
      "--vpc-cidr",
      "10.0.0.0/16",
      "--nat64",
      "--nodegroup",
      "arm,instance-type=c8g.large",
      "--nodegroup",
      "x86,instance-type=m7i.large,zone=b,disk-size=50",
      "--nodegroup",
      "amd,instance-type=c6a.xlarge,zone=b",
    ]),
  ],
  ["a reused VPC with IPv6 and a gateway", inputsFor(SEED, { existingVpc: REUSED_VPC })],
  [
    "a reused VPC without IPv6 or a gateway",
    inputsFor(SEED, { existingVpc: { id: REUSED_VPC.id, foreignSubnetCidrs: ["10.0.0.0/24"] } }),
  ],
  [
    "--workload-ca-publish and --otel-logs ca=",
    inputsFor([
      ...SEED,
      "--workload-ca-publish",
      "s3://org-cas/workloads/demo/ca.pem",
      "--otel-logs",
      "https://otel.example.com:4318,ca=s3://org-cas/otel/ca.pem",
    ]),
  ],
  ["KMS keys (no setup flag yet: generator input)", inputsFor(SEED, { kmsKeyArns: KMS_KEYS })],
  [
    "everything at once",
    inputsFor([
      "--vpc-cidr",
      "10.0.0.0/16",
      "--nat64=instance-type=t4g.micro",
      "--nodegroup",
      "default",
      "--nodegroup",
      "workers,size=3,disk-size=100,instance-type=c8g.large,zone=b,nat64=t4g.small",
      "--nodegroup",
      "x86,instance-type=m7i.large,zone=c",
      "--workload-ca-publish",
      "s3://org-cas/workloads/demo/ca.pem",
      "--otel-logs",
      "https://otel.example.com:4318,ca=s3://org-cas/otel/ca.pem",
    ], { existingVpc: { id: REUSED_VPC.id }, kmsKeyArns: KMS_KEYS }),
  ],
];

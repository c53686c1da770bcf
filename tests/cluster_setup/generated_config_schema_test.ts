/**
 * The configuration `podmin setup` generates, for a representative set of flag combinations,
 * checked against the AWS provider's own schema (6.48, `tests/support/provider_schema.ts`):
 * resource and data source types, argument and block names, required and computed-only
 * arguments, literal types, nesting modes and item limits, and references.
 *
 * Flags go through setup's own parsing (`parseSetupFlags`, `resolveZones`, `clusterSpecOf`);
 * what setup finds in AWS (a reused VPC) and what no flag sets yet (KMS keys) are given as
 * the generator's inputs directly.
 */

import assert from "node:assert/strict";
import type { ExistingVpc, InfraInputs } from "../../cli/infra/infra_inputs.ts";
import { generateTofu } from "../../cli/infra/generate_tofu.ts";
import { checkProviderSchema } from "../support/provider_schema_check.ts";
import { checkTofuSyntax } from "../../cli/infra/tofu_syntax.ts";
import { clusterSpecOf } from "../../cli/setup/render_config.ts";
import { parseSetupFlags, type RawSetupFlags, resolveZones } from "../../cli/setup/setup_flags.ts";
import {
  awsProviderSchema,
  COMMITTED_SCHEMA,
  readSchemaFile,
  SHARED_SCHEMA,
} from "../support/provider_schema.ts";
import { testWith } from "../support/requirements.ts";
import { resources } from "../support/tofu_config.ts";

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

const COMBINATIONS: [string, InfraInputs][] = [
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

const schema = await awsProviderSchema();

for (const [name, inputs] of COMBINATIONS) {
  Deno.test(`generated configuration matches the AWS provider schema: ${name}`, () => {
    const config = generateTofu(inputs);
    checkTofuSyntax(config);
    checkProviderSchema({ config, schema });
  });
}

Deno.test("the combinations cover what they claim", () => {
  const config = (name: string) => generateTofu(COMBINATIONS.find(([n]) => n === name)![1]);
  const seed = config("the seed's example");
  assert.deepEqual(Object.keys(resources(seed, "aws_autoscaling_group")).sort(), [
    "nat64_ng_workers",
    "nat64_zone_a",
    "ng_default",
    "ng_workers",
  ]);
  const mixed = config("mixed amd64 and arm64 NodeGroups");
  assert.deepEqual(Object.keys(mixed.data.aws_ami).sort(), ["amd64", "arm64"]);
  const reused = config("a reused VPC with IPv6 and a gateway");
  assert.ok(reused.data.aws_vpc && reused.data.aws_internet_gateway);
  const bare = config("a reused VPC without IPv6 or a gateway");
  assert.ok(resources(bare, "aws_vpc_ipv6_cidr_block_association").main);
  const cas = JSON.stringify(config("--workload-ca-publish and --otel-logs ca=").resource);
  assert.match(cas, /PublishWorkloadCa/);
  assert.match(cas, /ReadOtelLogsCa/);
  assert.match(
    JSON.stringify(config("KMS keys (no setup flag yet: generator input)")),
    /kms:Decrypt/,
  );
});

testWith(
  "the committed provider schema is the one beside the clone (shared/tofu)",
  { files: [SHARED_SCHEMA] },
  async () => {
    assert.deepEqual(
      await readSchemaFile(COMMITTED_SCHEMA),
      await readSchemaFile(SHARED_SCHEMA),
      "refresh tests/support/aws-provider-6.48-schema.json: copy shared/tofu's file, deno fmt it",
    );
  },
);

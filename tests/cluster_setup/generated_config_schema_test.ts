/**
 * The configuration `podmin setup` generates, for a representative set of flag combinations,
 * checked against the AWS provider's own schema (6.48, `tests/support/provider_schema.ts`):
 * resource and data source types, argument and block names, required and computed-only
 * arguments, literal types, nesting modes and item limits, and references. The combinations
 * are tests/support/generated_configs.ts's (tests/cluster_setup/generated_config_validate_test.ts
 * runs real `tofu validate` on the same ones).
 */

import assert from "node:assert/strict";
import { generateTofu } from "../../cli/infra/generate_tofu.ts";
import { checkProviderSchema } from "../support/provider_schema_check.ts";
import { checkTofuSyntax } from "../../cli/infra/tofu_syntax.ts";
import {
  awsProviderSchema,
  COMMITTED_SCHEMA,
  readSchemaFile,
  SHARED_SCHEMA,
} from "../support/provider_schema.ts";
import { testWith } from "../support/requirements.ts";
import { resources } from "../support/tofu_config.ts";
import { GENERATED_CONFIGURATIONS as COMBINATIONS } from "../support/generated_configs.ts";

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

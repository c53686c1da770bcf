/**
 * Tests of the provider schema checker itself: a known-good generated configuration passes,
 * and each kind of deliberate mistake is reported with the resource, the path and the rule.
 */

import assert from "node:assert/strict";
import { generateTofu } from "../../cli/infra/generate_tofu.ts";
import {
  checkProviderSchema,
  formatViolation,
  ProviderSchemaMismatchError,
  providerSchemaViolations,
} from "./provider_schema_check.ts";
import type { ProviderSchema } from "./provider_schema_reader.ts";
import type { TfBody, TofuConfig } from "../../cli/infra/tofu_json.ts";
import { awsProviderSchema } from "./provider_schema.ts";
import { nodeGroup, resource, sampleInputs } from "./tofu_config.ts";

const schema: ProviderSchema = await awsProviderSchema();

/** A fresh generated configuration (NAT64 on, two NodeGroups) to break on purpose. */
function config(): TofuConfig {
  return generateTofu(sampleInputs({
    nat64: {},
    nodeGroups: [nodeGroup("default", "a"), nodeGroup("workers", "b", { nat64: "t4g.small" })],
  }));
}

/** The violations of a configuration changed by `edit`, formatted. */
function problems(edit: (c: TofuConfig) => void): string[] {
  const c = config();
  edit(c);
  return providerSchemaViolations({ config: c, schema }).map(formatViolation);
}

Deno.test("schema check: the unmodified configuration passes", () => {
  assert.deepEqual(problems(() => {}), []);
  checkProviderSchema({ config: config(), schema });
});

Deno.test("schema check: a wrong argument name is named, with a suggestion", () => {
  assert.deepEqual(
    problems((c) => {
      const subnet = resource(c, "aws_subnet", "nodes_zone_a");
      subnet.ipv6_cidr_blok = subnet.ipv6_cidr_block;
      delete subnet.ipv6_cidr_block;
    }),
    [
      "aws_subnet.nodes_zone_a: ipv6_cidr_blok: aws_subnet has no argument or block " +
      "ipv6_cidr_blok (did you mean ipv6_cidr_block?) [unknown-name]",
    ],
  );
  assert.deepEqual(
    problems((c) => {
      const lt = resource(c, "aws_launch_template", "ng_default");
      (lt.network_interfaces as TfBody[])[1].ipv6_adress_count = 1;
    }),
    [
      "aws_launch_template.ng_default: network_interfaces[1].ipv6_adress_count: " +
      "aws_launch_template block network_interfaces has no argument or block ipv6_adress_count " +
      "(did you mean ipv6_address_count?) [unknown-name]",
    ],
  );
});

Deno.test("schema check: a missing required argument", () => {
  assert.deepEqual(
    problems((c) => {
      delete resource(c, "aws_autoscaling_group", "ng_default").max_size;
      resource(c, "aws_route", "nodes_zone_a_ipv6_default").route_table_id = null;
    }).sort(),
    [
      "aws_route.nodes_zone_a_ipv6_default: route_table_id: the argument route_table_id is " +
      "required [required]",
      "aws_autoscaling_group.ng_default: max_size: the argument max_size is required [required]",
    ].sort(),
  );
});

Deno.test("schema check: a computed-only attribute set", () => {
  assert.deepEqual(
    problems((c) => {
      resource(c, "aws_launch_template", "ng_workers").latest_version = 3;
    }),
    [
      "aws_launch_template.ng_workers: latest_version: the argument is computed by the provider " +
      "and cannot be set [computed-only]",
    ],
  );
});

Deno.test("schema check: a block with too many items", () => {
  assert.deepEqual(
    problems((c) => {
      const asg = resource(c, "aws_autoscaling_group", "ng_default");
      asg.launch_template = [asg.launch_template, asg.launch_template];
    }),
    [
      "aws_autoscaling_group.ng_default: launch_template: at most 1 block(s) allowed, got 2 " +
      "[max-items]",
    ],
  );
});

Deno.test("schema check: types, unknown resource types, nesting and references", () => {
  const found = problems((c) => {
    const asg = resource(c, "aws_autoscaling_group", "ng_default");
    asg.min_size = "two";
    asg.health_check_grace_period = "120"; // OpenTofu converts it: not a violation
    asg.vpc_zone_identifier = "${aws_subnet.nodes_zone_z.id}";
    asg.instance_refresh = "${local.refresh}";
    asg.timeouts = [{ delete: "15m" }, { delete: "20m" }];
    resource(c, "aws_subnet", "nodes_zone_a").enable_dns64 = { on: true };
    resource(c, "aws_route", "nodes_zone_a_ipv6_default").gateway_id =
      "${aws_internet_gateway.main.gateway_id}";
    c.output.vpc_id.value = "${data.aws_vpc.main.id}";
    c.resource.aws_subnett = { x: { vpc_id: "${aws_vpc.main.id}" } };
  });
  assert.deepEqual(found.sort(), [ // sorted
    "aws_autoscaling_group.ng_default: instance_refresh: a list block cannot be an expression; " +
    "write it as an object [nesting]",
    'aws_autoscaling_group.ng_default: min_size: expected number, got a string ("two"), which ' +
    "OpenTofu cannot convert [type]",
    "aws_autoscaling_group.ng_default: timeouts: a single block occurs at most once, got 2 " +
    "[nesting]",
    "aws_autoscaling_group.ng_default: vpc_zone_identifier: aws_subnet.nodes_zone_z.id refers to " +
    "aws_subnet.nodes_zone_z, which the configuration does not declare [reference]",
    "aws_route.nodes_zone_a_ipv6_default: gateway_id: aws_internet_gateway.main.gateway_id: no " +
    "attribute gateway_id in the schema [reference]",
    "aws_subnet.nodes_zone_a: enable_dns64: expected bool, got an object [type]",
    "aws_subnett.x: (body): resource type aws_subnett does not exist in " +
    "registry.opentofu.org/hashicorp/aws (did you mean aws_subnet?) [unknown-type]",
    "output.vpc_id: value: data.aws_vpc.main.id refers to data.aws_vpc.main, which the " +
    "configuration does not declare [reference]",
  ]);
});

Deno.test("schema check: checkProviderSchema throws a typed error listing every violation", () => {
  const c = config();
  resource(c, "aws_launch_template", "ng_workers").latest_version = 3;
  delete resource(c, "aws_autoscaling_group", "ng_default").min_size;
  assert.throws(() => checkProviderSchema({ config: c, schema }), (e: unknown) => {
    assert.ok(e instanceof ProviderSchemaMismatchError);
    assert.equal(e.violations.length, 2);
    assert.match(e.message, /^2 problem\(s\) against the registry.opentofu.org\/hashicorp\/aws/);
    assert.match(e.message, /aws_autoscaling_group\.ng_default: min_size: .* \[required\]/);
    assert.match(e.hint ?? "", /cli\/infra/);
    return true;
  });
});

Deno.test("schema check: every argument and block the generator writes is looked up", () => {
  // Renaming any one top-level key of any resource or data source must be reported, so no
  // part of the configuration escapes the check unnoticed.
  const META = new Set(["depends_on", "lifecycle", "count", "for_each", "provider"]);
  const original = config();
  let renamed = 0;
  for (const kind of ["resource", "data"] as const) {
    for (const [type, byName] of Object.entries(original[kind])) {
      for (const [name, body] of Object.entries(byName)) {
        for (const key of Object.keys(body).filter((k) => !META.has(k))) {
          const found = problems((c) => {
            const b = c[kind][type][name];
            b[`${key}_x`] = b[key];
            delete b[key];
          });
          const address = kind === "data" ? `data.${type}.${name}` : `${type}.${name}`;
          assert.ok(
            found.some((p) =>
              p.startsWith(`${address}: ${key}_x: `) && p.endsWith("[unknown-name]")
            ),
            `renaming ${address}.${key} went unnoticed: ${found.join("; ")}`,
          );
          renamed++;
        }
      }
    }
  }
  assert.ok(renamed > 100, `only ${renamed} keys renamed`);
});

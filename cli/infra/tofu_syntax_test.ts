/**
 * The generated configuration is valid Terraform-language JSON, checked twice:
 *
 * 1. with HashiCorp's own parsers (hcl/v2's JSON parser, and its native template parser on
 *    every string), compiled to WebAssembly in npm `@cdktf/hcl2json`: its `getExpressionAst`
 *    parses the whole document as an HCL JSON expression and every string as a template, the
 *    way OpenTofu reads `.tf.json` values; every reference found by that parser must name a
 *    declared resource or data source;
 * 2. with `tofu_syntax.ts`, the structural rules of the JSON syntax (block nesting, labels,
 *    meta-arguments, references) that the expression parser does not know.
 *
 * (`parse()` of the same package only reads native syntax, and `tofu validate` needs the AWS
 * provider, which cannot be downloaded here.)
 */

import assert from "node:assert/strict";
import { getExpressionAst } from "@cdktf/hcl2json";
import { ValidationError } from "../../core/kit/errors.ts";
import { generateTofu, serializeTofu } from "./generate_tofu.ts";
import type { InfraInputs } from "./infra_inputs.ts";
import { checkTofuSyntax, scanTemplate, tofuSyntaxProblems } from "./tofu_syntax.ts";
import { literal, type TofuConfig } from "./tofu_json.ts";
import { nodeGroup, sampleInputs } from "../../tests/support/tofu_config.ts";

const VARIANTS: Record<string, InfraInputs> = {
  "one NodeGroup, created VPC": sampleInputs(),
  "shared and dedicated NAT64, two architectures": sampleInputs({
    nat64: { instanceType: "c7a.large" },
    nodeGroups: [
      nodeGroup("default", "a"),
      nodeGroup("workers", "b", {
        size: 3,
        diskSizeGiB: 100,
        instanceType: "c8g.large",
        nat64: "t4g.small",
      }),
      nodeGroup("x86", "c", { instanceType: "m7i.large", architecture: "amd64" }),
    ],
  }),
  "reused VPC with IPv6 and gateway": sampleInputs({ nat64: {} }, {
    existingVpc: {
      id: "vpc-0123456789abcdef0",
      ipv6CidrBlock: "2a05:d018:1234:5600::/56",
      internetGatewayId: "igw-0123456789abcdef0",
    },
  }),
  "reused bare VPC": sampleInputs({ nat64: {} }, { existingVpc: { id: "vpc-0123456789abcdef0" } }),
  "publish, CA and KMS with template characters in a key": sampleInputs({
    workloadCaPublish: { bucket: "pub-lic", key: "trust/%{cluster}/workload-ca.pem" },
    otelLogsCa: { bucket: "telemetry", key: "ca.pem" },
    kmsKeyArns: ["arn:aws:kms:eu-west-1:123456789012:key/mrk-0123456789abcdef"],
  }),
  "long names": sampleInputs({ cluster: "c".repeat(63), nat64: {} }),
};

/** A configuration being broken on purpose: any path may be assigned. */
// deno-lint-ignore no-explicit-any
type Loose = Record<string, any>;

interface AstNode {
  type: string;
  meta?: { traversal?: { segment: string }[]; name?: string };
  children?: AstNode[];
}

function walk(node: AstNode, visit: (n: AstNode) => void): void {
  visit(node);
  for (const child of node.children ?? []) walk(child, visit);
}

function declared(config: TofuConfig): Set<string> {
  const out = new Set<string>();
  for (const [type, byName] of Object.entries(config.resource)) {
    for (const name of Object.keys(byName)) out.add(`${type}.${name}`);
  }
  for (const [type, byName] of Object.entries(config.data)) {
    for (const name of Object.keys(byName)) out.add(`data.${type}.${name}`);
  }
  return out;
}

Deno.test("HCL's JSON and template parsers accept every generated configuration", async () => {
  for (const [what, inputs] of Object.entries(VARIANTS)) {
    const config = generateTofu(inputs);
    const text = new TextDecoder().decode(serializeTofu(config));
    const ast = (await getExpressionAst("main.tf.json", text)) as AstNode | null;
    assert.ok(ast, what);
    const known = declared(config);
    const functions = new Set<string>();
    let references = 0;
    walk(ast, (n) => {
      if (n.type === "function") functions.add(n.meta!.name!);
      if (n.type === "scopeTraversal") {
        const segs = n.meta!.traversal!.map((s) => s.segment);
        const target = segs[0] === "data" ? segs.slice(0, 3).join(".") : segs.slice(0, 2).join(".");
        assert.ok(known.has(target), `${what}: ${segs.join(".")} is not declared`);
        references++;
      }
    });
    assert.ok(references > 20, `${what}: the parser saw the references (${references})`);
    assert.ok([...functions].every((f) => f === "cidrsubnet"), `${what}: ${[...functions]}`);
  }
});

Deno.test("the parser check has teeth: a broken interpolation is rejected", async () => {
  const text = new TextDecoder().decode(serializeTofu(generateTofu(sampleInputs())));
  const broken = text.replace("${aws_vpc.main.id}", "${aws_vpc.main.id");
  assert.notEqual(broken, text);
  await assert.rejects(getExpressionAst("main.tf.json", broken));
  await assert.rejects(getExpressionAst("main.tf.json", text.slice(0, -3)));
});

Deno.test("every generated configuration passes the structural validator", () => {
  for (const [what, inputs] of Object.entries(VARIANTS)) {
    assert.deepEqual(tofuSyntaxProblems(generateTofu(inputs)), [], what);
    assert.doesNotThrow(() => checkTofuSyntax(JSON.parse(JSON.stringify(generateTofu(inputs)))));
  }
});

Deno.test("the structural validator reports what breaks the JSON syntax rules", () => {
  const config = () => JSON.parse(JSON.stringify(generateTofu(sampleInputs()))) as Loose;
  const cases: [string, (c: Loose) => void, RegExp][] = [
    ["unknown block", (c) => (c.resources = {}), /resources: unknown top-level block type/],
    ["bad label", (c) => (c.resource.aws_vpc["1main"] = {}), /name is not an identifier/],
    [
      "dangling reference",
      (c) => (c.resource.aws_subnet.nodes_zone_a.vpc_id = "${aws_vpc.other.id}"),
      /reference to undeclared aws_vpc\.other\.id/,
    ],
    [
      "undeclared data source",
      (c) => (c.resource.aws_vpc.main.tags.x = "${data.aws_region.current.name}"),
      /undeclared data\.aws_region\.current/,
    ],
    [
      "unterminated interpolation",
      (c) => (c.resource.aws_vpc.main.cidr_block = "${var.cidr"),
      /unterminated \$\{/,
    ],
    ["empty interpolation", (c) => (c.resource.aws_vpc.main.cidr_block = "${ }"), /empty \$\{\}/],
    [
      "templated depends_on",
      (
        c,
      ) => (c.resource.aws_autoscaling_group.ng_default.depends_on = [
        "${aws_iam_role_policy.node}",
      ]),
      /depends_on entries are bare references/,
    ],
    [
      "depends_on on nothing",
      (c) => (c.resource.aws_autoscaling_group.ng_default.depends_on = ["aws_iam_role.ghost"]),
      /undeclared aws_iam_role\.ghost/,
    ],
    [
      "output without value",
      (c) => (c.output.vpc_id = { description: "x" }),
      /output\.vpc_id: missing value/,
    ],
    ["two backends", (c) => (c.terraform.backend.local = {}), /exactly one backend/],
    [
      "interpolation in terraform",
      (c) => (c.terraform.backend.s3.bucket = "${var.bucket}"),
      /may not contain interpolations/,
    ],
    [
      "bad lifecycle",
      (c) => (c.resource.aws_vpc.main.lifecycle = { prevent: true }),
      /unknown lifecycle argument/,
    ],
  ];
  for (const [what, mutate, message] of cases) {
    const c = config();
    mutate(c);
    const problems = tofuSyntaxProblems(c);
    assert.ok(problems.some((p) => message.test(p)), `${what}: ${problems.join("; ")}`);
    assert.throws(() => checkTofuSyntax(c), ValidationError);
  }
});

Deno.test("templates: escapes are literal, interpolations yield their references", () => {
  assert.deepEqual(scanTemplate("a $${b} %%{c} d"), { references: [] });
  assert.deepEqual(scanTemplate(literal("x ${y} %{z}")), { references: [] });
  assert.deepEqual(scanTemplate("${cidrsubnet(aws_vpc.main.ipv6_cidr_block, 8, 255)}").references, [
    [
      "aws_vpc",
      "main",
      "ipv6_cidr_block",
    ],
  ]);
  assert.deepEqual(scanTemplate('${a.b == "x}y" ? c.d : e.f}').references, [
    ["a", "b"],
    ["c", "d"],
    ["e", "f"],
  ]);
  assert.match(scanTemplate("${foo(}").error ?? "", /unbalanced/);
});

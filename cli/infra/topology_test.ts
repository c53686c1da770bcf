import assert from "node:assert/strict";
import { ValidationError } from "../../core/kit/errors.ts";
import { formatCidr, overlaps, parseCidr, parseIpv4Cidr, subnetOf } from "./cidr.ts";
import { checkInfraInputs } from "./infra_inputs.ts";
import { generateTofu } from "./generate_tofu.ts";
import { boundedName, planTopology } from "./topology.ts";
import { nodeGroup, resources, sampleInputs } from "../../tests/support/tofu_config.ts";

Deno.test("cidr: parse, carve and compare blocks of both families", () => {
  const v4 = parseIpv4Cidr("10.0.0.0/16");
  assert.equal(formatCidr(subnetOf(v4, { length: 27, index: 0 })), "10.0.0.0/27");
  assert.equal(formatCidr(subnetOf(v4, { length: 27, index: 2047 })), "10.0.255.224/27");
  assert.throws(() => subnetOf(v4, { length: 27, index: 2048 }), ValidationError);
  assert.throws(() => subnetOf(v4, { length: 8, index: 0 }), ValidationError);
  const v6 = parseCidr("2a05:d018:1234:5600::/56");
  assert.equal(formatCidr(subnetOf(v6, { length: 64, index: 255 })), "2a05:d018:1234:56ff::/64");
  assert.equal(formatCidr(subnetOf(v6, { length: 64, index: 0 })), "2a05:d018:1234:5600::/64");
  assert.ok(overlaps(parseCidr("10.0.255.0/24"), parseCidr("10.0.255.224/27")));
  assert.ok(!overlaps(parseCidr("10.0.0.0/24"), parseCidr("10.0.255.224/27")));
  assert.ok(!overlaps(parseCidr("10.0.0.0/8"), v6), "different families never overlap");
  for (const bad of ["10.0.0.0", "10.0.0.1/16", "10.0.0.256/24", "10.00.0.0/16", "10.0.0.0/33"]) {
    assert.throws(() => parseIpv4Cidr(bad), ValidationError, bad);
  }
});

Deno.test("boundedName: short names unchanged, long ones cut with a stable hash", () => {
  assert.equal(boundedName(["podmin", "demo", "node"], 64), "podmin-demo-node");
  const long = boundedName(["podmin", "x".repeat(63), "eu-west-1", "node"], 64);
  assert.equal(long.length, 64);
  assert.equal(long, boundedName(["podmin", "x".repeat(63), "eu-west-1", "node"], 64));
  assert.notEqual(long, boundedName(["podmin", "x".repeat(63), "eu-west-2", "node"], 64));
});

function subnetCidrs(inputs: ReturnType<typeof sampleInputs>): Record<string, unknown> {
  const config = generateTofu(inputs);
  return Object.fromEntries(
    Object.entries(resources(config, "aws_subnet")).map((
      [n, s],
    ) => [n, [s.cidr_block, s.ipv6_cidr_block]]),
  );
}

Deno.test("subnet addresses do not move when NodeGroups come and go", () => {
  const vpc = {
    existingVpc: { id: "vpc-0123456789abcdef0", ipv6CidrBlock: "2a05:d018:1234:5600::/56" },
  };
  const before = subnetCidrs(sampleInputs({
    nat64: {},
    nodeGroups: [nodeGroup("default", "a"), nodeGroup("workers", "b", { nat64: "t4g.small" })],
  }, vpc));
  const after = subnetCidrs(sampleInputs({
    nat64: {},
    nodeGroups: [
      nodeGroup("aaa", "a", { nat64: "t4g.small" }),
      nodeGroup("default", "a"),
      nodeGroup("extra", "c"),
      nodeGroup("workers", "b", { nat64: "t4g.small" }),
    ],
  }, vpc));
  for (const [name, cidrs] of Object.entries(before)) assert.deepEqual(after[name], cidrs, name);
  // All planned blocks are distinct.
  const all = Object.values(after).flat().filter((c): c is string => typeof c === "string");
  assert.equal(new Set(all).size, all.length);
});

Deno.test("dedicated subnets: one /64 each, distinct even when names collide on the hash", () => {
  const names = Array.from({ length: 40 }, (_, i) => `ng${i}`);
  const c = checkInfraInputs(sampleInputs({
    nodeGroups: names.map((n) => nodeGroup(n, "a", { nat64: "t4g.nano" })),
  }));
  const t = planTopology(c);
  const slots = t.domains.filter((d) => d.key.startsWith("ng-")).map((d) => d.ipv6Index);
  assert.equal(slots.length, 40);
  assert.equal(new Set(slots).size, 40);
  for (const s of slots) assert.ok(s >= 16 && s <= 191, `slot ${s}`);
  assert.deepEqual(planTopology(c).domains, t.domains, "deterministic");
});

Deno.test("a reused VPC's own subnets must not overlap Podmin's planned subnets", () => {
  const inputs = sampleInputs({ nat64: {} }, {
    existingVpc: {
      id: "vpc-0123456789abcdef0",
      ipv6CidrBlock: "2a05:d018:1234:5600::/56",
      foreignSubnetCidrs: ["10.0.0.0/24", "2a05:d018:1234:5600::/64"],
    },
  });
  assert.doesNotThrow(() => generateTofu(inputs));
  inputs.existingVpc!.foreignSubnetCidrs!.push("10.0.255.0/24");
  assert.throws(() => generateTofu(inputs), /10\.0\.255\.0\/24 overlaps Podmin's NAT64 subnet/);
  inputs.existingVpc!.foreignSubnetCidrs = ["2a05:d018:1234:56ff::/64"];
  assert.throws(() => generateTofu(inputs), /overlaps Podmin's node subnet zone-a/);
});

Deno.test("a small VPC CIDR that cannot hold a zone's NAT64 subnet is refused", () => {
  const inputs = sampleInputs({
    vpcCidr: "10.0.0.0/24",
    nat64: {},
    nodeGroups: [nodeGroup("x", "i")],
  });
  assert.throws(() => generateTofu(inputs), /too small for a NAT64 subnet in zone eu-west-1i/);
  inputs.spec.nodeGroups[0].zone = "eu-west-1h";
  inputs.zones = ["eu-west-1h"];
  assert.doesNotThrow(() => generateTofu(inputs));
});

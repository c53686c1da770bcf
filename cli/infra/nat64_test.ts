import assert from "node:assert/strict";
import { generateTofu } from "./generate_tofu.ts";
import type { TfBody, TofuConfig } from "./tofu_json.ts";
import {
  nodeGroup,
  refOf,
  resource,
  resources,
  sampleInputs,
} from "../../tests/support/tofu_config.ts";

/** The route domain (subnet name) of a NodeGroup, via its ASG. */
function subnetOfNodeGroup(config: TofuConfig, ng: string): string {
  const asg = resource(config, "aws_autoscaling_group", `ng_${ng}`);
  return refOf((asg.vpc_zone_identifier as string[])[0])!.name;
}

/** The ENI the 64:ff9b::/96 route of a subnet's route table points at, or undefined. */
function nat64Target(config: TofuConfig, subnet: string): string | undefined {
  const table = refOf(resource(config, "aws_route_table_association", subnet).route_table_id)!.name;
  const routes = Object.values(resources(config, "aws_route")).filter((r) =>
    refOf(r.route_table_id)?.name === table && r.destination_ipv6_cidr_block === "64:ff9b::/96"
  );
  assert.ok(routes.length <= 1);
  if (routes.length === 0) return undefined;
  const target = refOf(routes[0].network_interface_id)!;
  assert.equal(target.type, "aws_network_interface", "NAT64 routes point at stable ENIs");
  assert.equal(routes[0].instance_id, undefined);
  return target.name;
}

/** Checks one NAT64 group: stable ENI + EIP + role + launch template + ASG of one. */
function assertNat64Group(
  config: TofuConfig,
  name: string,
  expect: { zone: string; instanceType: string; ami: string; key: string },
): void {
  const eni = resource(config, "aws_network_interface", name);
  assert.equal(eni.source_dest_check, false);
  assert.equal(eni.ipv6_address_count, 1);
  const subnet = resource(config, "aws_subnet", refOf(eni.subnet_id)!.name);
  assert.equal(subnet.availability_zone, expect.zone);
  assert.equal(
    typeof subnet.cidr_block,
    "string",
    "the ENI's subnet is dual-stack (the EIP needs IPv4)",
  );
  assert.equal((eni.tags as Record<string, string>)["podmin:nat64"], expect.key);

  assert.equal(resource(config, "aws_eip", name).domain, "vpc");
  const assoc = resource(config, "aws_eip_association", name);
  assert.deepEqual(refOf(assoc.allocation_id), { type: "aws_eip", name, attr: "id" });
  assert.deepEqual(refOf(assoc.network_interface_id), {
    type: "aws_network_interface",
    name,
    attr: "id",
  });
  assert.equal(assoc.instance_id, undefined, "the EIP follows the ENI, not an instance");

  const asg = resource(config, "aws_autoscaling_group", name);
  assert.deepEqual([asg.min_size, asg.max_size, asg.desired_capacity], [1, 1, 1]);
  assert.equal(asg.wait_for_capacity_timeout, "15m");
  assert.deepEqual(asg.vpc_zone_identifier, [`\${aws_subnet.${refOf(eni.subnet_id)!.name}.id}`]);
  assert.equal(refOf((asg.launch_template as TfBody).version)?.attr, "latest_version");
  assert.deepEqual(asg.instance_refresh, {
    strategy: "Rolling",
    preferences: { min_healthy_percentage: 0, max_healthy_percentage: 100, skip_matching: true },
  });
  assert.ok((asg.depends_on as string[]).includes(`aws_iam_role_policy.${name}`));

  const lt = resource(config, "aws_launch_template", name);
  assert.equal(lt.instance_type, expect.instanceType);
  assert.equal(lt.image_id, expect.ami);
  assert.equal((lt.metadata_options as TfBody).http_tokens, "required");
  assert.equal((lt.metadata_options as TfBody).instance_metadata_tags, "enabled");
  assert.deepEqual(lt.iam_instance_profile, { arn: `\${aws_iam_instance_profile.${name}.arn}` });
  const boot = lt.network_interfaces as TfBody[];
  assert.equal(boot.length, 1, "the stable ENI is attached at boot, not declared here");
  assert.equal(boot[0].network_interface_id, undefined);
  const instanceTags = (lt.tag_specifications as TfBody[]).find((s) =>
    s.resource_type === "instance"
  )!
    .tags as Record<string, string>;
  assert.equal(instanceTags["podmin:nat64-eni"], `\${aws_network_interface.${name}.id}`);
  assert.equal(instanceTags["podmin:nat64"], expect.key);
  assert.equal(
    new TextDecoder().decode(Uint8Array.from(atob(lt.user_data as string), (c) => c.charCodeAt(0))),
    "#cloud-config\n# nat64\n",
  );
}

Deno.test("--nat64: one shared t4g.nano NAT64 per zone in use; node routes point at its stable ENI", () => {
  const config = generateTofu(sampleInputs({
    nat64: {},
    nodeGroups: [nodeGroup("a1", "a"), nodeGroup("a2", "a"), nodeGroup("b1", "b")],
  }));
  assert.deepEqual(Object.keys(resources(config, "aws_network_interface")).sort(), [
    "nat64_zone_a",
    "nat64_zone_b",
  ]);
  for (const letter of ["a", "b"]) {
    assertNat64Group(config, `nat64_zone_${letter}`, {
      zone: `eu-west-1${letter}`,
      instanceType: "t4g.nano",
      ami: "ami-0bbbbbbbbbbbbbbbb",
      key: `zone-${letter}`,
    });
  }
  for (const [ng, letter] of [["a1", "a"], ["a2", "a"], ["b1", "b"]]) {
    const subnet = subnetOfNodeGroup(config, ng);
    assert.equal(subnet, `nodes_zone_${letter}`);
    assert.equal(nat64Target(config, subnet), `nat64_zone_${letter}`);
    assert.equal(resource(config, "aws_subnet", subnet).enable_dns64, true);
  }
});

Deno.test("--nat64=instance-type=TYPE: that type, and the AMI of its architecture", () => {
  const config = generateTofu(sampleInputs({ nat64: { instanceType: "c7a.large" } }));
  assertNat64Group(config, "nat64_zone_a", {
    zone: "eu-west-1a",
    instanceType: "c7a.large",
    ami: "ami-0aaaaaaaaaaaaaaaa",
    key: "zone-a",
  });
  assert.deepEqual(Object.keys(config.data.aws_ami).sort(), ["amd64", "arm64"]);
});

Deno.test("nat64=TYPE: a dedicated NAT64 and a subnet of its own for that NodeGroup", () => {
  const config = generateTofu(sampleInputs({
    nat64: {},
    nodeGroups: [nodeGroup("default", "a"), nodeGroup("workers", "a", { nat64: "t4g.small" })],
  }));
  assertNat64Group(config, "nat64_ng_workers", {
    zone: "eu-west-1a",
    instanceType: "t4g.small",
    ami: "ami-0bbbbbbbbbbbbbbbb",
    key: "ng-workers",
  });
  const tags = resource(config, "aws_network_interface", "nat64_ng_workers").tags as Record<
    string,
    string
  >;
  assert.equal(tags["podmin:nodegroup"], "workers");
  // The shared NAT64 of the zone serves every NodeGroup there: its own reserved value.
  for (const type of ["aws_network_interface", "aws_eip"]) {
    const shared = resource(config, type, "nat64_zone_a").tags as Record<string, string>;
    assert.equal(shared["podmin:nodegroup"], "_shared", type);
  }
  // Same zone, different route domains: routing is per subnet.
  assert.equal(subnetOfNodeGroup(config, "workers"), "nodes_ng_workers");
  assert.equal(nat64Target(config, "nodes_ng_workers"), "nat64_ng_workers");
  assert.equal(subnetOfNodeGroup(config, "default"), "nodes_zone_a");
  assert.equal(nat64Target(config, "nodes_zone_a"), "nat64_zone_a");
  assert.equal(resource(config, "aws_subnet", "nodes_ng_workers").enable_dns64, true);
  // Both NAT64 instances of the zone share the zone's NAT64 subnet.
  for (const n of ["nat64_zone_a", "nat64_ng_workers"]) {
    assert.equal(
      refOf(resource(config, "aws_network_interface", n).subnet_id)?.name,
      "nat64_zone_a",
    );
  }
});

Deno.test("nat64=TYPE without --nat64: only the dedicated NAT64; others get neither route nor DNS64", () => {
  const config = generateTofu(sampleInputs({
    nodeGroups: [nodeGroup("default", "a"), nodeGroup("workers", "b", { nat64: "t4g.small" })],
  }));
  assert.deepEqual(Object.keys(resources(config, "aws_autoscaling_group")).sort(), [
    "nat64_ng_workers",
    "ng_default",
    "ng_workers",
  ]);
  assert.equal(nat64Target(config, "nodes_zone_a"), undefined);
  assert.equal(resource(config, "aws_subnet", "nodes_zone_a").enable_dns64, false);
  assert.equal(nat64Target(config, "nodes_ng_workers"), "nat64_ng_workers");
  assert.equal(resource(config, "aws_subnet", "nodes_ng_workers").enable_dns64, true);
  assert.deepEqual(
    Object.keys(resources(config, "aws_subnet")).filter((s) => s.startsWith("nat64_")),
    [
      "nat64_zone_b",
    ],
  );
});

Deno.test("a zone whose NodeGroups all have dedicated NAT64 gets no shared instance", () => {
  const config = generateTofu(sampleInputs({
    nat64: {},
    nodeGroups: [nodeGroup("default", "a"), nodeGroup("workers", "b", { nat64: "t4g.small" })],
  }));
  assert.deepEqual(Object.keys(resources(config, "aws_network_interface")).sort(), [
    "nat64_ng_workers",
    "nat64_zone_a",
  ]);
});

Deno.test("no shared node subnet in a zone where every NodeGroup has its own (seed's example)", () => {
  for (const nat64 of [{}, undefined]) {
    const config = generateTofu(sampleInputs({
      nat64,
      nodeGroups: [
        nodeGroup("default", "a"),
        nodeGroup("workers", "b", { size: 3, instanceType: "c8g.large", nat64: "t4g.small" }),
      ],
    }));
    const nodeSubnets = (type: string) =>
      Object.keys(resources(config, type)).filter((n) => n.startsWith("nodes_")).sort();
    assert.deepEqual(nodeSubnets("aws_subnet"), ["nodes_ng_workers", "nodes_zone_a"]);
    assert.deepEqual(nodeSubnets("aws_route_table"), ["nodes_ng_workers", "nodes_zone_a"]);
    assert.deepEqual(nodeSubnets("aws_route_table_association"), [
      "nodes_ng_workers",
      "nodes_zone_a",
    ]);
    assert.deepEqual(
      nodeSubnets("aws_route"),
      nat64
        ? [
          "nodes_ng_workers_ipv6_default",
          "nodes_ng_workers_nat64",
          "nodes_zone_a_ipv6_default",
          "nodes_zone_a_nat64",
        ]
        : ["nodes_ng_workers_ipv6_default", "nodes_ng_workers_nat64", "nodes_zone_a_ipv6_default"],
    );
    assert.deepEqual(Object.keys(config.output.node_subnet_ids.value as object).sort(), [
      "ng-workers",
      "zone-a",
    ]);
    // Zone b still hosts the dedicated NAT64 instance's dual-stack subnet.
    assert.ok(resource(config, "aws_subnet", "nat64_zone_b"));
  }
});

Deno.test("NAT64 subnets: dual-stack /27 from the top of the VPC range, IPv4 and IPv6 to the gateway", () => {
  const config = generateTofu(sampleInputs({
    nat64: {},
    nodeGroups: [nodeGroup("a", "a"), nodeGroup("c", "c")],
  }));
  const a = resource(config, "aws_subnet", "nat64_zone_a");
  const c = resource(config, "aws_subnet", "nat64_zone_c");
  assert.equal(a.cidr_block, "10.0.255.224/27");
  assert.equal(c.cidr_block, "10.0.255.160/27");
  assert.equal(a.map_public_ip_on_launch, false);
  assert.equal(a.ipv6_native, undefined);
  assert.equal(a.ipv6_cidr_block, "${cidrsubnet(aws_vpc.main.ipv6_cidr_block, 8, 223)}");
  const routes = Object.values(resources(config, "aws_route"))
    .filter((r) => refOf(r.route_table_id)?.name === "nat64_zone_a")
    .map((
      r,
    ) => [r.destination_cidr_block ?? r.destination_ipv6_cidr_block, refOf(r.gateway_id)?.type]);
  assert.deepEqual(routes.sort(), [["0.0.0.0/0", "aws_internet_gateway"], [
    "::/0",
    "aws_internet_gateway",
  ]]);
  // The EIP is associated only once the subnet can reach the internet gateway.
  assert.deepEqual(resource(config, "aws_eip_association", "nat64_zone_a").depends_on, [
    "aws_route.nat64_zone_a_ipv4_default",
  ]);
});

Deno.test("NAT64 security group: ingress only from the nodes' security group", () => {
  const config = generateTofu(sampleInputs({ nat64: {} }));
  const rule = resource(config, "aws_vpc_security_group_ingress_rule", "nat64_from_nodes");
  assert.equal(refOf(rule.security_group_id)?.name, "nat64");
  assert.equal(refOf(rule.referenced_security_group_id)?.name, "nodes");
  const eni = resource(config, "aws_network_interface", "nat64_zone_a");
  assert.deepEqual(eni.security_groups, ["${aws_security_group.nat64.id}"]);
});

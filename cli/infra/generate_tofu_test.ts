import assert from "node:assert/strict";
import { INFRA_STATE } from "../../core/bucket/bucket_layout.ts";
import { ValidationError } from "../../core/kit/errors.ts";
import { describeInfra, generateTofu, serializeTofu } from "./generate_tofu.ts";
import type { TfBody } from "./tofu_json.ts";
import {
  nodeGroup,
  refOf,
  resource,
  resources,
  sampleInputs,
} from "../../tests/support/tofu_config.ts";

const twoGroups = () =>
  sampleInputs({
    nodeGroups: [
      nodeGroup("default", "a"),
      nodeGroup("workers", "b", { size: 3, diskSizeGiB: 100, instanceType: "c8g.large" }),
    ],
  });

Deno.test("one launch template and one ASG per NodeGroup, sized min = max = desired", () => {
  const config = generateTofu(twoGroups());
  assert.deepEqual(Object.keys(resources(config, "aws_launch_template")).sort(), [
    "ng_default",
    "ng_workers",
  ]);
  assert.deepEqual(Object.keys(resources(config, "aws_autoscaling_group")).sort(), [
    "ng_default",
    "ng_workers",
  ]);
  for (const [name, size, zone] of [["default", 2, "a"], ["workers", 3, "b"]] as const) {
    const asg = resource(config, "aws_autoscaling_group", `ng_${name}`);
    assert.equal(asg.name, `podmin-demo-ng-${name}`);
    assert.equal(asg.min_size, size);
    assert.equal(asg.max_size, size);
    assert.equal(asg.desired_capacity, size);
    assert.equal(asg.wait_for_capacity_timeout, "3m");
    const lt = asg.launch_template as TfBody;
    assert.deepEqual(refOf(lt.id), { type: "aws_launch_template", name: `ng_${name}`, attr: "id" });
    assert.deepEqual(refOf(lt.version), {
      type: "aws_launch_template",
      name: `ng_${name}`,
      attr: "latest_version",
    });
    const subnets = asg.vpc_zone_identifier as string[];
    assert.equal(subnets.length, 1);
    const subnet = resource(config, "aws_subnet", refOf(subnets[0])!.name);
    assert.equal(subnet.availability_zone, `eu-west-1${zone}`);
  }
});

Deno.test("launch template: two ENIs, each with one IPv6 address, in the node security group", () => {
  const config = generateTofu(twoGroups());
  for (const lt of Object.values(resources(config, "aws_launch_template"))) {
    const enis = lt.network_interfaces as TfBody[];
    assert.equal(enis.length, 2);
    assert.deepEqual(enis.map((e) => e.device_index), [0, 1]);
    for (const eni of enis) {
      assert.equal(eni.ipv6_address_count, 1);
      assert.equal(eni.delete_on_termination, true);
      // EC2 rejects an address count together with a prefix count: bootstrap delegates the
      // prefix (see the IAM test), so the template must not ask for one.
      assert.equal(eni.ipv6_prefix_count, undefined);
      assert.equal(eni.ipv6_prefixes, undefined);
      assert.equal(eni.subnet_id, undefined, "the ASG places both ENIs in its subnet");
      assert.deepEqual((eni.security_groups as string[]).map((s) => refOf(s)?.name), ["nodes"]);
    }
    assert.equal(lt.vpc_security_group_ids, undefined);
  }
});

Deno.test("root volume: encrypted gp3, 20 GiB by default and disk-size when given", () => {
  const config = generateTofu(twoGroups());
  const volume = (name: string) => {
    const mappings = resource(config, "aws_launch_template", name)
      .block_device_mappings as TfBody[];
    assert.equal(mappings.length, 1);
    assert.deepEqual(refOf(mappings[0].device_name), {
      type: "aws_ami",
      name: "arm64",
      attr: "root_device_name",
    });
    return mappings[0].ebs as TfBody;
  };
  for (const [name, size] of [["ng_default", 20], ["ng_workers", 100]] as const) {
    assert.deepEqual(volume(name), {
      volume_type: "gp3",
      encrypted: true,
      delete_on_termination: true,
      volume_size: size,
    });
  }
});

Deno.test("launch template: IMDSv2 required, hop limit 1, IPv6 endpoint on", () => {
  const config = generateTofu(twoGroups());
  for (const lt of Object.values(resources(config, "aws_launch_template"))) {
    assert.deepEqual(lt.metadata_options, {
      http_endpoint: "enabled",
      http_tokens: "required",
      http_put_response_hop_limit: 1,
      http_protocol_ipv6: "enabled",
      instance_metadata_tags: "disabled",
    });
  }
});

Deno.test("instances, volumes and ENIs carry podmin:cluster and podmin:nodegroup", () => {
  const config = generateTofu(twoGroups());
  for (const name of ["default", "workers"]) {
    const lt = resource(config, "aws_launch_template", `ng_${name}`);
    const specs = lt.tag_specifications as TfBody[];
    assert.deepEqual(specs.map((s) => s.resource_type), [
      "instance",
      "volume",
      "network-interface",
    ]);
    for (const s of specs) {
      const tags = s.tags as Record<string, string>;
      assert.equal(tags["podmin:cluster"], "demo");
      assert.equal(tags["podmin:nodegroup"], name);
    }
    const asgTags = resource(config, "aws_autoscaling_group", `ng_${name}`).tag as TfBody[];
    assert.ok(asgTags.some((t) => t.key === "podmin:nodegroup" && t.value === name));
  }
});

Deno.test("user-data is the rendered text, base64-encoded, per NodeGroup", () => {
  const inputs = twoGroups();
  inputs.userData.workers = "#cloud-config\n# pinned: containerd 2.1.4 ünïcode\n";
  const config = generateTofu(inputs);
  const decoded = (name: string) => {
    const b64 = resource(config, "aws_launch_template", name).user_data as string;
    return new TextDecoder().decode(Uint8Array.from(atob(b64), (ch) => ch.charCodeAt(0)));
  };
  assert.equal(decoded("ng_workers"), inputs.userData.workers);
  assert.equal(decoded("ng_default"), inputs.userData.default);
});

/** The resources whose bodies differ between two configurations, as `type.name`. */
function changedResources(a: ReturnType<typeof generateTofu>, b: ReturnType<typeof generateTofu>) {
  const out: string[] = [];
  for (const type of new Set([...Object.keys(a.resource), ...Object.keys(b.resource)])) {
    const names = new Set([
      ...Object.keys(a.resource[type] ?? {}),
      ...Object.keys(b.resource[type] ?? {}),
    ]);
    for (const name of names) {
      if (JSON.stringify(a.resource[type]?.[name]) !== JSON.stringify(b.resource[type]?.[name])) {
        out.push(`${type}.${name}`);
      }
    }
  }
  return out.sort();
}

Deno.test("changing user-data (a pinned dependency) changes only that launch template; its ASG rolls", () => {
  const before = generateTofu(twoGroups());
  const inputs = twoGroups();
  inputs.userData.workers = inputs.userData.workers.replace("workers", "workers\n# runc 1.3.1");
  const after = generateTofu(inputs);
  assert.deepEqual(changedResources(before, after), ["aws_launch_template.ng_workers"]);
  const lt = (c: typeof before) => resource(c, "aws_launch_template", "ng_workers");
  assert.notEqual(lt(before).user_data, lt(after).user_data);
  assert.equal(lt(after).update_default_version, true);
  // The ASG follows the template's latest version, so the new version reaches it, and an
  // instance refresh replaces the VMs rolling, launching before terminating.
  const asg = resource(after, "aws_autoscaling_group", "ng_workers");
  assert.equal(refOf((asg.launch_template as TfBody).version)?.attr, "latest_version");
  assert.deepEqual(asg.instance_refresh, {
    strategy: "Rolling",
    preferences: { min_healthy_percentage: 100, max_healthy_percentage: 200, skip_matching: true },
  });
});

Deno.test("changing an AMI changes the launch templates of that architecture only", () => {
  const mixed = (amd64: string) =>
    sampleInputs(
      {
        nodeGroups: [
          nodeGroup("arm", "a"),
          nodeGroup("x86", "a", { instanceType: "m7i.large", architecture: "amd64" }),
        ],
      },
      { amiIds: { amd64, arm64: "ami-0bbbbbbbbbbbbbbbb" } },
    );
  const before = generateTofu(mixed("ami-0aaaaaaaaaaaaaaaa"));
  const after = generateTofu(mixed("ami-0cccccccccccccccc"));
  assert.deepEqual(changedResources(before, after), ["aws_launch_template.ng_x86"]);
  assert.equal(resource(after, "aws_launch_template", "ng_x86").image_id, "ami-0cccccccccccccccc");
  assert.deepEqual(after.data.aws_ami.amd64.filter, [
    { name: "image-id", values: ["ami-0cccccccccccccccc"] },
    { name: "architecture", values: ["x86_64"] },
  ]);
});

Deno.test("state in the cluster bucket (S3 backend, lock file); provider tags everything", () => {
  const config = generateTofu(sampleInputs());
  assert.deepEqual(config.terraform.backend, {
    s3: {
      bucket: "demo-cluster-bucket",
      key: INFRA_STATE,
      region: "eu-west-1",
      encrypt: true,
      use_lockfile: true,
    },
  });
  assert.deepEqual(config.provider.aws, {
    region: "eu-west-1",
    default_tags: { tags: { "podmin:cluster": "demo" } },
  });
});

Deno.test("created VPC: IPv6 /56 from Amazon, an internet gateway, /64 subnets carved from it", () => {
  const config = generateTofu(sampleInputs());
  assert.deepEqual(Object.keys(resources(config, "aws_vpc")), ["main"]);
  const vpc = resource(config, "aws_vpc", "main");
  assert.equal(vpc.cidr_block, "10.0.0.0/16");
  assert.equal(vpc.assign_generated_ipv6_cidr_block, true);
  assert.equal(config.data.aws_vpc, undefined);
  assert.equal(refOf(resource(config, "aws_internet_gateway", "main").vpc_id)?.type, "aws_vpc");
  const subnet = resource(config, "aws_subnet", "nodes_zone_a");
  assert.equal(subnet.ipv6_cidr_block, "${cidrsubnet(aws_vpc.main.ipv6_cidr_block, 8, 255)}");
});

Deno.test("reused VPC: a data source, never an aws_vpc resource; gateway and IPv6 reused", () => {
  const config = generateTofu(sampleInputs({}, {
    existingVpc: {
      id: "vpc-0123456789abcdef0",
      ipv6CidrBlock: "2a05:d018:1234:5600::/56",
      internetGatewayId: "igw-0123456789abcdef0",
    },
  }));
  assert.deepEqual(resources(config, "aws_vpc"), {});
  assert.deepEqual(resources(config, "aws_internet_gateway"), {});
  assert.deepEqual(resources(config, "aws_vpc_ipv6_cidr_block_association"), {});
  assert.deepEqual(config.data.aws_vpc, { main: { id: "vpc-0123456789abcdef0" } });
  assert.deepEqual(config.data.aws_internet_gateway, {
    main: { internet_gateway_id: "igw-0123456789abcdef0" },
  });
  const subnet = resource(config, "aws_subnet", "nodes_zone_a");
  assert.equal(subnet.vpc_id, "${data.aws_vpc.main.id}");
  assert.equal(subnet.ipv6_cidr_block, "2a05:d018:1234:56ff::/64");
  const route = resource(config, "aws_route", "nodes_zone_a_ipv6_default");
  assert.equal(route.gateway_id, "${data.aws_internet_gateway.main.id}");
});

Deno.test("reused VPC without IPv6 or gateway: Podmin adds (and owns) both, still no aws_vpc", () => {
  const config = generateTofu(sampleInputs({}, { existingVpc: { id: "vpc-0123456789abcdef0" } }));
  assert.deepEqual(resources(config, "aws_vpc"), {});
  assert.deepEqual(resource(config, "aws_vpc_ipv6_cidr_block_association", "main"), {
    vpc_id: "${data.aws_vpc.main.id}",
    assign_generated_ipv6_cidr_block: true,
  });
  assert.equal(
    resource(config, "aws_subnet", "nodes_zone_a").ipv6_cidr_block,
    "${cidrsubnet(aws_vpc_ipv6_cidr_block_association.main.ipv6_cidr_block, 8, 255)}",
  );
  assert.equal(resource(config, "aws_internet_gateway", "main").vpc_id, "${data.aws_vpc.main.id}");
});

Deno.test("node subnets are public and IPv6-native: ::/0 to the gateway, associated route table", () => {
  const config = generateTofu(twoGroups());
  for (const letter of ["a", "b"]) {
    const name = `nodes_zone_${letter}`;
    const subnet = resource(config, "aws_subnet", name);
    assert.equal(subnet.ipv6_native, true);
    assert.equal(subnet.cidr_block, undefined);
    assert.equal(subnet.assign_ipv6_address_on_creation, true);
    const assoc = resource(config, "aws_route_table_association", name);
    assert.equal(refOf(assoc.subnet_id)?.name, name);
    assert.equal(refOf(assoc.route_table_id)?.name, name);
    const routes = Object.values(resources(config, "aws_route")).filter((r) =>
      refOf(r.route_table_id)?.name === name
    );
    assert.deepEqual(routes, [{
      route_table_id: `\${aws_route_table.${name}.id}`,
      destination_ipv6_cidr_block: "::/0",
      gateway_id: "${aws_internet_gateway.main.id}",
    }]);
  }
});

Deno.test("security groups admit nothing from the internet: ingress only from security groups", () => {
  for (const spec of [{}, { nat64: {} }]) {
    const config = generateTofu(sampleInputs(spec));
    for (const sg of Object.values(resources(config, "aws_security_group"))) {
      assert.equal(sg.ingress, undefined, "no inline ingress rules");
      assert.equal(sg.egress, undefined);
    }
    const ingress = resources(config, "aws_vpc_security_group_ingress_rule");
    assert.ok(Object.keys(ingress).length > 0);
    for (const rule of Object.values(ingress)) {
      assert.equal(rule.cidr_ipv4, undefined);
      assert.equal(rule.cidr_ipv6, undefined);
      assert.equal(rule.prefix_list_id, undefined);
      assert.equal(refOf(rule.referenced_security_group_id)?.name, "nodes", "only from nodes");
    }
    assert.equal(refOf(ingress.nodes_from_nodes.security_group_id)?.name, "nodes");
    const egress = Object.values(resources(config, "aws_vpc_security_group_egress_rule"))
      .filter((r) => refOf(r.security_group_id)?.name === "nodes")
      .map((r) => [r.ip_protocol, r.cidr_ipv4 ?? r.cidr_ipv6]);
    assert.deepEqual(egress.sort(), [["-1", "0.0.0.0/0"], ["-1", "::/0"]]);
  }
});

Deno.test("DNS64 and the 64:ff9b::/96 route exist only when NAT64 is on", () => {
  const off = generateTofu(twoGroups());
  for (const s of Object.values(resources(off, "aws_subnet"))) assert.equal(s.enable_dns64, false);
  assert.ok(
    Object.values(resources(off, "aws_route")).every((r) =>
      r.destination_ipv6_cidr_block !== "64:ff9b::/96"
    ),
  );
  assert.deepEqual(resources(off, "aws_network_interface"), {});
  assert.deepEqual(resources(off, "aws_security_group").nat64, undefined);

  const inputs = twoGroups();
  inputs.spec.nat64 = {};
  const on = generateTofu(inputs);
  for (const letter of ["a", "b"]) {
    assert.equal(resource(on, "aws_subnet", `nodes_zone_${letter}`).enable_dns64, true);
  }
});

Deno.test("serializeTofu: stable bytes, independent of input order", () => {
  const a = twoGroups();
  const b = twoGroups();
  b.spec.nodeGroups.reverse();
  b.zones.reverse();
  const bytesA = serializeTofu(generateTofu(a));
  const bytesB = serializeTofu(generateTofu(b));
  assert.deepEqual(bytesA, bytesB);
  const text = new TextDecoder().decode(bytesA);
  assert.ok(text.endsWith("}\n"));
  assert.ok(text.includes('\n  "output": {'), "pretty-printed with two-space indentation");
  const keys = Object.keys(JSON.parse(text));
  assert.deepEqual(keys, [...keys].sort());
});

Deno.test("outputs name the VPC, subnets, ASGs and the node role", () => {
  const config = generateTofu(twoGroups());
  assert.deepEqual(config.output.nodegroup_asg_names.value, {
    default: "${aws_autoscaling_group.ng_default.name}",
    workers: "${aws_autoscaling_group.ng_workers.name}",
  });
  assert.equal(config.output.vpc_id.value, "${aws_vpc.main.id}");
  assert.deepEqual(Object.keys(config.output.node_subnet_ids.value as object), [
    "zone-a",
    "zone-b",
  ]);
  assert.equal(config.output.node_role_arn.value, "${aws_iam_role.node.arn}");
});

Deno.test("describeInfra names the ASGs setup waits for, with their timeouts", () => {
  const inputs = twoGroups();
  inputs.spec.nat64 = {};
  const t = describeInfra(inputs);
  assert.deepEqual(
    t.nodeGroups.map((ng) => [ng.asgName, ng.capacityWaitMinutes]),
    [["podmin-demo-ng-default", 3], ["podmin-demo-ng-workers", 3]],
  );
  assert.deepEqual(
    t.nat64.map((n) => [n.asgName, n.capacityWaitMinutes]),
    [["podmin-demo-nat64-zone-a", 15], ["podmin-demo-nat64-zone-b", 15]],
  );
});

Deno.test("invalid inputs fail with a ValidationError naming the problem", () => {
  const cases: [string, () => unknown, RegExp][] = [
    [
      "duplicate",
      () => sampleInputs({ nodeGroups: [nodeGroup("a"), nodeGroup("a")] }),
      /duplicate NodeGroup a/,
    ],
    [
      "disk 7",
      () => sampleInputs({ nodeGroups: [nodeGroup("a", "a", { diskSizeGiB: 7 })] }),
      /disk size 7/,
    ],
    [
      "disk 16385",
      () => sampleInputs({ nodeGroups: [nodeGroup("a", "a", { diskSizeGiB: 16385 })] }),
      /disk size 16385/,
    ],
    [
      "arch",
      () => sampleInputs({ nodeGroups: [nodeGroup("a", "a", { instanceType: "m7i.large" })] }),
      /does not match instance type m7i.large \(amd64\)/,
    ],
    ["size", () => sampleInputs({ nodeGroups: [nodeGroup("a", "a", { size: 1.5 })] }), /size 1.5/],
    ["vpc /25", () => sampleInputs({ vpcCidr: "10.0.0.0/25" }), /\/25/],
    ["vpc host bits", () => sampleInputs({ vpcCidr: "10.0.0.1/16" }), /host bits/],
    ["region", () => sampleInputs({ region: "Europe" }), /invalid region/],
    ["bucket", () => sampleInputs({ bucket: "Bad_Bucket" }), /invalid cluster bucket/],
    ["cluster", () => sampleInputs({ cluster: "Demo" }), /invalid cluster id/],
    [
      "publish wildcard",
      () => sampleInputs({ workloadCaPublish: { bucket: "pub", key: "ca/*.pem" } }),
      /no '\*', '\?' or '\$'/,
    ],
    [
      "publish inside layout",
      () =>
        sampleInputs({
          workloadCaPublish: { bucket: "demo-cluster-bucket", key: "deployments/index.json" },
        }),
      /inside Podmin's own layout/,
    ],
    [
      "otel ca in infra/",
      () =>
        sampleInputs({
          otelLogsCa: { bucket: "demo-cluster-bucket", key: "infra/terraform.tfstate" },
        }),
      /inside Podmin's own layout/,
    ],
    [
      "kms alias",
      () => sampleInputs({ kmsKeyArns: ["arn:aws:kms:eu-west-1:123456789012:alias/mine"] }),
      /invalid KMS key ARN/,
    ],
    ["kms wildcard", () => sampleInputs({ kmsKeyArns: ["*"] }), /invalid KMS key ARN/],
    [
      "shared NAT64 type",
      () => sampleInputs({ nat64: { instanceType: "nano" } }),
      /invalid instance type "nano"/,
    ],
    [
      "dedicated NAT64 type",
      () => sampleInputs({ nodeGroups: [nodeGroup("a", "a", { nat64: "T4G.nano" })] }),
      /lower-case/,
    ],
  ];
  for (const [what, make, message] of cases) {
    assert.throws(() => generateTofu(make() as never), (e: unknown) => {
      assert.ok(e instanceof ValidationError, `${what}: ${e}`);
      assert.match(e.message + (e.hint ?? ""), message, what);
      return true;
    });
  }
});

Deno.test("inputs that disagree with each other are refused", () => {
  const bad: [string, () => Parameters<typeof generateTofu>[0], RegExp][] = [
    [
      "zone not in use",
      () => ({ ...sampleInputs(), zones: ["eu-west-1b"] }),
      /not among the zones/,
    ],
    ["local zone", () => ({ ...sampleInputs(), zones: ["eu-west-1-lax-1a"] }), /invalid zone/],
    [
      "no user-data",
      () => ({ ...sampleInputs(), userData: {} }),
      /missing user-data of NodeGroup default/,
    ],
    [
      "stray user-data",
      () => ({ ...sampleInputs(), userData: { default: "x", other: "y" } }),
      /unknown NodeGroup "other"/,
    ],
    [
      "user-data too large",
      () => ({ ...sampleInputs(), userData: { default: "x".repeat(16385) } }),
      /16385 bytes/,
    ],
    [
      "no AMI",
      () => ({ ...sampleInputs(), amiIds: { amd64: "ami-0aaaaaaaaaaaaaaaa" } }),
      /AMI id for arm64/,
    ],
    [
      "no NAT64 user-data",
      () => ({ ...sampleInputs({ nat64: {} }), nat64UserData: undefined }),
      /missing NAT64 user-data/,
    ],
    [
      "small IPv6 block",
      () => ({
        ...sampleInputs(),
        existingVpc: { id: "vpc-01234567", ipv6CidrBlock: "2a05:d018::/64" },
      }),
      /smaller than a \/56/,
    ],
    ["bad vpc id", () => ({ ...sampleInputs(), existingVpc: { id: "vpc-xyz" } }), /invalid VPC id/],
  ];
  for (const [what, make, message] of bad) {
    assert.throws(() => generateTofu(make()), (e: unknown) => {
      assert.ok(e instanceof ValidationError, `${what}: ${e}`);
      assert.match(e.message, message, what);
      return true;
    });
  }
});

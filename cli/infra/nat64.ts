/**
 * NAT64 instances: per NAT64 group (shared per zone, or dedicated to a NodeGroup) a stable
 * ENI with an EIP, an IAM role, a launch template and an ASG of exactly one instance.
 *
 * The stable ENI (`aws_network_interface`, source/destination check off, one IPv6 address,
 * a private IPv4 address carrying the EIP) lives outside the ASG: node routes
 * (`64:ff9b::/96` → ENI) and the public IPv4 address never change when the ASG replaces the
 * instance. The instance boots with its own primary ENI (IPv6 reaches the EC2 dual-stack
 * endpoint), reads the stable ENI id from its instance tag `podmin:nat64-eni` (instance
 * metadata tags are on), attaches it as device 1 (`ec2:AttachNetworkInterface`, allowed for
 * exactly that ENI) and sends translated traffic through it. The previous instance's
 * termination detaches the ENI, so a refresh terminates before launching (max 100 %).
 */

import { type GenContext, nat64Name, nat64SubnetName, TF } from "./context.ts";
import {
  NAT64_ENI_TAG,
  NAT64_TAG,
  nat64RolePolicy,
  NODEGROUP_TAG,
  SHARED_NAT64_NODEGROUP,
} from "./iam.ts";
import {
  addInstanceRole,
  asgTags,
  metadataOptions,
  rootVolume,
  tagSpecifications,
} from "./launch.ts";
import type { Nat64Plan } from "./topology.ts";
import { base64Utf8, dependsOn, ref } from "./tofu_json.ts";

function addNat64Group(g: GenContext, nat: Nat64Plan): void {
  const { inputs, builder } = g;
  const name = nat64Name(nat.tfName);
  const zoneSubnet = g.topology.nat64Subnets.find((s) => s.zone === nat.zone)!;
  const subnet = nat64SubnetName(zoneSubnet.tfName);
  const label = `podmin-${inputs.spec.cluster}-nat64-${nat.key}`;
  const tags = g.tags(label, {
    [NAT64_TAG]: nat.key,
    [NODEGROUP_TAG]: nat.nodeGroup ?? SHARED_NAT64_NODEGROUP,
  });
  const eniId = ref("aws_network_interface", name, "id");

  builder.resource("aws_network_interface", name, {
    subnet_id: ref("aws_subnet", subnet, "id"),
    security_groups: [ref("aws_security_group", TF.nat64SecurityGroup, "id")],
    source_dest_check: false,
    ipv6_address_count: 1,
    description: `podmin NAT64 stable ENI ${nat.key}`,
    tags,
  });
  builder.resource("aws_eip", name, { domain: "vpc", tags });
  builder.resource("aws_eip_association", name, {
    allocation_id: ref("aws_eip", name, "id"),
    network_interface_id: eniId,
    depends_on: [dependsOn("aws_route", `${subnet}_ipv4_default`)],
  });

  const profile = addInstanceRole(g, {
    tfName: name,
    awsName: nat.roleName,
    policyName: "podmin-nat64",
    policy: nat64RolePolicy(inputs, { nat, eniId }),
  });

  builder.resource("aws_launch_template", name, {
    name: nat.launchTemplateName,
    description: `Podmin NAT64 ${nat.key}`,
    image_id: inputs.amiIds[nat.architecture]!,
    instance_type: nat.instanceType,
    user_data: base64Utf8(inputs.nat64UserData!),
    update_default_version: true,
    iam_instance_profile: { arn: profile },
    metadata_options: metadataOptions(true),
    block_device_mappings: rootVolume(nat.architecture),
    network_interfaces: [{
      device_index: 0,
      description: `podmin NAT64 boot ENI ${nat.key}`,
      security_groups: [ref("aws_security_group", TF.nat64SecurityGroup, "id")],
      ipv6_address_count: 1,
      associate_public_ip_address: false,
      delete_on_termination: true,
    }],
    tag_specifications: tagSpecifications({ ...tags, [NAT64_ENI_TAG]: eniId }, tags),
    tags,
  });

  addNat64Asg(g, { nat, name, subnet, tags });
}

/** The NAT64 group's ASG: one instance, rolled on every launch template change. */
function addNat64Asg(
  g: GenContext,
  { nat, name, subnet, tags }: {
    nat: Nat64Plan;
    name: string;
    subnet: string;
    tags: Record<string, string>;
  },
): void {
  g.builder.resource("aws_autoscaling_group", name, {
    name: nat.asgName,
    min_size: 1,
    max_size: 1,
    desired_capacity: 1,
    vpc_zone_identifier: [ref("aws_subnet", subnet, "id")],
    health_check_type: "EC2",
    health_check_grace_period: 120,
    wait_for_capacity_timeout: `${nat.capacityWaitMinutes}m`,
    launch_template: {
      id: ref("aws_launch_template", name, "id"),
      version: ref("aws_launch_template", name, "latest_version"),
    },
    instance_refresh: {
      strategy: "Rolling",
      preferences: { min_healthy_percentage: 0, max_healthy_percentage: 100, skip_matching: true },
    },
    tag: asgTags(tags),
    depends_on: [
      dependsOn("aws_iam_role_policy", name),
      dependsOn("aws_eip_association", name),
      dependsOn("aws_route_table_association", subnet),
    ],
  });
}

/** Adds every NAT64 group of the topology. */
export function addNat64(g: GenContext): void {
  for (const nat of g.topology.nat64) addNat64Group(g, nat);
}

/**
 * The node role and, per NodeGroup, a launch template and an Auto Scaling Group.
 *
 * Each VM gets two ENIs from its launch template, both in the NodeGroup's subnet and security
 * group, each with one IPv6 address: device 0 carries the node address, device 1 is the Pod
 * ENI. The delegated Pod prefix is not declared in the launch template: EC2 refuses an ENI
 * specification with both an IPv6 address count and an IPv6 prefix count, and bootstrap must
 * see the ordinary address first anyway (seed, "Direct IPv6 Pod networking"). Bootstrap
 * therefore calls `AssignIpv6Addresses(Ipv6PrefixCount=1)` on its own Pod ENI, which the node
 * role allows on the cluster's tagged ENIs only.
 *
 * Rollout: the launch template carries the rendered user-data (with pinned dependency
 * versions) and the AMI; any change produces a new version, the ASG follows
 * `latest_version`, and `instance_refresh` replaces the VMs rolling, launching before
 * terminating (min 100 %, max 200 % healthy).
 */

import { type GenContext, nodeSubnetName, TF } from "./context.ts";
import { NODEGROUP_TAG, nodeRolePolicy } from "./iam.ts";
import {
  addInstanceRole,
  asgTags,
  metadataOptions,
  rootVolume,
  tagSpecifications,
} from "./launch.ts";
import type { NodeGroupPlan } from "./topology.ts";
import { base64Utf8, dependsOn, ref } from "./tofu_json.ts";

/** Description of the node-address ENI (device 0). */
export const NODE_ENI_DESCRIPTION = "podmin node address";
/** Description of the Pod-prefix ENI (device 1). */
export const POD_ENI_DESCRIPTION = "podmin pod prefix";

function nodeInterface(deviceIndex: number, description: string) {
  return {
    device_index: deviceIndex,
    description,
    security_groups: [ref("aws_security_group", TF.nodeSecurityGroup, "id")],
    ipv6_address_count: 1,
    delete_on_termination: true,
  };
}

function addNodeGroup(g: GenContext, ng: NodeGroupPlan, instanceProfileArn: string): void {
  const { inputs, builder } = g;
  const domain = g.topology.domains.find((d) => d.key === ng.domain)!;
  const subnet = nodeSubnetName(domain.tfName);
  const tags = g.tags(`podmin-${inputs.spec.cluster}-${ng.name}`, { [NODEGROUP_TAG]: ng.name });

  builder.resource("aws_launch_template", ng.tfName, {
    name: ng.launchTemplateName,
    description: `Podmin NodeGroup ${ng.name}`,
    image_id: inputs.amiIds[ng.architecture]!,
    instance_type: ng.instanceType,
    user_data: base64Utf8(inputs.userData[ng.name]),
    update_default_version: true,
    iam_instance_profile: { arn: instanceProfileArn },
    metadata_options: metadataOptions(false),
    block_device_mappings: rootVolume(ng.architecture, ng.diskSizeGiB),
    network_interfaces: [
      nodeInterface(0, NODE_ENI_DESCRIPTION),
      nodeInterface(1, POD_ENI_DESCRIPTION),
    ],
    tag_specifications: tagSpecifications(tags, tags),
    tags,
  });

  builder.resource("aws_autoscaling_group", ng.tfName, {
    name: ng.asgName,
    min_size: ng.size,
    max_size: ng.size,
    desired_capacity: ng.size,
    vpc_zone_identifier: [ref("aws_subnet", subnet, "id")],
    health_check_type: "EC2",
    health_check_grace_period: 120,
    wait_for_capacity_timeout: `${ng.capacityWaitMinutes}m`,
    launch_template: {
      id: ref("aws_launch_template", ng.tfName, "id"),
      version: ref("aws_launch_template", ng.tfName, "latest_version"),
    },
    instance_refresh: {
      strategy: "Rolling",
      preferences: {
        min_healthy_percentage: 100,
        max_healthy_percentage: 200,
        skip_matching: true,
      },
    },
    tag: asgTags(tags),
    depends_on: [
      dependsOn("aws_iam_role_policy", TF.nodeRole),
      dependsOn("aws_route_table_association", subnet),
      dependsOn("aws_route", `${subnet}_ipv6_default`),
    ],
  });
}

/** Adds the node role and every NodeGroup's launch template and ASG. */
export function addNodeGroups(g: GenContext): void {
  const profile = addInstanceRole(g, {
    tfName: TF.nodeRole,
    awsName: g.topology.names.nodeRole,
    policyName: "podmin-node",
    policy: nodeRolePolicy(g.inputs),
  });
  for (const ng of g.topology.nodeGroups) addNodeGroup(g, ng, profile);
}

/**
 * Pieces shared by the node and NAT64 launch templates and Auto Scaling Groups: IMDS
 * settings, the encrypted gp3 root volume, tag specifications, the AMI lookups and role
 * wiring.
 */

import type { GenContext } from "./context.ts";
import { ec2AssumeRolePolicy, type PolicyDocument } from "./iam.ts";
import { type Architecture, ARCHITECTURES } from "./instance_types.ts";
import { dataRef, ref, type TfBody, type TfValue } from "./tofu_json.ts";

/** EC2's architecture name of each Podmin architecture. */
export const EC2_ARCHITECTURE: Record<Architecture, string> = { amd64: "x86_64", arm64: "arm64" };

/**
 * Instance metadata: IMDSv2 only (session tokens required) and a PUT response hop limit of 1,
 * so the token reaches processes on the host (bootstrap, agent, SSM Agent) but not Pods,
 * whose packets cross one routed hop (the host side of their veth) and therefore cannot
 * obtain the node role's credentials. The IPv6 endpoint is on: node subnets are IPv6-only.
 */
export function metadataOptions(instanceTags: boolean): TfBody {
  return {
    http_endpoint: "enabled",
    http_tokens: "required",
    http_put_response_hop_limit: 1,
    http_protocol_ipv6: "enabled",
    instance_metadata_tags: instanceTags ? "enabled" : "disabled",
  };
}

/** The root volume: gp3, encrypted (default EBS key), deleted with the instance. */
export function rootVolume(arch: Architecture, sizeGiB?: number): TfValue[] {
  return [{
    device_name: dataRef("aws_ami", arch, "root_device_name"),
    ebs: {
      volume_type: "gp3",
      encrypted: true,
      delete_on_termination: true,
      ...(sizeGiB !== undefined ? { volume_size: sizeGiB } : {}),
    },
  }];
}

/** Tags applied at launch to the instance, its volumes and its ENIs. */
export function tagSpecifications(
  instanceTags: Record<string, string>,
  tags: Record<string, string>,
): TfValue[] {
  return [
    { resource_type: "instance", tags: instanceTags },
    { resource_type: "volume", tags },
    { resource_type: "network-interface", tags },
  ];
}

/** ASG `tag` blocks (not propagated: the launch template tags what the ASG launches). */
export function asgTags(tags: Record<string, string>): TfValue[] {
  return Object.entries(tags).map(([key, value]) => ({ key, value, propagate_at_launch: false }));
}

/**
 * One `aws_ami` data source per architecture in use, looked up by id and architecture: a
 * wrong-architecture AMI fails the plan instead of booting nothing. Gives the root device name.
 */
export function addAmiLookups(g: GenContext, used: Set<Architecture>): void {
  for (const arch of ARCHITECTURES) {
    if (!used.has(arch)) continue;
    g.builder.data("aws_ami", arch, {
      filter: [
        { name: "image-id", values: [g.inputs.amiIds[arch]!] },
        { name: "architecture", values: [EC2_ARCHITECTURE[arch]] },
      ],
    });
  }
}

/** What `addInstanceRole` creates: Terraform and AWS names and the one inline policy. */
export interface InstanceRole {
  /** Terraform name of the role, its policy and its instance profile. */
  tfName: string;
  /** AWS name of the role and the instance profile. */
  awsName: string;
  policyName: string;
  policy: PolicyDocument;
}

/**
 * An IAM role for EC2 with one inline policy and an instance profile, all named `tfName`.
 * Returns the instance profile ARN expression.
 */
export function addInstanceRole(
  g: GenContext,
  { tfName, awsName, policyName, policy }: InstanceRole,
): string {
  g.builder.resource("aws_iam_role", tfName, {
    name: awsName,
    assume_role_policy: JSON.stringify(ec2AssumeRolePolicy()),
    tags: g.tags(awsName),
  });
  g.builder.resource("aws_iam_role_policy", tfName, {
    name: policyName,
    role: ref("aws_iam_role", tfName, "id"),
    policy: JSON.stringify(policy),
  });
  g.builder.resource("aws_iam_instance_profile", tfName, {
    name: awsName,
    role: ref("aws_iam_role", tfName, "name"),
    tags: g.tags(awsName),
  });
  return ref("aws_iam_instance_profile", tfName, "arn");
}

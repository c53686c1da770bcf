/**
 * What the generator's parts share: the checked inputs, the topology, the builder, the
 * Terraform names of shared resources and a few expression helpers.
 */

import type { CheckedInputs } from "./infra_inputs.ts";
import { CLUSTER_TAG } from "./iam.ts";
import { ipv6SubnetCidr, type Topology } from "./topology.ts";
import { dataRef, expr, ref, type TofuBuilder } from "./tofu_json.ts";

/** Terraform names of the resources every part refers to. */
export const TF = {
  vpc: "main",
  igw: "main",
  ipv6Association: "main",
  nodeSecurityGroup: "nodes",
  nat64SecurityGroup: "nat64",
  nodeRole: "node",
  current: "current",
} as const;

/** Terraform name of a route domain's subnet, route table and association. */
export function nodeSubnetName(domainTfName: string): string {
  return `nodes_${domainTfName}`;
}

/** Terraform name of a zone's NAT64 subnet, route table and association. */
export function nat64SubnetName(zoneTfName: string): string {
  return `nat64_${zoneTfName}`;
}

/** Terraform name of a NAT64 group's ENI, EIP, role, launch template and ASG. */
export function nat64Name(natTfName: string): string {
  return `nat64_${natTfName}`;
}

/** Shared state of one generation. */
export class GenContext {
  /** The validated inputs. */
  readonly inputs: CheckedInputs;
  /** The planned topology (zones, route domains, NodeGroups, NAT64 groups, names). */
  readonly topology: Topology;
  /** The configuration being built. */
  readonly builder: TofuBuilder;

  constructor(
    parts: { inputs: CheckedInputs; topology: Topology; builder: TofuBuilder },
  ) {
    this.inputs = parts.inputs;
    this.topology = parts.topology;
    this.builder = parts.builder;
  }

  /** True when the VPC is reused (a data source), false when the configuration creates it. */
  get reusedVpc(): boolean {
    return this.inputs.existingVpc !== undefined;
  }

  /** `${…id}` of the VPC. */
  vpcId(): string {
    return this.reusedVpc ? dataRef("aws_vpc", TF.vpc, "id") : ref("aws_vpc", TF.vpc, "id");
  }

  /** The bare expression of the VPC's IPv6 block, when it is only known at apply time. */
  private vpcIpv6Expression(): string {
    if (!this.reusedVpc) return `aws_vpc.${TF.vpc}.ipv6_cidr_block`;
    return `aws_vpc_ipv6_cidr_block_association.${TF.ipv6Association}.ipv6_cidr_block`;
  }

  /** The IPv6 /64 with this index: a literal when the VPC block is known, else `cidrsubnet`. */
  ipv6Subnet(index: number): string {
    if (this.inputs.vpcIpv6) return ipv6SubnetCidr(this.inputs.vpcIpv6, index);
    return expr(`cidrsubnet(${this.vpcIpv6Expression()}, 8, ${index})`);
  }

  /** `${…id}` of the internet gateway (created or reused). */
  igwId(): string {
    return this.inputs.existingVpc?.internetGatewayId !== undefined
      ? dataRef("aws_internet_gateway", TF.igw, "id")
      : ref("aws_internet_gateway", TF.igw, "id");
  }

  /** Tags of a resource: the cluster tag, a Name, and extra tags. */
  tags(name: string, extra: Record<string, string> = {}): Record<string, string> {
    return { [CLUSTER_TAG]: this.inputs.spec.cluster, Name: name, ...extra };
  }
}

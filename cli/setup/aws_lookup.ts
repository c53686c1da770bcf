/**
 * What setup reads from AWS before generating infrastructure: the region's
 * available zones and the VPC whose primary IPv4 CIDR matches --vpc-cidr, with its internet
 * gateway and other subnets.
 */

import {
  DescribeAvailabilityZonesCommand,
  DescribeInternetGatewaysCommand,
  DescribeSubnetsCommand,
  DescribeVpcsCommand,
  EC2Client,
} from "@aws-sdk/client-ec2";
import { UsageError } from "../../core/errors.ts";
import { CLUSTER_TAG } from "../infra/iam.ts";

/** Zone names of the region that are available without opt-in, sorted. */
export async function availableZones(ec2: EC2Client): Promise<string[]> {
  const out = await ec2.send(
    new DescribeAvailabilityZonesCommand({
      Filters: [{ Name: "state", Values: ["available"] }],
    }),
  );
  return (out.AvailabilityZones ?? [])
    .filter((z) => (z.OptInStatus ?? "opt-in-not-required") === "opt-in-not-required")
    .filter((z) => (z.ZoneType ?? "availability-zone") === "availability-zone")
    .map((z) => z.ZoneName!)
    .sort();
}

/** A VPC to reuse. */
export interface ReusedVpc {
  id: string;
  ipv6CidrBlock: string;
}

/** What a reused VPC already holds that the generated configuration must respect. */
export interface ReusedVpcContents {
  /** Its internet gateway (a VPC has at most one): reused, never created a second time. */
  internetGatewayId?: string;
  /** IPv4 and IPv6 CIDRs of subnets that are not this cluster's: planned subnets must avoid them. */
  foreignSubnetCidrs: string[];
}

/**
 * The internet gateway and the other subnets of a reused VPC. Subnets tagged
 * `podmin:cluster=<cluster>` are this cluster's own (its OpenTofu state manages them); route
 * tables of others are left alone (Podmin's subnets get route tables of their own).
 */
export async function describeReusedVpc(
  ec2: EC2Client,
  { vpcId, cluster }: { vpcId: string; cluster: string },
): Promise<ReusedVpcContents> {
  const igws = await ec2.send(
    new DescribeInternetGatewaysCommand({
      Filters: [{ Name: "attachment.vpc-id", Values: [vpcId] }],
    }),
  );
  const subnets = await ec2.send(
    new DescribeSubnetsCommand({ Filters: [{ Name: "vpc-id", Values: [vpcId] }] }),
  );
  const foreign = (subnets.Subnets ?? []).filter((sn) =>
    !(sn.Tags ?? []).some((t) => t.Key === CLUSTER_TAG && t.Value === cluster)
  );
  const igw = (igws.InternetGateways ?? [])[0]?.InternetGatewayId;
  return {
    ...(igw ? { internetGatewayId: igw } : {}),
    foreignSubnetCidrs: foreign.flatMap((sn) => [
      ...(sn.CidrBlock ? [sn.CidrBlock] : []),
      ...(sn.Ipv6CidrBlockAssociationSet ?? []).flatMap((a) =>
        a.Ipv6CidrBlock ? [a.Ipv6CidrBlock] : []
      ),
    ]).sort(),
  };
}

/**
 * The VPC whose PRIMARY IPv4 CIDR is exactly `cidr`, or undefined (setup then
 * creates one). Several matches are ambiguous; a match without an IPv6 block,
 * or a CIDR that only appears as a secondary block, is incompatible.
 */
export async function findReusableVpc(
  ec2: EC2Client,
  cidr: string,
): Promise<ReusedVpc | undefined> {
  const out = await ec2.send(
    new DescribeVpcsCommand({
      Filters: [{ Name: "cidr-block-association.cidr-block", Values: [cidr] }],
    }),
  );
  const vpcs = out.Vpcs ?? [];
  const primary = vpcs.filter((v) => v.CidrBlock === cidr);
  if (vpcs.length && !primary.length) {
    throw new UsageError(`${cidr} is a secondary CIDR of ${vpcs.map((v) => v.VpcId).join(", ")}`, {
      hint:
        "Podmin reuses only a VPC whose primary IPv4 CIDR matches --vpc-cidr; choose another CIDR",
    });
  }
  if (primary.length > 1) {
    throw new UsageError(
      `ambiguous --vpc-cidr ${cidr}: ${primary.map((v) => v.VpcId).join(", ")} all match`,
      {
        hint: "choose a CIDR that exactly one VPC (or none) has as its primary block",
      },
    );
  }
  if (!primary.length) return undefined;
  const vpc = primary[0];
  const v6 = (vpc.Ipv6CidrBlockAssociationSet ?? []).find((a) =>
    a.Ipv6CidrBlockState?.State === "associated"
  );
  if (!v6?.Ipv6CidrBlock) {
    throw new UsageError(`VPC ${vpc.VpcId} (${cidr}) has no IPv6 CIDR block`, {
      hint: "associate an Amazon-provided IPv6 block with it, or choose a --vpc-cidr no VPC uses",
    });
  }
  return { id: vpc.VpcId!, ipv6CidrBlock: v6.Ipv6CidrBlock };
}

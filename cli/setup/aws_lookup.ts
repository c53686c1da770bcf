/**
 * What setup reads from AWS before generating infrastructure: the region's
 * available zones and the VPC whose primary IPv4 CIDR matches --vpc-cidr.
 */

import {
  DescribeAvailabilityZonesCommand,
  DescribeVpcsCommand,
  EC2Client,
} from "@aws-sdk/client-ec2";
import { UsageError } from "../../core/errors.ts";

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

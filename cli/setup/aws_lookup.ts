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
import { UsageError } from "../../core/kit/errors.ts";
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
  /**
   * The VPC's own IPv6 block; absent when it has none, or only the one this cluster associated
   * (the configuration then declares `aws_vpc_ipv6_cidr_block_association.main`: an
   * Amazon-provided /56 that teardown removes).
   */
  ipv6CidrBlock?: string;
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
 * tables of others are left alone (Podmin's subnets get route tables of their own). A gateway
 * the cluster's state manages (`managedIgwId`: Podmin added it to a VPC that had none) is not
 * reported, so it stays a managed resource; one tagged with this cluster that the state does
 * not manage is refused with the import that adopts it.
 */
export async function describeReusedVpc(
  ec2: EC2Client,
  { vpcId, cluster, managedIgwId }: { vpcId: string; cluster: string; managedIgwId?: string },
): Promise<ReusedVpcContents> {
  const igws = await ec2.send(
    new DescribeInternetGatewaysCommand({
      Filters: [{ Name: "attachment.vpc-id", Values: [vpcId] }],
    }),
  );
  const subnets = await ec2.send(
    new DescribeSubnetsCommand({ Filters: [{ Name: "vpc-id", Values: [vpcId] }] }),
  );
  const foreign = (subnets.Subnets ?? []).filter((sn) => !taggedFor(sn.Tags, cluster));
  const found = (igws.InternetGateways ?? [])[0];
  const igw = found?.InternetGatewayId === managedIgwId ? undefined : found?.InternetGatewayId;
  if (igw && taggedFor(found?.Tags, cluster)) {
    throw new UsageError(
      `internet gateway ${igw} of ${vpcId} carries ${CLUSTER_TAG}=${cluster}, but the cluster's OpenTofu state does not manage it`,
      {
        hint:
          `adopt it with 'tofu import aws_internet_gateway.main ${igw}' in setup's work directory, or delete it, then run setup again`,
      },
    );
  }
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

/** What the VPC lookup decided: reuse a VPC this cluster did not create, keep its own, or create one. */
export type VpcLookup =
  | { kind: "reuse"; vpc: ReusedVpc }
  /** The VPC this cluster created (its state manages `aws_vpc.main`): it stays a managed resource. */
  | { kind: "own"; id: string }
  | { kind: "none" };

/** Options of `findReusableVpc`. */
export interface VpcLookupOptions {
  /** --vpc-cidr. */
  cidr: string;
  /** The cluster id: a VPC tagged `podmin:cluster=<cluster>` was created by this cluster. */
  cluster: string;
  /** The VPC id the cluster's saved OpenTofu state manages as `aws_vpc.main`, if any. */
  managedVpcId?: string;
  /**
   * The id of the IPv6 association the cluster's saved state manages as
   * `aws_vpc_ipv6_cidr_block_association.main` (the block an earlier setup added to a reused
   * VPC), if any: that block stays the cluster's resource, never read back as the VPC's own.
   */
  managedIpv6AssociationId?: string;
  /** Where the configuration is run (named in the hint of an unmanaged VPC of this cluster). */
  workDir?: string;
}

/**
 * The VPC whose PRIMARY IPv4 CIDR is exactly `cidr`, and whether it is this cluster's own.
 * The VPC the cluster's state manages is "own" (setup keeps generating `aws_vpc.main`, so a later
 * run never plans to destroy it); any other match is reused (a data source, never deleted). A
 * match tagged with this cluster that the state does not manage (an earlier apply whose state
 * was lost) is refused with the import that adopts it. Several matches are ambiguous, and a CIDR
 * that only appears as a secondary block is incompatible. A reused match without an IPv6 block
 * gets one from the configuration (an Amazon-provided /56, removed by teardown), and keeps it as
 * the cluster's on every later setup.
 */
export async function findReusableVpc(
  ec2: EC2Client,
  { cidr, cluster, managedVpcId, managedIpv6AssociationId, workDir }: VpcLookupOptions,
): Promise<VpcLookup> {
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
  if (!primary.length) return { kind: "none" };
  const vpc = primary[0];
  if (vpc.VpcId === managedVpcId) return { kind: "own", id: vpc.VpcId! };
  if (taggedFor(vpc.Tags, cluster)) {
    throw new UsageError(
      `VPC ${vpc.VpcId} (${cidr}) carries ${CLUSTER_TAG}=${cluster}, but the cluster's OpenTofu state does not manage it`,
      {
        hint: `an earlier setup of ${cluster} created it and its state was lost: adopt it with ${
          workDir ? `'cd ${workDir} && ` : "'"
        }tofu init && tofu import aws_vpc.main ${vpc.VpcId}' (and its gateway as aws_internet_gateway.main), or delete it, then run setup again`,
      },
    );
  }
  const v6 = (vpc.Ipv6CidrBlockAssociationSet ?? []).find((a) =>
    a.Ipv6CidrBlockState?.State === "associated" && a.AssociationId !== managedIpv6AssociationId
  );
  return {
    kind: "reuse",
    vpc: { id: vpc.VpcId!, ...(v6?.Ipv6CidrBlock ? { ipv6CidrBlock: v6.Ipv6CidrBlock } : {}) },
  };
}

/** True when `tags` carry this cluster's tag (what the generated configuration puts on all). */
function taggedFor(tags: { Key?: string; Value?: string }[] | undefined, cluster: string): boolean {
  return (tags ?? []).some((t) => t.Key === CLUSTER_TAG && t.Value === cluster);
}

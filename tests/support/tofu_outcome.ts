/**
 * What a real `tofu` run left, as the real-tofu setup tests read it: moto's inventory of every
 * object kind setup creates, the cluster state's managed resources, tofu's apply summary and
 * warnings, and a plan's changes (`tofu show -json`).
 */

import { AutoScalingClient, DescribeAutoScalingGroupsCommand } from "@aws-sdk/client-auto-scaling";
import {
  DescribeAddressesCommand,
  DescribeInstancesCommand,
  DescribeInternetGatewaysCommand,
  DescribeLaunchTemplatesCommand,
  DescribeNetworkInterfacesCommand,
  DescribeRouteTablesCommand,
  DescribeSecurityGroupsCommand,
  DescribeSubnetsCommand,
  DescribeVpcsCommand,
  EC2Client,
} from "@aws-sdk/client-ec2";
import { GetObjectCommand, type S3Client } from "@aws-sdk/client-s3";
import { INFRA_STATE } from "../../core/bucket/bucket_layout.ts";
import { parseState } from "../../cli/setup/tofu_state.ts";

/** One entry of `tofu show -json PLAN`'s resource_changes. */
export interface ResourceChange {
  address: string;
  type: string;
  change: { actions: string[]; before?: Record<string, unknown>; after?: Record<string, unknown> };
}

/** The top-level attributes a change changes. */
export function changedAttributes(c: ResourceChange): string[] {
  const before = c.change.before ?? {};
  const after = c.change.after ?? {};
  return [...new Set([...Object.keys(before), ...Object.keys(after)])].filter((k) =>
    JSON.stringify(before[k]) !== JSON.stringify(after[k])
  );
}

/** An update's changed top-level attributes: `address: attr (before → after), …`. */
export function describeUpdate(c: ResourceChange): string {
  const before = c.change.before ?? {};
  const after = c.change.after ?? {};
  const changed = changedAttributes(c);
  return `${c.address}: ${
    changed.map((k) => `${k} (${JSON.stringify(before[k])} → ${JSON.stringify(after[k])})`).join(
      ", ",
    )
  }`;
}

/** Every AWS object kind setup creates, listed from moto (sorted ids; instances not terminated). */
export async function inventory(
  endpoint: string,
  region = "us-east-1",
): Promise<Record<string, string[]>> {
  const config = {
    region,
    endpoint,
    credentials: { accessKeyId: "test", secretAccessKey: "test" },
  };
  const ec2 = new EC2Client(config);
  const asg = new AutoScalingClient(config);
  const ids = (xs: (string | undefined)[] | undefined) => (xs ?? []).map(String).sort();
  const iam = async (action: string, member: string) =>
    [...(await motoQuery(endpoint, "iam", action, region)).matchAll(
      new RegExp(`<${member}>([^<]+)<`, "g"),
    )]
      .map((m) => m[1]).sort();
  return {
    vpcs: ids((await ec2.send(new DescribeVpcsCommand({}))).Vpcs?.map((v) => v.VpcId)),
    subnets: ids((await ec2.send(new DescribeSubnetsCommand({}))).Subnets?.map((s) => s.SubnetId)),
    securityGroups: ids(
      (await ec2.send(new DescribeSecurityGroupsCommand({}))).SecurityGroups?.map((g) => g.GroupId),
    ),
    internetGateways: ids(
      (await ec2.send(new DescribeInternetGatewaysCommand({}))).InternetGateways?.map((g) =>
        g.InternetGatewayId
      ),
    ),
    routeTables: ids(
      (await ec2.send(new DescribeRouteTablesCommand({}))).RouteTables?.map((r) => r.RouteTableId),
    ),
    networkInterfaces: ids(
      (await ec2.send(new DescribeNetworkInterfacesCommand({}))).NetworkInterfaces?.map((n) =>
        n.NetworkInterfaceId
      ),
    ),
    addresses: ids(
      (await ec2.send(new DescribeAddressesCommand({}))).Addresses?.map((a) => a.AllocationId),
    ),
    launchTemplates: ids(
      (await ec2.send(new DescribeLaunchTemplatesCommand({}))).LaunchTemplates?.map((l) =>
        l.LaunchTemplateName
      ),
    ),
    instances: ids(
      (await ec2.send(new DescribeInstancesCommand({}))).Reservations?.flatMap((r) =>
        (r.Instances ?? []).filter((i) => i.State?.Name !== "terminated").map((i) => i.InstanceId)
      ),
    ),
    autoScalingGroups: ids(
      (await asg.send(new DescribeAutoScalingGroupsCommand({}))).AutoScalingGroups?.map((g) =>
        g.AutoScalingGroupName
      ),
    ),
    roles: await iam("ListRoles", "RoleName"),
    instanceProfiles: await iam("ListInstanceProfiles", "InstanceProfileName"),
  };
}

/**
 * A query-protocol call to moto (IAM has no SDK client among the dependencies): moto routes it
 * by the credential scope's service and, without IAM enforcement, checks no signature.
 */
export async function motoQuery(
  endpoint: string,
  service: string,
  action: string,
  region = "us-east-1",
): Promise<string> {
  const res = await fetch(endpoint, {
    method: "POST",
    headers: {
      "content-type": "application/x-www-form-urlencoded",
      authorization:
        `AWS4-HMAC-SHA256 Credential=test/20260101/${region}/${service}/aws4_request, SignedHeaders=host, Signature=0`,
    },
    body: `Action=${action}&Version=2010-05-08`,
  });
  const text = await res.text();
  if (!res.ok) throw new Error(`moto ${service} ${action}: ${res.status} ${text}`);
  return text;
}

/** The managed resources of the cluster's state: address → id. */
export async function stateIds(s3: S3Client, bucket: string): Promise<Map<string, string>> {
  const got = await s3.send(new GetObjectCommand({ Bucket: bucket, Key: INFRA_STATE }));
  const state = parseState(await got.Body!.transformToByteArray());
  return new Map(
    state.resources.filter((r) => r.mode === "managed").flatMap((r) =>
      r.instances.map((
        i,
        n,
      ) => [r.instances.length > 1 ? `${r.address}[${n}]` : r.address, String(i.id)])
    ),
  );
}

/**
 * tofu's warnings in `output`: each "Warning:" line with the eight lines after it. `init`'s
 * "Incomplete lock file information" is the test's own (a filesystem mirror gives checksums of
 * this platform only) and is left out.
 */
export function warnings(output: string): string[] {
  const lines = output.split("\n");
  return lines.flatMap((l, i) =>
    l.includes("Warning:") && !l.includes("Incomplete lock file information for providers")
      ? [lines.slice(i, i + 9).join("\n")]
      : []
  );
}

/** What tofu's apply reported: `Apply complete! Resources: A added, C changed, D destroyed.` */
export function applySummary(
  stderr: string,
): { added: number; changed: number; destroyed: number } {
  const m = stderr.match(/Apply complete! Resources: (\d+) added, (\d+) changed, (\d+) destroyed/);
  if (!m) throw new Error(`no apply summary in setup's output:\n${stderr}`);
  return { added: Number(m[1]), changed: Number(m[2]), destroyed: Number(m[3]) };
}

/**
 * A reused VPC with real OpenTofu on moto (tests/support/real_tofu.ts): setup finds an existing
 * VPC with an Amazon-provided IPv6 block, an internet gateway and a subnet of someone else, by
 * its CIDR; the configuration reads the VPC and the gateway (data sources) and applies; a second
 * setup changes nothing; teardown from another machine (an empty work directory) removes
 * everything setup added and leaves the VPC, its IPv6 block, its gateway and the other subnet as
 * they were. A reused VPC without IPv6 gets an Amazon-provided block of Podmin's: a second setup
 * keeps it (the state's association is never read back as the VPC's own block) and teardown
 * removes it.
 */

import assert from "node:assert/strict";
import {
  AttachInternetGatewayCommand,
  CreateInternetGatewayCommand,
  CreateSubnetCommand,
  CreateVpcCommand,
  DescribeVpcsCommand,
  type EC2Client,
} from "@aws-sdk/client-ec2";
import { HeadBucketCommand } from "@aws-sdk/client-s3";
import { podmin } from "../support/programs.ts";
import { REAL_TOFU } from "../support/real_tofu.ts";
import { type RealTofuCluster, withRealTofuCluster } from "../support/real_tofu_cluster.ts";
import { testWith } from "../support/requirements.ts";
import { applySummary, inventory, stateIds, warnings } from "../support/tofu_outcome.ts";

const CLUSTER = "reuse";

/** `podmin setup` of the reused-VPC cluster into `bucket`, on `cidr`. */
function setupInto(c: RealTofuCluster, bucket: string, cidr: string) {
  return c.setup({
    bucket,
    cluster: CLUSTER,
    args: ["--vpc-cidr", cidr, "--nat64", "--nodegroup", "default,instance-type=m7i.large"],
  });
}

/** The IPv6 blocks associated with `vpcId`. */
async function ipv6BlocksOf(ec2: EC2Client, vpcId: string): Promise<(string | undefined)[]> {
  return ((await ec2.send(new DescribeVpcsCommand({ VpcIds: [vpcId] }))).Vpcs![0]
    .Ipv6CidrBlockAssociationSet ?? [])
    .filter((a) => a.Ipv6CidrBlockState?.State === "associated")
    .map((a) => a.Ipv6CidrBlock);
}

testWith(
  "setup into a reused VPC with IPv6 and a gateway, again, and teardown, with real OpenTofu on moto",
  { ...REAL_TOFU, tools: ["distribution-registry", "skopeo"] },
  (t) =>
    withRealTofuCluster("podmin-real-reuse-", async (c) => {
      const { ec2, s3, env } = c;
      const vpc = (await ec2.send(
        new CreateVpcCommand({ CidrBlock: "10.40.0.0/16", AmazonProvidedIpv6CidrBlock: true }),
      )).Vpc!;
      const igw = (await ec2.send(new CreateInternetGatewayCommand({}))).InternetGateway!;
      await ec2.send(
        new AttachInternetGatewayCommand({
          InternetGatewayId: igw.InternetGatewayId,
          VpcId: vpc.VpcId,
        }),
      );
      const foreign = (await ec2.send(
        new CreateSubnetCommand({
          VpcId: vpc.VpcId,
          CidrBlock: "10.40.200.0/24",
          AvailabilityZone: "us-east-1a",
        }),
      )).Subnet!;
      const before = await inventory(c.endpoint);
      const bucket = `podmin-reuse-${Date.now().toString(36)}`;
      // teardown runs as from another machine: an empty work directory, the configuration and
      // state only in the bucket.
      const otherMachine = `${c.tmp}/other-machine`;
      const setup = () => setupInto(c, bucket, "10.40.0.0/16");
      const ipv6Blocks = () => ipv6BlocksOf(ec2, vpc.VpcId!);
      const blocks = await ipv6Blocks();
      assert.equal(blocks.length, 1);
      await t.step("setup reads the VPC and its gateway and adds its own resources", async () => {
        const r = await setup();
        assert.equal(r.code, 0, r.stderr);
        assert.match(r.stdout, new RegExp(`reuse ${vpc.VpcId} \\(never deleted by Podmin\\)\n`));
        assert.deepEqual(warnings(r.stderr), []);
        assert.equal(applySummary(r.stderr).destroyed, 0);
        const ids = await stateIds(s3, bucket);
        assert.ok(!ids.has("aws_vpc.main"), "the VPC is not managed");
        assert.ok(!ids.has("aws_internet_gateway.main"), "the gateway is not managed");
        assert.ok(!ids.has("aws_vpc_ipv6_cidr_block_association.main"), "no second IPv6 block");
        assert.ok(ids.size > 20, "setup's own resources are");
        assert.deepEqual(await ipv6Blocks(), blocks);
      });

      await t.step("a second setup changes nothing", async () => {
        const r = await setup();
        assert.equal(r.code, 0, r.stderr);
        assert.deepEqual(applySummary(r.stderr), { added: 0, changed: 0, destroyed: 0 });
      });

      await t.step(
        "teardown removes what setup added and keeps the VPC as it was",
        async () => {
          const common = [
            "--bucket",
            `s3://${bucket}`,
            "--cluster",
            CLUSTER,
            "--work-dir",
            otherMachine,
          ];
          const down = await podmin(["teardown", ...common, "--yes"], env);
          assert.equal(down.code, 0, down.stderr);
          assert.deepEqual(await ipv6Blocks(), blocks, "the VPC keeps its IPv6 block");
          const after = await inventory(c.endpoint);
          assert.ok(after.vpcs.includes(vpc.VpcId!) && after.subnets.includes(foreign.SubnetId!));
          assert.ok(after.internetGateways.includes(igw.InternetGatewayId!));
          assert.deepEqual(after, before);
          const gone = await podmin(["destroy", ...common, "--yes"], env);
          assert.equal(gone.code, 0, gone.stderr);
          await assert.rejects(s3.send(new HeadBucketCommand({ Bucket: bucket })));
        },
      );
    }),
);

testWith(
  "setup into a reused VPC without IPv6: Podmin associates a block, keeps it on a second setup and teardown removes it, with real OpenTofu on moto",
  { ...REAL_TOFU, tools: ["distribution-registry", "skopeo"] },
  (t) =>
    withRealTofuCluster("podmin-real-reuse-v4-", async (c) => {
      const { ec2, s3, env } = c;
      const vpc = (await ec2.send(new CreateVpcCommand({ CidrBlock: "10.41.0.0/16" }))).Vpc!;
      const before = await inventory(c.endpoint);
      const bucket = `podmin-reuse-v4-${Date.now().toString(36)}`;
      const setup = () => setupInto(c, bucket, "10.41.0.0/16");
      assert.deepEqual(await ipv6BlocksOf(ec2, vpc.VpcId!), [], "no IPv6 block yet");
      let block: string | undefined;

      await t.step("setup associates an Amazon-provided IPv6 block of its own", async () => {
        const r = await setup();
        assert.equal(r.code, 0, r.stderr);
        assert.match(
          r.stdout,
          /plus an Amazon-provided IPv6 \/56 of Podmin's \(teardown removes it\)/,
        );
        assert.equal(applySummary(r.stderr).destroyed, 0);
        const ids = await stateIds(s3, bucket);
        assert.ok(!ids.has("aws_vpc.main"), "the VPC is not managed");
        assert.ok(ids.has("aws_vpc_ipv6_cidr_block_association.main"), "the block is");
        const blocks = await ipv6BlocksOf(ec2, vpc.VpcId!);
        assert.equal(blocks.length, 1, JSON.stringify(blocks));
        block = blocks[0];
        assert.match(block ?? "", /::\/56$/);
      });

      await t.step("a second setup keeps the block as the cluster's: nothing changes", async () => {
        const r = await setup();
        assert.equal(r.code, 0, r.stderr);
        assert.match(
          r.stdout,
          /plus an Amazon-provided IPv6 \/56 of Podmin's \(teardown removes it\)/,
        );
        assert.deepEqual(applySummary(r.stderr), { added: 0, changed: 0, destroyed: 0 });
        assert.deepEqual(await ipv6BlocksOf(ec2, vpc.VpcId!), [block]);
      });

      await t.step("teardown removes the block and leaves the VPC", async () => {
        const common = ["--bucket", `s3://${bucket}`, "--cluster", CLUSTER];
        const down = await podmin(["teardown", ...common, "--yes"], env);
        assert.equal(down.code, 0, down.stderr);
        assert.deepEqual(await ipv6BlocksOf(ec2, vpc.VpcId!), [], "Podmin's block is gone");
        assert.deepEqual(await inventory(c.endpoint), before);
        const gone = await podmin(["destroy", ...common, "--yes"], env);
        assert.equal(gone.code, 0, gone.stderr);
      });
    }),
);

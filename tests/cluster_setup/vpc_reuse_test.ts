/**
 * VPC reuse on moto: a VPC that already has an internet gateway and subnets is discovered
 * (aws_lookup.ts) and handed to the generator: the gateway is reused (a data source, never a
 * second gateway), other subnets stay untouched, and a planned subnet overlapping one of them is
 * refused with both CIDRs named.
 */

import assert from "node:assert/strict";
import {
  AssociateVpcCidrBlockCommand,
  AttachInternetGatewayCommand,
  CreateInternetGatewayCommand,
  CreateSubnetCommand,
  CreateVpcCommand,
  EC2Client,
} from "@aws-sdk/client-ec2";
import { describeReusedVpc, findReusableVpc } from "../../cli/setup/aws_lookup.ts";
import { clusterSpecOf } from "../../cli/setup/render_config.ts";
import { parseSetupFlags } from "../../cli/setup/setup_flags.ts";
import { generateTofu } from "../../cli/infra/generate_tofu.ts";
import { moto } from "../support/moto.ts";

Deno.test("VPC reuse [moto]: an existing gateway is reused, other subnets kept clear, overlaps refused by CIDR", async () => {
  const m = await moto();
  await m.reset();
  const ec2 = new EC2Client({ region: "us-east-1" });
  const vpc = (await ec2.send(new CreateVpcCommand({ CidrBlock: "10.30.0.0/16" }))).Vpc!;
  await ec2.send(
    new AssociateVpcCidrBlockCommand({ VpcId: vpc.VpcId, AmazonProvidedIpv6CidrBlock: true }),
  );
  const igw = (await ec2.send(new CreateInternetGatewayCommand({}))).InternetGateway!;
  await ec2.send(
    new AttachInternetGatewayCommand({
      InternetGatewayId: igw.InternetGatewayId,
      VpcId: vpc.VpcId,
    }),
  );
  await ec2.send(
    new CreateSubnetCommand({
      VpcId: vpc.VpcId,
      CidrBlock: "10.30.0.0/24",
      AvailabilityZone: "us-east-1a",
    }),
  );
  // Podmin's own subnet of this cluster (from an earlier apply) is not foreign.
  await ec2.send(
    new CreateSubnetCommand({
      VpcId: vpc.VpcId,
      CidrBlock: "10.30.1.0/24",
      AvailabilityZone: "us-east-1a",
      TagSpecifications: [{
        ResourceType: "subnet",
        Tags: [{ Key: "podmin:cluster", Value: "reuse" }],
      }],
    }),
  );

  const found = await findReusableVpc(ec2, { cidr: "10.30.0.0/16", cluster: "reuse" });
  assert.equal(found.kind, "reuse", "a VPC this cluster did not create is reused");
  const reused = found.kind === "reuse" ? found.vpc : { id: "", ipv6CidrBlock: "" };
  assert.equal(reused.id, vpc.VpcId);
  const contents = await describeReusedVpc(ec2, { vpcId: reused.id, cluster: "reuse" });
  assert.equal(contents.internetGatewayId, igw.InternetGatewayId);
  assert.deepEqual(contents.foreignSubnetCidrs, ["10.30.0.0/24"]);

  const generate = () => {
    const flags = parseSetupFlags({
      cluster: "reuse",
      region: "us-east-1",
      vpcCidr: "10.30.0.0/16",
      nat64: "",
      nodeGroups: ["default,instance-type=m7i.large,zone=a"],
    });
    return generateTofu({
      spec: clusterSpecOf({
        flags,
        bucket: "podmin-reuse",
        zones: new Map([["default", "us-east-1a"]]),
      }),
      existingVpc: { id: reused.id, ipv6CidrBlock: reused.ipv6CidrBlock, ...contents },
      zones: ["us-east-1a"],
      userData: { default: "#!/bin/bash\n" },
      nat64UserData: "#!/bin/bash\n",
      amiIds: { amd64: "ami-12345678", arm64: "ami-87654321" },
    });
  };
  const config = generate() as unknown as {
    data: Record<string, Record<string, { internet_gateway_id?: string; id?: string }>>;
    resource: Record<string, unknown>;
  };
  assert.equal(config.data.aws_internet_gateway.main.internet_gateway_id, igw.InternetGatewayId);
  assert.equal(config.resource.aws_internet_gateway, undefined, "no second gateway");
  assert.equal(config.data.aws_vpc.main.id, vpc.VpcId);
  assert.equal(config.resource.aws_vpc, undefined, "the VPC is not Podmin's");

  // A gateway this cluster's state manages (Podmin added it on an earlier run) stays managed.
  const managed = await describeReusedVpc(ec2, {
    vpcId: reused.id,
    cluster: "reuse",
    managedIgwId: igw.InternetGatewayId,
  });
  assert.equal(managed.internetGatewayId, undefined, "not turned into a data lookup");

  // A foreign subnet where the zone's NAT64 subnet (the VPC's last /27) would go: refused.
  await ec2.send(
    new CreateSubnetCommand({
      VpcId: vpc.VpcId,
      CidrBlock: "10.30.255.0/24",
      AvailabilityZone: "us-east-1a",
    }),
  );
  const again = await describeReusedVpc(ec2, { vpcId: reused.id, cluster: "reuse" });
  contents.foreignSubnetCidrs = again.foreignSubnetCidrs;
  assert.throws(
    generate,
    /the reused VPC's subnet 10\.30\.255\.0\/24 overlaps Podmin's .*\(10\.30\.255\.224\/27\)/,
  );
});

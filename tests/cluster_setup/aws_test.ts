/** Setup's AWS-facing pieces against moto: CAs in SSM, VPC reuse, zones, capacity waits. */

import assert from "node:assert/strict";
import {
  AutoScalingClient,
  CreateAutoScalingGroupCommand,
  CreateLaunchConfigurationCommand,
} from "@aws-sdk/client-auto-scaling";
import { AssociateVpcCidrBlockCommand, CreateVpcCommand, EC2Client } from "@aws-sdk/client-ec2";
import { GetParameterCommand, SSMClient } from "@aws-sdk/client-ssm";
import { availableZones, findReusableVpc } from "../../cli/setup/aws_lookup.ts";
import { deleteClusterCas, ensureClusterCas } from "../../cli/setup/cluster_cas.ts";
import { waitForCapacity } from "../../cli/setup/wait_capacity.ts";
import { moto } from "../support/moto.ts";

Deno.test("setup CAs [moto]: created as SecureStrings when missing, kept on re-run, deleted by destroy", async () => {
  const m = await moto();
  await m.reset();
  const ssm = new SSMClient({ region: "us-east-1" });
  const first = await ensureClusterCas({ ssm, cluster: "prod" });
  assert.deepEqual(first.map((r) => r.outcome), ["created", "created"]);
  const get = async (name: string) =>
    (await ssm.send(new GetParameterCommand({ Name: name, WithDecryption: true }))).Parameter!;
  const key = await get("/prod/_system/workload-ca-key");
  assert.equal(key.Type, "SecureString");
  assert.match(key.Value!, /^-----BEGIN PRIVATE KEY-----/);
  const ca = await get("/prod/_system/cluster-ca");
  assert.match(ca.Value!, /-----BEGIN CERTIFICATE-----[\s\S]+-----BEGIN PRIVATE KEY-----/);

  const again = await ensureClusterCas({ ssm, cluster: "prod" });
  assert.deepEqual(again.map((r) => r.outcome), ["kept", "kept"]);
  assert.equal(
    (await get("/prod/_system/workload-ca-key")).Value,
    key.Value,
    "an existing key is never replaced",
  );

  assert.deepEqual(await deleteClusterCas({ ssm, cluster: "prod" }), [
    "/prod/_system/workload-ca-key",
    "/prod/_system/cluster-ca",
  ]);
  await assert.rejects(get("/prod/_system/cluster-ca"), /ParameterNotFound/);
  assert.deepEqual(await deleteClusterCas({ ssm, cluster: "prod" }), [], "deleting again is fine");
});

Deno.test("setup VPC reuse [moto]: exact primary CIDR reused, with its IPv6 block or none (Podmin's own block never read back as the VPC's); ambiguous or incompatible fail", async () => {
  const m = await moto();
  await m.reset();
  const ec2 = new EC2Client({ region: "us-east-1" });
  const lookup = (cidr: string) => findReusableVpc(ec2, { cidr, cluster: "prod" });
  assert.deepEqual(await lookup("10.42.0.0/16"), { kind: "none" }, "no match: setup creates one");
  const v6 = await ec2.send(
    new CreateVpcCommand({ CidrBlock: "10.42.0.0/16", AmazonProvidedIpv6CidrBlock: true }),
  );
  const found = await lookup("10.42.0.0/16");
  assert.equal(found.kind, "reuse");
  assert.equal(found.kind === "reuse" && found.vpc.id, v6.Vpc!.VpcId);
  assert.match(found.kind === "reuse" ? found.vpc.ipv6CidrBlock ?? "" : "", /::\/56$/);

  // Without an IPv6 block: reused, the configuration associates one (no ipv6CidrBlock).
  const noV6 = await ec2.send(new CreateVpcCommand({ CidrBlock: "10.43.0.0/16" }));
  assert.deepEqual(await lookup("10.43.0.0/16"), {
    kind: "reuse",
    vpc: { id: noV6.Vpc!.VpcId },
  });
  // The block an earlier setup associated (the state's association id) stays the cluster's own.
  const assoc = await ec2.send(
    new AssociateVpcCidrBlockCommand({
      VpcId: noV6.Vpc!.VpcId,
      AmazonProvidedIpv6CidrBlock: true,
    }),
  );
  const associationId = assoc.Ipv6CidrBlockAssociation!.AssociationId!;
  const seenBy = (managedIpv6AssociationId?: string) =>
    findReusableVpc(ec2, { cidr: "10.43.0.0/16", cluster: "prod", managedIpv6AssociationId });
  assert.deepEqual(await seenBy(associationId), {
    kind: "reuse",
    vpc: { id: noV6.Vpc!.VpcId },
  });
  const foreign = await seenBy("vpc-cidr-assoc-someone-elses");
  assert.match(foreign.kind === "reuse" ? foreign.vpc.ipv6CidrBlock ?? "" : "", /::\/56$/);

  await ec2.send(
    new CreateVpcCommand({ CidrBlock: "10.44.0.0/16", AmazonProvidedIpv6CidrBlock: true }),
  );
  await ec2.send(
    new CreateVpcCommand({ CidrBlock: "10.44.0.0/16", AmazonProvidedIpv6CidrBlock: true }),
  );
  await assert.rejects(lookup("10.44.0.0/16"), /ambiguous --vpc-cidr/);

  const other = await ec2.send(new CreateVpcCommand({ CidrBlock: "10.45.0.0/16" }));
  await ec2.send(
    new AssociateVpcCidrBlockCommand({ VpcId: other.Vpc!.VpcId, CidrBlock: "10.46.0.0/16" }),
  );
  await assert.rejects(lookup("10.46.0.0/16"), /secondary CIDR/);

  // The VPC this cluster created: kept as its own when the state manages it, never reused;
  // tagged for this cluster but unknown to the state: refused, naming the import.
  const own = await ec2.send(
    new CreateVpcCommand({
      CidrBlock: "10.47.0.0/16",
      AmazonProvidedIpv6CidrBlock: true,
      TagSpecifications: [{
        ResourceType: "vpc",
        Tags: [{ Key: "podmin:cluster", Value: "prod" }],
      }],
    }),
  );
  assert.deepEqual(
    await findReusableVpc(ec2, {
      cidr: "10.47.0.0/16",
      cluster: "prod",
      managedVpcId: own.Vpc!.VpcId,
    }),
    { kind: "own", id: own.Vpc!.VpcId },
  );
  await assert.rejects(
    findReusableVpc(ec2, { cidr: "10.47.0.0/16", cluster: "prod", workDir: "/w" }),
    new RegExp(
      `VPC ${
        own.Vpc!.VpcId
      } \\(10\\.47\\.0\\.0/16\\) carries podmin:cluster=prod, but the cluster's OpenTofu state does not manage it`,
    ),
  );
  assert.equal(
    (await findReusableVpc(ec2, { cidr: "10.47.0.0/16", cluster: "other" })).kind,
    "reuse",
    "another cluster's VPC is not this cluster's: reused",
  );

  const zones = await availableZones(ec2);
  assert.ok(zones.length >= 2 && zones.every((z) => z.startsWith("us-east-1")), `${zones}`);
});

Deno.test("setup capacity wait [moto]: reports progress and returns once groups are healthy; times out otherwise", async () => {
  const m = await moto();
  await m.reset();
  const asg = new AutoScalingClient({ region: "us-east-1" });
  await asg.send(
    new CreateLaunchConfigurationCommand({
      LaunchConfigurationName: "lc",
      ImageId: "ami-12c6146b",
      InstanceType: "t4g.nano",
    }),
  );
  await asg.send(
    new CreateAutoScalingGroupCommand({
      AutoScalingGroupName: "podmin-prod-workers",
      LaunchConfigurationName: "lc",
      MinSize: 2,
      MaxSize: 2,
      DesiredCapacity: 2,
      AvailabilityZones: ["us-east-1a"],
    }),
  );
  const lines: string[] = [];
  await waitForCapacity({
    asg,
    groups: [{ asgName: "podmin-prod-workers", label: "NodeGroup workers", timeoutMs: 10_000 }],
    log: (l) => lines.push(l),
    pollMs: 50,
  });
  assert.deepEqual(lines, ["NodeGroup workers: 2/2 healthy"]);
  await assert.rejects(
    waitForCapacity({
      asg,
      groups: [{ asgName: "does-not-exist", label: "NAT64 us-east-1a", timeoutMs: 200 }],
      log: () => {},
      pollMs: 50,
    }),
    /NAT64 us-east-1a did not reach its healthy capacity/,
  );
});

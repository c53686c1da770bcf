/**
 * A moto server for the test suite: started once per test process on a free
 * loopback port, reset between tests, configured through AWS_ENDPOINT_URL.
 * It runs through tests/support/moto_server.py, which seeds the public SSM
 * parameters of the Debian AMIs (tests/support/moto_public_parameters.json).
 * `dedicatedMoto()` starts a separate server for a test that changes
 * server-wide settings (IAM enforcement).
 */

import * as net from "node:net";
import {
  AutoScalingClient,
  DescribeAutoScalingGroupsCommand,
  DescribeLaunchConfigurationsCommand,
} from "@aws-sdk/client-auto-scaling";
import {
  DescribeInstancesCommand,
  DescribeInternetGatewaysCommand,
  DescribeLaunchTemplatesCommand,
  DescribeSecurityGroupsCommand,
  DescribeSubnetsCommand,
  DescribeVpcsCommand,
  EC2Client,
} from "@aws-sdk/client-ec2";
import { CreateBucketCommand, ListBucketsCommand, S3Client } from "@aws-sdk/client-s3";
import {
  DeleteParameterCommand,
  DescribeParametersCommand,
  PutParameterCommand,
  SSMClient,
} from "@aws-sdk/client-ssm";
import {
  CreateSecretCommand,
  PutSecretValueCommand,
  SecretsManagerClient,
} from "@aws-sdk/client-secrets-manager";

/** A running moto server. */
export interface Moto {
  endpoint: string;
  port: number;
  /** Wipes every resource (POST /moto-api/reset). */
  reset(): Promise<void>;
  /** Creates a bucket and returns its name. */
  createBucket(name?: string): Promise<string>;
  /** Stops the server (for outage tests); `start()` brings it back on the same port. */
  stop(): Promise<void>;
  start(): Promise<void>;
}

/** The environment of a program that talks to `m` (endpoint, test credentials, region). */
export function motoEnv(m: Pick<Moto, "endpoint">): Record<string, string> {
  return {
    AWS_ENDPOINT_URL: m.endpoint,
    AWS_ACCESS_KEY_ID: "test",
    AWS_SECRET_ACCESS_KEY: "test",
    AWS_REGION: "us-east-1",
  };
}

/** A moto server of one test only. */
export interface DedicatedMoto extends Moto {
  /**
   * Turns IAM enforcement on or off (moto's INITIAL_NO_AUTH_ACTION_COUNT, through
   * /moto-api/reset-auth): when on, every request must be signed with the keys of an IAM user
   * created in this moto and is allowed only by that user's policies.
   */
  enforceIam(on: boolean): Promise<void>;
  /** Stops the server for good. */
  close(): Promise<void>;
}

let shared: Promise<Moto> | undefined;

/** Returns the suite's moto server, starting it on first use. */
export function moto(): Promise<Moto> {
  shared ??= startMoto({ setEnv: true });
  return shared;
}

/** Options of `dedicatedMoto`. */
export interface DedicatedMotoOptions {
  /**
   * Installs the shims of the moto faults that stop the real AWS provider from applying Podmin's
   * configuration (tests/support/moto_tofu_shims.py); off, moto answers as shipped.
   */
  tofuShims?: boolean;
}

/** Starts a moto server for one test; it does not change AWS_* in the environment. */
export async function dedicatedMoto(options: DedicatedMotoOptions = {}): Promise<DedicatedMoto> {
  const m = await startMoto({ setEnv: false, tofuShims: options.tofuShims });
  return {
    ...m,
    async enforceIam(on) {
      const res = await fetch(`${m.endpoint}/moto-api/reset-auth`, {
        method: "POST",
        body: on ? "0" : "inf",
      });
      await res.body?.cancel();
      if (!res.ok) throw new Error(`moto reset-auth answered ${res.status}`);
    },
    close: m.stop,
  };
}

/** A free TCP port on 127.0.0.1. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.once("error", reject);
    srv.listen(0, "127.0.0.1", () => {
      const port = (srv.address() as net.AddressInfo).port;
      srv.close(() => resolve(port));
    });
  });
}

const launcher = new URL("./moto_server.py", import.meta.url).pathname;
const publicParameters = new URL("./moto_public_parameters.json", import.meta.url).pathname;

async function startMoto(options: { setEnv: boolean; tofuShims?: boolean }): Promise<Moto> {
  const port = await freePort();
  const endpoint = `http://127.0.0.1:${port}`;
  let child: Deno.ChildProcess | undefined;

  const start = async () => {
    child = new Deno.Command("python3", {
      args: [launcher, "-H", "127.0.0.1", "-p", String(port)],
      env: {
        PODMIN_MOTO_PUBLIC_PARAMETERS: publicParameters,
        PODMIN_MOTO_TOFU_SHIMS: options.tofuShims ? "1" : "0",
      },
      stdout: "null",
      // PODMIN_MOTO_LOG=1 shows moto's request log and tracebacks (debugging a moto answer).
      stderr: Deno.env.get("PODMIN_MOTO_LOG") === "1" ? "inherit" : "null",
    }).spawn();
    child.unref();
    const deadline = Date.now() + 30_000;
    for (;;) {
      try {
        const res = await fetch(`${endpoint}/moto-api/`);
        await res.body?.cancel();
        if (res.ok) return;
      } catch { /* not up yet */ }
      if (Date.now() > deadline) throw new Error(`moto did not start on ${endpoint}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  };
  const stop = async () => {
    if (!child) return;
    try {
      child.kill("SIGKILL");
    } catch { /* gone */ }
    child.ref(); // an unref'd child's status alone would not keep the event loop waiting
    await child.status;
    child = undefined;
  };
  await start();
  globalThis.addEventListener("unload", () => {
    try {
      child?.kill("SIGKILL");
    } catch { /* gone */ }
  });

  if (options.setEnv) {
    Deno.env.set("AWS_ENDPOINT_URL", endpoint);
    Deno.env.set("AWS_ACCESS_KEY_ID", "testing");
    Deno.env.set("AWS_SECRET_ACCESS_KEY", "testing");
    Deno.env.set("AWS_REGION", "us-east-1");
  }
  const s3 = new S3Client({
    region: "us-east-1",
    endpoint,
    forcePathStyle: true,
    credentials: { accessKeyId: "testing", secretAccessKey: "testing" },
  });
  let counter = 0;
  return {
    endpoint,
    port,
    async reset() {
      const res = await fetch(`${endpoint}/moto-api/reset`, { method: "POST" });
      await res.body?.cancel();
    },
    async createBucket(name?: string) {
      const bucket = name ?? `podmin-test-${Date.now().toString(36)}-${counter++}`;
      await s3.send(new CreateBucketCommand({ Bucket: bucket }));
      return bucket;
    },
    stop,
    start,
  };
}

/** Sets an SSM SecureString parameter on the suite's moto server. */
export async function putParameter(name: string, value: string): Promise<void> {
  const m = await moto();
  const ssm = new SSMClient({ region: "us-east-1", endpoint: m.endpoint });
  await ssm.send(
    new PutParameterCommand({ Name: name, Value: value, Type: "SecureString", Overwrite: true }),
  );
}

/** Deletes an SSM parameter on the suite's moto server. */
export async function deleteParameter(name: string): Promise<void> {
  const m = await moto();
  const ssm = new SSMClient({ region: "us-east-1", endpoint: m.endpoint });
  await ssm.send(new DeleteParameterCommand({ Name: name }));
}

/** Creates a Secrets Manager secret (string) on the suite's moto server. */
export async function putSecret(name: string, value: string): Promise<void> {
  const m = await moto();
  const sm = new SecretsManagerClient({ region: "us-east-1", endpoint: m.endpoint });
  try {
    await sm.send(new CreateSecretCommand({ Name: name, SecretString: value }));
  } catch {
    await sm.send(new PutSecretValueCommand({ SecretId: name, SecretString: value }));
  }
}

/**
 * What the suite's moto holds in `region` that setup could create: S3 buckets, SSM parameters,
 * EC2 VPCs, subnets, security groups, internet gateways, launch templates and instances, Auto
 * Scaling groups and launch configurations (sorted names or ids). Two calls around a command that
 * must create nothing compare equal.
 */
export async function motoInventory(region = "us-east-1"): Promise<Record<string, string[]>> {
  const m = await moto();
  const config = {
    region,
    endpoint: m.endpoint,
    credentials: { accessKeyId: "test", secretAccessKey: "test" },
  };
  const s3 = new S3Client({ ...config, forcePathStyle: true });
  const ssm = new SSMClient(config);
  const ec2 = new EC2Client(config);
  const asg = new AutoScalingClient(config);
  const parameters: string[] = [];
  let next: string | undefined;
  do {
    const page = await ssm.send(new DescribeParametersCommand({ NextToken: next }));
    parameters.push(...(page.Parameters ?? []).map((p) => p.Name!));
    next = page.NextToken;
  } while (next);
  const sorted = (xs: (string | undefined)[]) => xs.map(String).sort();
  return {
    buckets: sorted((await s3.send(new ListBucketsCommand({}))).Buckets?.map((b) => b.Name) ?? []),
    parameters: sorted(parameters),
    vpcs: sorted((await ec2.send(new DescribeVpcsCommand({}))).Vpcs?.map((v) => v.VpcId) ?? []),
    subnets: sorted(
      (await ec2.send(new DescribeSubnetsCommand({}))).Subnets?.map((x) => x.SubnetId) ?? [],
    ),
    securityGroups: sorted(
      (await ec2.send(new DescribeSecurityGroupsCommand({}))).SecurityGroups?.map((g) =>
        g.GroupId
      ) ?? [],
    ),
    internetGateways: sorted(
      (await ec2.send(new DescribeInternetGatewaysCommand({}))).InternetGateways?.map((g) =>
        g.InternetGatewayId
      ) ?? [],
    ),
    launchTemplates: sorted(
      (await ec2.send(new DescribeLaunchTemplatesCommand({}))).LaunchTemplates?.map((t) =>
        t.LaunchTemplateName
      ) ?? [],
    ),
    instances: sorted(
      (await ec2.send(new DescribeInstancesCommand({}))).Reservations?.flatMap((r) =>
        (r.Instances ?? []).map((i) => i.InstanceId)
      ) ?? [],
    ),
    autoScalingGroups: sorted(
      (await asg.send(new DescribeAutoScalingGroupsCommand({}))).AutoScalingGroups?.map((g) =>
        g.AutoScalingGroupName
      ) ?? [],
    ),
    launchConfigurations: sorted(
      (await asg.send(new DescribeLaunchConfigurationsCommand({}))).LaunchConfigurations?.map(
        (c) => c.LaunchConfigurationName,
      ) ?? [],
    ),
  };
}

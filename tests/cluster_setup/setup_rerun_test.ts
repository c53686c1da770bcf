/**
 * A second `podmin setup` destroys nothing, on moto: setup runs three times against the same
 * cluster (the same flags, then with an added NodeGroup) with the tofu process boundary recorded
 * (tests/support/tofu_recorder.sh; real OpenTofu is not available here). Between runs the test
 * does what `tofu apply` would: it creates the configuration's VPC and internet gateway in moto
 * with the tags the configuration gives them, and writes the state OpenTofu's S3 backend would
 * save (every address of the applied configuration). Each later run's generated configuration
 * must still declare every address of that state in the same mode: the VPC and gateway setup
 * created stay `resource` blocks (a `data` lookup instead would make OpenTofu destroy them).
 *
 * Then a `tofu apply` killed mid-run (the recorder's PODMIN_TOFU_KILL) leaves its S3 lock file:
 * setup and teardown name the lock and its release, and `teardown --force-unlock ID` completes.
 */

import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import * as path from "node:path";
import {
  AutoScalingClient,
  CreateAutoScalingGroupCommand,
  CreateLaunchConfigurationCommand,
} from "@aws-sdk/client-auto-scaling";
import {
  AttachInternetGatewayCommand,
  CreateInternetGatewayCommand,
  CreateVpcCommand,
  EC2Client,
} from "@aws-sdk/client-ec2";
import { INFRA_CONFIG, INFRA_STATE } from "../../core/bucket/bucket_layout.ts";
import { getIfExists } from "../../core/store/object_store.ts";
import { S3Store } from "../../core/store/s3_store.ts";
import { INFRA_STATE_LOCK, parseState } from "../../cli/setup/tofu_state.ts";
import { writeOciLayout } from "../support/oci_image.ts";
import { serveFiles } from "../support/file_server.ts";
import { freePort, moto } from "../support/moto.ts";
import { podmin, waitFor } from "../support/programs.ts";
import { run } from "../support/registry.ts";
import { testWith } from "../support/requirements.ts";

const sha = (b: Uint8Array) => createHash("sha256").update(b).digest("hex");
const recorder = new URL("../support/tofu_recorder.sh", import.meta.url).pathname;

/** The part of a generated configuration this test reads. */
interface Config {
  provider: { aws: { default_tags: { tags: Record<string, string> } }[] | unknown };
  resource: Record<string, Record<string, Record<string, unknown>>>;
  data?: Record<string, Record<string, Record<string, unknown>>>;
}

/** Every address a configuration declares: `type.name` for resources, `data.type.name`. */
function addresses(config: Config): string[] {
  return [
    ...Object.entries(config.resource).flatMap(([t, byName]) =>
      Object.keys(byName).map((n) => `${t}.${n}`)
    ),
    ...Object.entries(config.data ?? {}).flatMap(([t, byName]) =>
      Object.keys(byName).map((n) => `data.${t}.${n}`)
    ),
  ].sort();
}

function defaultTags(config: Config): Record<string, string> {
  const aws = (config.provider as { aws: unknown }).aws;
  const block = (Array.isArray(aws) ? aws[0] : aws) as {
    default_tags?: { tags?: Record<string, string> };
  };
  return block.default_tags?.tags ?? {};
}

const awsTags = (tags: Record<string, string>) =>
  Object.entries(tags).map(([Key, Value]) => ({ Key, Value }));

/**
 * What `tofu apply` of `config` would leave: the VPC and internet gateway it declares as
 * resources created in moto (once; tagged as the configuration tags them, provider default tags
 * included), and the state (format 4) holding every address of the configuration, the VPC and
 * gateway with their real ids and the VPC's CIDR.
 */
async function simulateApply(
  { config, store, ec2, previous }: {
    config: Config;
    store: S3Store;
    ec2: EC2Client;
    previous: Map<string, Record<string, unknown>>;
  },
): Promise<Map<string, Record<string, unknown>>> {
  const ids = new Map<string, Record<string, unknown>>();
  const defaults = defaultTags(config);
  const vpc = config.resource.aws_vpc?.main as
    | { cidr_block: string; tags: Record<string, string> }
    | undefined;
  if (vpc) {
    const known = previous.get("aws_vpc.main");
    if (known) ids.set("aws_vpc.main", known);
    else {
      const made = await ec2.send(
        new CreateVpcCommand({
          CidrBlock: vpc.cidr_block,
          AmazonProvidedIpv6CidrBlock: true,
          TagSpecifications: [{
            ResourceType: "vpc",
            Tags: awsTags({ ...defaults, ...vpc.tags }),
          }],
        }),
      );
      ids.set("aws_vpc.main", { id: made.Vpc!.VpcId, cidr_block: vpc.cidr_block });
    }
  }
  const igw = config.resource.aws_internet_gateway?.main as
    | { tags: Record<string, string> }
    | undefined;
  if (igw) {
    const known = previous.get("aws_internet_gateway.main");
    if (known) ids.set("aws_internet_gateway.main", known);
    else {
      const made = await ec2.send(
        new CreateInternetGatewayCommand({
          TagSpecifications: [{
            ResourceType: "internet-gateway",
            Tags: awsTags({ ...defaults, ...igw.tags }),
          }],
        }),
      );
      const vpcId = String(ids.get("aws_vpc.main")?.id);
      await ec2.send(
        new AttachInternetGatewayCommand({
          InternetGatewayId: made.InternetGateway!.InternetGatewayId,
          VpcId: vpcId,
        }),
      );
      ids.set("aws_internet_gateway.main", {
        id: made.InternetGateway!.InternetGatewayId,
        vpc_id: vpcId,
      });
    }
  }
  const resources = addresses(config).map((address) => {
    const data = address.startsWith("data.");
    const [type, name] = (data ? address.slice(5) : address).split(".");
    return {
      mode: data ? "data" : "managed",
      type,
      name,
      provider: 'provider["registry.opentofu.org/hashicorp/aws"]',
      instances: [{ schema_version: 0, attributes: ids.get(address) ?? { id: address } }],
    };
  });
  const state = { version: 4, terraform_version: "1.10.10", serial: 1, lineage: "l", resources };
  await store.put(INFRA_STATE, new TextEncoder().encode(JSON.stringify(state)));
  return ids;
}

testWith(
  "setup twice and with an added NodeGroup [moto]: every address of the saved state stays in the configuration; the VPC and gateway stay managed; a killed apply's lock is named and released by teardown",
  { tools: ["distribution-registry", "skopeo", "jq", "curl"] },
  async (t) => {
    const m = await moto();
    await m.reset();
    const tmp = await Deno.makeTempDir({ prefix: "podmin-rerun-" });
    let upstream: Deno.ChildProcess | undefined;
    const files = new Map<string, Uint8Array>();
    for (const n of ["containerd", "runc", "cni-plugins", "crictl", "kubelet", "coredns"]) {
      files.set(n, crypto.getRandomValues(new Uint8Array(4096)));
    }
    const site = serveFiles(files);
    try {
      const port = await freePort();
      await Deno.writeTextFile(
        path.join(tmp, "registry.yml"),
        `version: 0.1\nlog: {level: error}\nstorage: {filesystem: {rootdirectory: ${tmp}/registry}}\nhttp: {addr: 127.0.0.1:${port}}\n`,
      );
      upstream = new Deno.Command("distribution-registry", {
        args: ["serve", path.join(tmp, "registry.yml")],
        stdout: "null",
        stderr: "null",
      }).spawn();
      await waitFor("upstream registry", async () => {
        try {
          const r = await fetch(`http://127.0.0.1:${port}/v2/`);
          await r.body?.cancel();
          return r.ok;
        } catch {
          return false;
        }
      });
      await writeOciLayout({
        dir: `${tmp}/pause`,
        ref: "3.10",
        platforms: [{ arch: "amd64", files: { pause: new TextEncoder().encode("pause") } }],
        index: true,
      });
      await run("skopeo", [
        "copy",
        "--all",
        "--dest-tls-verify=false",
        `oci:${tmp}/pause:3.10`,
        `docker://127.0.0.1:${port}/pause:3.10`,
      ]);
      await Deno.writeTextFile(
        `${tmp}/catalog.json`,
        JSON.stringify({
          dependencies: [...files].map(([name, bytes]) => ({
            name,
            version: "1.0.0",
            arch: "amd64",
            url: site.url(name),
            sha256: sha(bytes),
          })),
        }),
      );
      await Deno.writeFile(`${tmp}/agent-amd64`, crypto.getRandomValues(new Uint8Array(4096)));

      // The NodeGroups' ASGs, as `tofu apply` would create them (setup waits for capacity).
      const asg = new AutoScalingClient({ region: "us-east-1" });
      await asg.send(
        new CreateLaunchConfigurationCommand({
          LaunchConfigurationName: "lc-rerun",
          ImageId: "ami-12c6146b",
          InstanceType: "m7i.large",
        }),
      );
      for (const ng of ["workers", "batch"]) {
        await asg.send(
          new CreateAutoScalingGroupCommand({
            AutoScalingGroupName: `podmin-rerun-ng-${ng}`,
            LaunchConfigurationName: "lc-rerun",
            MinSize: 1,
            MaxSize: 1,
            DesiredCapacity: 1,
            AvailabilityZones: ["us-east-1a"],
          }),
        );
      }

      const bucket = `podmin-rerun-${Date.now().toString(36)}`;
      const workDir = `${tmp}/home/rerun`;
      const env = {
        PODMIN_TOFU: recorder,
        PODMIN_TOFU_LOG: `${tmp}/tofu.jsonl`,
        PODMIN_CACHE_DIR: `${tmp}/cache`,
        PODMIN_HOME: `${tmp}/home`,
      };
      const setupArgs = (nodeGroups: string[]) => [
        "--bucket",
        `s3://${bucket}`,
        "setup",
        "--yes",
        "--cluster",
        "rerun",
        "--region",
        "us-east-1",
        "--vpc-cidr",
        "10.50.0.0/16",
        ...nodeGroups.flatMap((ng) => ["--nodegroup", ng]),
        "--dependency-catalog",
        `${tmp}/catalog.json`,
        "--agent-binary",
        `amd64=${tmp}/agent-amd64`,
        "--ami",
        "amd64=ami-12345678",
        "--sandbox-image",
        `127.0.0.1:${port}/pause:3.10`,
        "--mirror-plain-http",
      ];
      const workers = "workers,size=1,instance-type=m7i.large,zone=a";
      const batch = "batch,size=1,instance-type=m7i.large,zone=a";
      const store = new S3Store({ bucket, region: "us-east-1" });
      const ec2 = new EC2Client({ region: "us-east-1" });
      const savedConfig = async (): Promise<Config> =>
        JSON.parse(new TextDecoder().decode((await getIfExists(store, INFRA_CONFIG))!.body));
      const savedStateAddresses = async () =>
        parseState((await getIfExists(store, INFRA_STATE))!.body).resources.map((r) => r.address)
          .sort();

      /** Every address of the saved state is declared by `config`, in the same mode. */
      const assertKeepsState = async (config: Config, what: string) => {
        const declared = new Set(addresses(config));
        const dropped = (await savedStateAddresses()).filter((a) => !declared.has(a));
        assert.deepEqual(
          dropped,
          [],
          `${what}: addresses of the saved state missing from the configuration (OpenTofu would destroy them): ${
            dropped.join(", ")
          }`,
        );
        assert.ok(config.resource.aws_vpc?.main, `${what}: aws_vpc.main is a resource`);
        assert.ok(
          config.resource.aws_internet_gateway?.main,
          `${what}: aws_internet_gateway.main is a resource`,
        );
        assert.equal(config.data?.aws_vpc, undefined, `${what}: no data lookup of the VPC`);
        assert.equal(config.data?.aws_internet_gateway, undefined, `${what}: no gateway lookup`);
      };

      let first: Config | undefined;
      let applied = new Map<string, Record<string, unknown>>();
      await t.step("first setup: a new VPC, created by the (simulated) apply", async () => {
        const r = await podmin(setupArgs([workers]), env);
        assert.equal(r.code, 0, r.stderr);
        assert.match(r.stdout, /^VPC: +new 10\.50\.0\.0\/16$/m);
        first = await savedConfig();
        assert.ok(first.resource.aws_vpc?.main && first.resource.aws_internet_gateway?.main);
        applied = await simulateApply({ config: first, store, ec2, previous: applied });
      });

      await t.step("second identical setup: the state's VPC and gateway stay managed", async () => {
        const vpcId = String(applied.get("aws_vpc.main")!.id);
        const r = await podmin(setupArgs([workers]), env);
        assert.equal(r.code, 0, r.stderr);
        const second = await savedConfig();
        await assertKeepsState(second, "second setup");
        assert.doesNotMatch(r.stdout, /reuse vpc-/, "its own VPC is not 'reused'");
        assert.match(
          r.stdout,
          new RegExp(
            `^VPC: +keep ${vpcId} \\(10\\.50\\.0\\.0/16, created by this cluster\\)$`,
            "m",
          ),
        );
        assert.match(r.stderr, new RegExp(`keeping VPC ${vpcId}: created by this cluster`));
        assert.deepEqual(addresses(second), addresses(first!), "the same addresses");
        assert.deepEqual(second.resource.aws_vpc.main, first!.resource.aws_vpc.main);
        assert.deepEqual(
          second.resource.aws_internet_gateway.main,
          first!.resource.aws_internet_gateway.main,
        );
        applied = await simulateApply({ config: second, store, ec2, previous: applied });
      });

      await t.step("setup with an added NodeGroup: only additions", async () => {
        const before = await savedStateAddresses();
        const r = await podmin(setupArgs([workers, batch]), env);
        assert.equal(r.code, 0, r.stderr);
        assert.match(r.stderr, /NodeGroup batch: 1\/1 healthy/);
        const third = await savedConfig();
        await assertKeepsState(third, "setup with an added NodeGroup");
        const added = addresses(third).filter((a) => !before.includes(a));
        assert.ok(
          added.some((a) => /^aws_autoscaling_group\..*batch/.test(a)),
          `the new NodeGroup's ASG is added: ${added.join(", ")}`,
        );
        assert.deepEqual(third.resource.aws_vpc.main, first!.resource.aws_vpc.main);
        applied = await simulateApply({ config: third, store, ec2, previous: applied });
      });

      await t.step(
        "a killed apply leaves its lock: named by setup and teardown, released by teardown --force-unlock",
        async () => {
          const killed = await podmin(setupArgs([workers, batch]), {
            ...env,
            PODMIN_TOFU_KILL: "apply",
          });
          assert.notEqual(killed.code, 0, "the killed apply fails setup");
          assert.match(killed.stderr, /apply failed/);
          const lock = await getIfExists(store, INFRA_STATE_LOCK);
          assert.ok(lock, `the killed apply left ${INFRA_STATE_LOCK}`);
          const lockId = JSON.parse(new TextDecoder().decode(lock.body)).ID as string;
          assert.match(lockId, /^[0-9a-f-]{36}$/);
          const lockUrl = `s3://${bucket}/infra/terraform\\.tfstate\\.tflock`;

          const again = await podmin(setupArgs([workers, batch]), env);
          assert.equal(again.code, 1);
          assert.match(
            again.stderr,
            new RegExp(
              `the cluster's OpenTofu state is locked: ${lockUrl} \\(lock ID ${lockId}, OperationTypeApply by \\S+ \\(OpenTofu 1\\.10\\.10\\) since \\S+\\)`,
            ),
          );
          assert.match(
            again.stderr,
            new RegExp(
              `hint: .*release it: tofu -chdir=${workDir} init && tofu -chdir=${workDir} force-unlock -force ${lockId}, then run setup again`,
            ),
          );

          const common = ["--bucket", `s3://${bucket}`, "teardown", "--cluster", "rerun", "--yes"];
          const calls = async () =>
            (await Deno.readTextFile(`${tmp}/tofu.jsonl`)).trim().split("\n");
          const before = (await calls()).length;
          const refused = await podmin([...common, "--work-dir", workDir], env);
          assert.equal(refused.code, 1, refused.stderr);
          assert.match(
            refused.stderr,
            new RegExp(`state is locked: ${lockUrl} \\(lock ID ${lockId}`),
          );
          assert.match(
            refused.stderr,
            new RegExp(
              `release it: podmin --bucket s3://${bucket} teardown --cluster rerun --force-unlock ${lockId} \\(or: tofu -chdir=${workDir} force-unlock -force ${lockId}, then run teardown again\\)`,
            ),
          );
          assert.equal((await calls()).length, before, "no tofu ran against the locked state");
          assert.ok(await getIfExists(store, INFRA_STATE_LOCK), "the lock is kept");

          const wrong = await podmin(
            [...common, "--work-dir", workDir, "--force-unlock", "not-the-lock"],
            env,
          );
          assert.equal(wrong.code, 2, wrong.stderr);
          assert.match(
            wrong.stderr,
            new RegExp(`--force-unlock not-the-lock: the lock is .*${lockId}`),
          );
          assert.ok(await getIfExists(store, INFRA_STATE_LOCK), "a wrong ID releases nothing");

          const down = await podmin(
            [...common, "--work-dir", workDir, "--force-unlock", lockId],
            env,
          );
          assert.equal(down.code, 0, down.stderr);
          assert.match(
            down.stderr,
            new RegExp(`released the state lock ${lockUrl} \\(lock ID ${lockId}`),
          );
          assert.match(down.stdout, /cluster rerun: infrastructure removed/);
          assert.equal(await getIfExists(store, INFRA_STATE_LOCK), undefined, "the lock is gone");
          const ran = (await calls()).slice(before).map((l) => JSON.parse(l).args[0]);
          assert.deepEqual(ran, ["init", "destroy"]);
        },
      );
    } finally {
      await site.close();
      upstream?.kill("SIGTERM");
      await upstream?.status;
      await Deno.remove(tmp, { recursive: true });
    }
  },
);

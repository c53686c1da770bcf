/**
 * `podmin setup` end to end against moto (S3, SSM, EC2, Auto Scaling), a
 * local download site for pinned dependencies, a real upstream registry for
 * the sandbox image, and the tofu process boundary recorded by
 * tests/support/tofu_recorder.sh. ASGs are pre-created in moto under the
 * names the generated configuration gives them (what `tofu apply` would do).
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
  GetBucketLifecycleConfigurationCommand,
  GetPublicAccessBlockCommand,
  HeadBucketCommand,
} from "@aws-sdk/client-s3";
import { GetParameterCommand, SSMClient } from "@aws-sdk/client-ssm";
import {
  DEPENDENCY_MANIFEST,
  DEPLOYMENT_INDEX,
  imageTagKey,
  INFRA_CONFIG,
} from "../../core/bucket/bucket_layout.ts";
import { parseDependencyManifest } from "../../core/bucket/dependency_manifest.ts";
import { getIfExists } from "../../core/store/object_store.ts";
import { S3Store } from "../../core/store/s3_store.ts";
import { s3AdminClient } from "../../cli/setup/s3_admin.ts";
import { writeOciLayout } from "../support/oci_image.ts";
import { serveFiles } from "../support/file_server.ts";
import { freePort, moto } from "../support/moto.ts";
import { podmin, waitFor } from "../support/programs.ts";
import { run } from "../support/registry.ts";
import { testWith } from "../support/requirements.ts";
import { awsProviderSchema } from "../support/provider_schema.ts";
import { checkProviderSchema } from "../support/provider_schema_check.ts";

const sha = (b: Uint8Array) => createHash("sha256").update(b).digest("hex");
const recorder = new URL("../support/tofu_recorder.sh", import.meta.url).pathname;

function randomBytes(n: number): Uint8Array {
  const out = new Uint8Array(n);
  for (let off = 0; off < n; off += 65536) {
    crypto.getRandomValues(out.subarray(off, Math.min(n, off + 65536)));
  }
  return out;
}

testWith(
  "setup [moto]: publishes, mirrors, creates CAs, saves the config before tofu; re-runs upload nothing; one change uploads one file",
  {
    tools: ["distribution-registry", "skopeo", "jq"],
  },
  async (t) => {
    const m = await moto();
    await m.reset();
    const tmp = await Deno.makeTempDir({ prefix: "podmin-setup-" });
    let upstream: Deno.ChildProcess | undefined;
    const files = new Map<string, Uint8Array>();
    for (const n of ["containerd", "runc", "cni-plugins", "crictl", "kubelet", "coredns"]) {
      files.set(
        n,
        randomBytes(300_000),
      );
    }
    const site = serveFiles(files);
    try {
      // An upstream registry holding the sandbox image.
      const port = await freePort();
      await Deno.writeTextFile(
        path.join(tmp, "registry.yml"),
        `version: 0.1\nlog: {level: error}\nstorage: {filesystem: {rootdirectory: ${tmp}/registry}}\nhttp: {addr: 127.0.0.1:${port}}\n`,
      );
      upstream = new Deno.Command("distribution-registry", {
        args: ["serve", path.join(tmp, "registry.yml")],
        stdout: "null",
        stderr: "null",
      })
        .spawn();
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

      const catalog = (changed = false) => ({
        dependencies: [...files].map(([name, bytes]) => ({
          name,
          version: changed && name === "runc" ? "1.3.4" : "1.0.0",
          arch: "amd64",
          url: site.url(name),
          sha256: sha(bytes),
        })),
      });
      await Deno.writeTextFile(`${tmp}/catalog.json`, JSON.stringify(catalog()));
      await Deno.writeFile(`${tmp}/agent-amd64`, randomBytes(100_000));

      const asg = new AutoScalingClient({ region: "us-east-1" });
      await asg.send(
        new CreateLaunchConfigurationCommand({
          LaunchConfigurationName: "lc",
          ImageId: "ami-12c6146b",
          InstanceType: "m7i.large",
        }),
      );
      await asg.send(
        new CreateAutoScalingGroupCommand({
          AutoScalingGroupName: "podmin-prod-ng-workers",
          LaunchConfigurationName: "lc",
          MinSize: 2,
          MaxSize: 2,
          DesiredCapacity: 2,
          AvailabilityZones: ["us-east-1a"],
        }),
      );

      const bucket = `podmin-setup-${Date.now().toString(36)}`;
      const env = {
        PODMIN_TOFU: recorder,
        PODMIN_TOFU_LOG: `${tmp}/tofu.jsonl`,
        PODMIN_CACHE_DIR: `${tmp}/cache`,
        PODMIN_HOME: `${tmp}/home`,
      };
      const args = [
        "--bucket",
        `s3://${bucket}`,
        "setup",
        "--yes",
        "--cluster",
        "prod",
        "--region",
        "us-east-1",
        "--vpc-cidr",
        "10.0.0.0/16",
        "--nodegroup",
        "workers,size=2,instance-type=m7i.large,zone=a",
        "--dependency-catalog",
        `${tmp}/catalog.json`,
        "--agent-binary",
        `amd64=${tmp}/agent-amd64`,
        "--sandbox-image",
        `127.0.0.1:${port}/pause:3.10`,
        "--mirror-plain-http",
      ];
      const store = new S3Store({ bucket, region: "us-east-1" });

      let config: Uint8Array = new Uint8Array();
      let userData1 = "";
      await t.step(
        "first setup: publishes, mirrors, creates CAs, saves the config before tofu",
        async () => {
          const first = await podmin(args, env);
          assert.equal(first.code, 0, first.stderr);
          assert.match(first.stdout, /cluster prod is set up/);
          assert.match(first.stderr, /dependencies: 8 file\(s\) uploaded/);
          assert.match(first.stderr, /NodeGroup workers: 2\/2 healthy/);
          const manifest = parseDependencyManifest(
            (await getIfExists(store, DEPENDENCY_MANIFEST))!.body,
          );
          assert.deepEqual(
            manifest.architectures.amd64!.map((e) => e.name),
            [
              "cni-plugins",
              "containerd",
              "coredns",
              "crictl",
              "kubelet",
              "podmin-agent",
              "runc",
              "vmconfig",
            ],
          );
          assert.equal(manifest.architectures.arm64, undefined, "only the architectures in use");
          assert.ok(
            await getIfExists(
              store,
              imageTagKey({ root: "mirror", registry: `127.0.0.1_${port}`, name: "pause" }, "3.10"),
            ),
          );
          assert.ok(await getIfExists(store, DEPLOYMENT_INDEX), "empty indexes created");
          const rules = await s3AdminClient(store).send(
            new GetBucketLifecycleConfigurationCommand({ Bucket: bucket }),
          );
          assert.equal(rules.Rules?.[0]?.AbortIncompleteMultipartUpload?.DaysAfterInitiation, 1);
          const pab = await s3AdminClient(store).send(
            new GetPublicAccessBlockCommand({ Bucket: bucket }),
          );
          assert.equal(pab.PublicAccessBlockConfiguration?.BlockPublicPolicy, true);
          const ssm = new SSMClient({ region: "us-east-1" });
          const caKey = (await ssm.send(
            new GetParameterCommand({
              Name: "/prod/_system/workload-ca-key",
              WithDecryption: true,
            }),
          )).Parameter!;
          assert.equal(caKey.Type, "SecureString");
          config = (await getIfExists(store, INFRA_CONFIG))!.body;
          assert.deepEqual(
            await Deno.readFile(`${tmp}/home/prod/main.tf.json`),
            config,
            "saved locally and in the bucket",
          );
          const tofu = (await Deno.readTextFile(`${tmp}/tofu.jsonl`)).trim().split("\n").map((l) =>
            JSON.parse(l)
          );
          assert.deepEqual(tofu.map((t) => t.args[0]), ["init", "apply"]);
          assert.equal(tofu[1].cwd, `${tmp}/home/prod`);
          assert.equal(tofu[1].env.AWS_REGION, "us-east-1");
          const parsed = JSON.parse(new TextDecoder().decode(config));
          assert.equal(parsed.terraform.backend.s3.bucket, bucket);
          assert.equal(parsed.terraform.backend.s3.key, "infra/terraform.tfstate");
          assert.ok(
            !new TextDecoder().decode(config).includes(caKey.Value!.split("\n")[1]),
            "no CA key in the configuration",
          );
          const lt = parsed.resource.aws_launch_template;
          userData1 = JSON.stringify(lt);
          // No --ami: the AMI is Debian's, looked up in the region's public SSM parameter.
          assert.deepEqual(
            Object.values(lt).map((t) => (t as { image_id: string }).image_id),
            ["ami-0deb120000000a64e"],
          );
        },
      );

      await t.step(
        "identical re-run: zero bytes uploaded, manifest untouched, same configuration",
        async () => {
          const manifestEtag = (await store.head(DEPENDENCY_MANIFEST)).etag;
          const second = await podmin(args, env);
          assert.equal(second.code, 0, second.stderr);
          assert.match(
            second.stderr,
            /dependencies: 0 file\(s\) uploaded \(0 B\), manifest unchanged/,
          );
          assert.match(second.stderr, /sandbox image .* already mirrored/);
          assert.equal((await store.head(DEPENDENCY_MANIFEST)).etag, manifestEtag);
          assert.deepEqual((await getIfExists(store, INFRA_CONFIG))!.body, config);
        },
      );

      await t.step(
        "one dependency changes: one upload, new user-data, so a new launch template (rolling refresh)",
        async () => {
          files.set("runc", randomBytes(280_000));
          await Deno.writeTextFile(`${tmp}/catalog.json`, JSON.stringify(catalog(true)));
          const third = await podmin(args, env);
          assert.equal(third.code, 0, third.stderr);
          assert.match(third.stderr, /dependencies: 1 file\(s\) uploaded/);
          const config3 = JSON.parse(
            new TextDecoder().decode((await getIfExists(store, INFRA_CONFIG))!.body),
          );
          assert.notEqual(
            JSON.stringify(config3.resource.aws_launch_template),
            userData1,
            "the launch template changed",
          );
          const group = Object.values(config3.resource.aws_autoscaling_group)[0] as Record<
            string,
            unknown
          >;
          assert.ok(group.instance_refresh, "the ASG rolls on launch-template change");
        },
      );

      await t.step(
        "a setup killed mid-download leaves the published manifest as it was",
        async () => {
          const before = (await store.head(DEPENDENCY_MANIFEST)).etag;
          files.set("kubelet", randomBytes(30_000_000));
          await Deno.writeTextFile(`${tmp}/catalog.json`, JSON.stringify(catalog(true)));
          // The site sends 12 MB of kubelet and then holds the rest: setup cannot get past it.
          const stalled = site.stallNext("kubelet", 12_000_000);
          const child = new Deno.Command(Deno.execPath(), {
            args: ["run", "-A", new URL("../../cli/main.ts", import.meta.url).pathname, ...args],
            env,
            stdout: "null",
            stderr: "piped",
          }).spawn();
          const reader = child.stderr.pipeThrough(new TextDecoderStream()).getReader();
          let seen = "";
          let ended = false;
          // setup's progress line for kubelet: it has received bytes of the stalled download.
          while (!/download kubelet [^:]*: [0-9.]+ [KM]iB \//.test(seen)) {
            const { value, done } = await reader.read();
            if (done) {
              ended = true;
              break;
            }
            seen += value;
          }
          assert.ok(!ended, `setup ended before downloading kubelet:\n${seen}`);
          await stalled;
          child.kill("SIGKILL");
          const status = await child.status;
          await reader.cancel().catch(() => {});
          assert.equal(status.signal, "SIGKILL", "setup died of the kill, mid-download");
          assert.equal(
            (await store.head(DEPENDENCY_MANIFEST)).etag,
            before,
            "manifest intact after a killed setup",
          );
        },
      );

      await t.step(
        "no --ami where the region has no public AMI parameter: refused before anything is written",
        async () => {
          const elsewhere = args.map((a) => a === "us-east-1" ? "eu-west-3" : a);
          elsewhere[1] = `s3://${bucket}-eu`;
          const r = await podmin(elsewhere, env);
          assert.equal(r.code, 1, r.stderr);
          assert.match(
            r.stderr,
            /cannot resolve the Debian 12 amd64 AMI \(\/aws\/service\/debian\/release\/12\/latest\/amd64\): .*\nhint: pass --ami amd64=ami-/s,
          );
          await assert.rejects(
            s3AdminClient(store).send(new HeadBucketCommand({ Bucket: `${bucket}-eu` })),
          );
        },
      );

      await t.step("bad operator input", async () => {
        const bad = await podmin([
          "setup",
          "--cluster",
          "prod",
          "--vpc-cidr",
          "10.0.0.0/16",
          "--nodegroup",
          "w,disk-size=4",
        ], env);
        assert.equal(bad.code, 2);
        assert.match(bad.stderr, /disk-size must be 8-16384 \(GiB\), got 4/);
      });
    } finally {
      await site.close();
      upstream?.kill("SIGTERM");
      await upstream?.status;
      await Deno.remove(tmp, { recursive: true });
    }
  },
);

Deno.test("setup --dry-run [moto]: writes config, user-data and plan; touches nothing in AWS", async () => {
  const m = await moto();
  await m.reset();
  const tmp = await Deno.makeTempDir({ prefix: "podmin-dry-" });
  try {
    const r = await podmin([
      "setup",
      "--cluster",
      "demo",
      "--region",
      "us-east-1",
      "--vpc-cidr",
      "10.0.0.0/16",
      "--nat64",
      "--nodegroup",
      "default",
      "--nodegroup",
      "workers,size=3,disk-size=100,instance-type=c8g.large,zone=b,nat64=t4g.small",
      "--dry-run",
      "--out",
      tmp,
    ], { PODMIN_CACHE_DIR: `${tmp}/cache` });
    assert.equal(r.code, 0, r.stderr);
    const config = JSON.parse(await Deno.readTextFile(`${tmp}/main.tf.json`));
    assert.equal(
      Object.keys(config.resource.aws_autoscaling_group).length,
      2 + 2,
      "2 NodeGroups + shared and dedicated NAT64",
    );
    // The saved bytes, as tofu would read them, against the AWS provider's schema.
    checkProviderSchema({ config, schema: await awsProviderSchema() });
    assert.equal(config.resource.aws_subnet.nodes_zone_b, undefined, "no NodeGroup uses it");
    for (const f of ["default.sh", "workers.sh", "nat64.sh"]) {
      const text = await Deno.readTextFile(`${tmp}/user-data/${f}`);
      assert.ok(new TextEncoder().encode(text).length <= 16384, `${f} fits EC2's limit`);
      assert.match(text, /^# PREVIEW/m);
    }
    const plan = JSON.parse(await Deno.readTextFile(`${tmp}/dependencies.json`));
    assert.ok(
      plan.dependencies.some((d: { name: string; arch: string }) =>
        d.name === "kubelet" && d.arch === "arm64"
      ),
    );
    assert.deepEqual(plan.missing, [], "no compiled agent: the runtime-plus-bundle distribution");
    // Nothing was created in AWS.
    const s3 = await fetch(`${m.endpoint}/`);
    assert.doesNotMatch(await s3.text(), /<Bucket>/);
    const ssm = new SSMClient({ region: "us-east-1" });
    await assert.rejects(
      ssm.send(new GetParameterCommand({ Name: "/demo/_system/workload-ca-key" })),
      /ParameterNotFound/,
    );
  } finally {
    await Deno.remove(tmp, { recursive: true });
  }
});

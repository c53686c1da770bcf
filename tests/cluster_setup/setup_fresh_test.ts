/**
 * A real `podmin setup` from a fresh machine, end to end on moto: an empty dependency cache, an
 * empty bucket, no compiled agent (so the runtime-plus-bundle distribution, its bundle built by
 * setup itself), local HTTP stand-ins for every download (pinned test artifacts with their own
 * digests; the runtime as an npm-style tarball pinned by integrity and member sha256), a real
 * upstream registry for the sandbox image, CAs in moto's SSM, the configuration saved before the
 * recorded tofu boundary, capacity waits against moto's Auto Scaling; then a second identical
 * run uploads 0 bytes, and teardown and destroy finish the cluster.
 */

import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import * as path from "node:path";
import { gzipSync } from "node:zlib";
import {
  AutoScalingClient,
  CreateAutoScalingGroupCommand,
  CreateLaunchConfigurationCommand,
} from "@aws-sdk/client-auto-scaling";
import { HeadBucketCommand } from "@aws-sdk/client-s3";
import { GetParameterCommand, SSMClient } from "@aws-sdk/client-ssm";
import { DEPENDENCY_MANIFEST, imageTagKey, INFRA_CONFIG } from "../../core/bucket/bucket_layout.ts";
import { parseDependencyManifest } from "../../core/bucket/dependency_manifest.ts";
import { getIfExists } from "../../core/store/object_store.ts";
import { S3Store } from "../../core/store/s3_store.ts";
import { s3AdminClient } from "../../cli/setup/s3_admin.ts";
import { buildTar } from "../../vmconfig/archive.ts";
import { writeOciLayout } from "../support/oci_image.ts";
import { serveFiles } from "../support/file_server.ts";
import { freePort, moto } from "../support/moto.ts";
import { podmin, waitFor } from "../support/programs.ts";
import { run } from "../support/registry.ts";
import { testWith } from "../support/requirements.ts";

const sha = (b: Uint8Array) => createHash("sha256").update(b).digest("hex");
const recorder = new URL("../support/tofu_recorder.sh", import.meta.url).pathname;

function randomBytes(n: number): Uint8Array {
  const out = new Uint8Array(n);
  for (let off = 0; off < n; off += 65536) {
    crypto.getRandomValues(out.subarray(off, Math.min(n, off + 65536)));
  }
  return out;
}

async function tofuCalls(file: string): Promise<{ cwd: string; args: string[] }[]> {
  return (await Deno.readTextFile(file)).trim().split("\n").map((l) => JSON.parse(l));
}

testWith(
  "setup from a fresh machine [moto]: runtime-plus-bundle, everything published, 0 bytes on re-run, teardown and destroy",
  { tools: ["distribution-registry", "skopeo", "jq", "tar"] },
  async () => {
    const m = await moto();
    await m.reset();
    const tmp = await Deno.makeTempDir({ prefix: "podmin-fresh-" });
    let upstream: Deno.ChildProcess | undefined;
    const files = new Map<string, Uint8Array>();
    for (const n of ["containerd", "runc", "cni-plugins", "crictl", "kubelet", "coredns"]) {
      files.set(n, randomBytes(200_000));
    }
    // The runtime stand-in: an npm-style tarball (package/deno), pinned like the real one.
    const runtime = randomBytes(500_000);
    const runtimeTgz = new Uint8Array(gzipSync(buildTar([["package/deno", 0o755, runtime]])));
    files.set("deno.tgz", runtimeTgz);
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
      const catalog = {
        dependencies: [
          ...["containerd", "runc", "cni-plugins", "crictl", "kubelet", "coredns"].map((name) => ({
            name,
            version: "1.0.0",
            arch: "amd64",
            url: site.url(name),
            sha256: sha(files.get(name)!),
          })),
          {
            name: "deno",
            version: "2.9.6",
            arch: "amd64",
            url: site.url("deno.tgz"),
            sha256: sha(runtime),
            archive: {
              integrity: `sha512-${createHash("sha512").update(runtimeTgz).digest("base64")}`,
              member: "package/deno",
            },
          },
        ],
      };
      await Deno.writeTextFile(`${tmp}/catalog.json`, JSON.stringify(catalog));

      // What `tofu apply` would create: the NodeGroup's ASG, under its generated name.
      const asg = new AutoScalingClient({ region: "us-east-1" });
      await asg.send(
        new CreateLaunchConfigurationCommand({
          LaunchConfigurationName: "lc-fresh",
          ImageId: "ami-12c6146b",
          InstanceType: "m7i.large",
        }),
      );
      await asg.send(
        new CreateAutoScalingGroupCommand({
          AutoScalingGroupName: "podmin-fresh-ng-workers",
          LaunchConfigurationName: "lc-fresh",
          MinSize: 1,
          MaxSize: 1,
          DesiredCapacity: 1,
          AvailabilityZones: ["us-east-1a"],
        }),
      );

      const bucket = `podmin-fresh-${Date.now().toString(36)}`;
      const env = {
        PODMIN_TOFU: recorder,
        PODMIN_TOFU_LOG: `${tmp}/tofu.jsonl`,
        PODMIN_CACHE_DIR: `${tmp}/cache`,
        PODMIN_HOME: `${tmp}/home`,
      };
      const common = ["--bucket", `s3://${bucket}`];
      const args = [
        ...common,
        "setup",
        "--yes",
        "--cluster",
        "fresh",
        "--region",
        "us-east-1",
        "--vpc-cidr",
        "10.20.0.0/16",
        "--nodegroup",
        "workers,size=1,instance-type=m7i.large,zone=a",
        "--dependency-catalog",
        `${tmp}/catalog.json`,
        "--dist",
        `${tmp}/dist`, // empty: no compiled agent, no bundle yet
        "--ami",
        "amd64=ami-12345678",
        "--sandbox-image",
        `127.0.0.1:${port}/pause:3.10`,
        "--mirror-plain-http",
      ];
      const store = new S3Store({ bucket, region: "us-east-1" });

      const first = await podmin(args, env);
      assert.equal(first.code, 0, first.stderr);
      assert.match(first.stdout, /cluster fresh is set up: 1 NodeGroup\(s\) healthy/);
      assert.match(first.stderr, /building the agent bundle into .*\/dist/);
      assert.match(
        first.stderr,
        /podmin-agent amd64: runtime-plus-bundle \(no compiled binary\): deno 2\.9\.6 \+ .*\/dist\/podmin-agent\.js/,
      );
      assert.match(first.stderr, /dependencies: 9 file\(s\) uploaded/);
      assert.match(first.stderr, /NodeGroup workers: 1\/1 healthy/);
      const manifest = parseDependencyManifest(
        (await getIfExists(store, DEPENDENCY_MANIFEST))!.body,
      );
      const entries = manifest.architectures.amd64!;
      assert.deepEqual(entries.map((e) => e.name).sort(), [
        "cni-plugins",
        "containerd",
        "coredns",
        "crictl",
        "deno",
        "kubelet",
        "podmin-agent-bundle",
        "runc",
        "vmconfig",
      ]);
      const bundle = await Deno.readFile(`${tmp}/dist/podmin-agent.js`);
      const byName = new Map(entries.map((e) => [e.name, e]));
      assert.equal(byName.get("deno")!.sha256, sha(runtime), "the extracted runtime is published");
      assert.equal(byName.get("deno")!.size, runtime.byteLength);
      assert.equal(byName.get("podmin-agent-bundle")!.sha256, sha(bundle));
      for (const e of entries) {
        const stored = await getIfExists(store, e.key);
        assert.ok(stored, `${e.name}: the manifest references a stored blob`);
        assert.equal(sha(stored.body), e.sha256, e.name);
      }
      assert.ok(
        await getIfExists(
          store,
          imageTagKey({ root: "mirror", registry: `127.0.0.1_${port}`, name: "pause" }, "3.10"),
        ),
        "sandbox image mirrored",
      );
      const ssm = new SSMClient({ region: "us-east-1" });
      for (const name of ["workload-ca-key", "cluster-ca"]) {
        const p = await ssm.send(new GetParameterCommand({ Name: `/fresh/_system/${name}` }));
        assert.equal(p.Parameter?.Type, "SecureString", name);
      }
      const config = (await getIfExists(store, INFRA_CONFIG))!.body;
      assert.deepEqual(await Deno.readFile(`${tmp}/home/fresh/main.tf.json`), config);
      const parsed = JSON.parse(new TextDecoder().decode(config));
      const lt = Object.values(parsed.resource.aws_launch_template)[0] as { user_data: string };
      const userData = new TextDecoder().decode(
        Uint8Array.from(atob(lt.user_data), (c) => c.charCodeAt(0)),
      );
      assert.match(
        userData,
        new RegExp(`^deno 2\\.9\\.6 ${sha(runtime)} ${runtime.byteLength} `, "m"),
      );
      assert.match(userData, new RegExp(`^podmin-agent-bundle \\S+ ${sha(bundle)} `, "m"));
      assert.doesNotMatch(userData, /^podmin-agent /m, "no compiled agent pinned");
      assert.doesNotMatch(userData, /PREVIEW/);
      assert.deepEqual((await tofuCalls(`${tmp}/tofu.jsonl`)).map((c) => c.args[0]), [
        "init",
        "apply",
      ]);
      const downloads = new Map(site.hits);

      // A second identical run: nothing downloaded, 0 bytes uploaded, the manifest untouched.
      const etag = (await store.head(DEPENDENCY_MANIFEST)).etag;
      const second = await podmin(args, env);
      assert.equal(second.code, 0, second.stderr);
      assert.match(second.stderr, /dependencies: 0 file\(s\) uploaded \(0 B\), manifest unchanged/);
      assert.doesNotMatch(second.stderr, /building the agent bundle/, "the bundle is reused");
      assert.match(second.stderr, /podmin-agent amd64: runtime-plus-bundle/);
      assert.equal((await store.head(DEPENDENCY_MANIFEST)).etag, etag);
      assert.deepEqual(site.hits, downloads, "no download on the second run");
      assert.deepEqual((await getIfExists(store, INFRA_CONFIG))!.body, config);

      // teardown keeps the bucket and the CAs; destroy removes them.
      const workDir = `${tmp}/home/fresh`;
      const down = await podmin(
        ["teardown", ...common, "--cluster", "fresh", "--work-dir", workDir, "--yes"],
        env,
      );
      assert.equal(down.code, 0, down.stderr);
      assert.deepEqual(
        (await tofuCalls(`${tmp}/tofu.jsonl`)).map((c) => c.args[0]).slice(-2),
        ["init", "destroy"],
      );
      await s3AdminClient(store).send(new HeadBucketCommand({ Bucket: bucket }));
      const gone = await podmin(
        ["destroy", ...common, "--cluster", "fresh", "--work-dir", workDir, "--yes"],
        env,
      );
      assert.equal(gone.code, 0, gone.stderr);
      await assert.rejects(s3AdminClient(store).send(new HeadBucketCommand({ Bucket: bucket })));
      await assert.rejects(
        ssm.send(new GetParameterCommand({ Name: "/fresh/_system/cluster-ca" })),
        /ParameterNotFound/,
      );
    } finally {
      await site.close();
      upstream?.kill("SIGTERM");
      await upstream?.status;
      await Deno.remove(tmp, { recursive: true });
    }
  },
);

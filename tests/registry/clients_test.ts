/**
 * The image store with real clients: `podmin push` from every source
 * transport, then skopeo and containerd pull through the agent's registry.
 */

import assert from "node:assert/strict";
import { createBucket } from "../../core/store/store_url.ts";
import { createHash } from "node:crypto";
import * as path from "node:path";
import { REGISTRY_HOSTNAME } from "../../registry/defaults.ts";
import { runGenerator } from "../../vmconfig/node_files.ts";
import { staticHello, writeOciLayout } from "../support/oci_image.ts";
import { freePort, moto } from "../support/moto.ts";
import { nodeAgentArgs, podmin, spawnAgent, waitFor } from "../support/programs.ts";
import { run, startRegistry } from "../support/registry.ts";
import { testWith } from "../support/requirements.ts";

const sha = (b: Uint8Array) => `sha256:${createHash("sha256").update(b).digest("hex")}`;

async function pushed(bucket: string, source: string, target: string): Promise<string> {
  const r = await podmin(["--bucket", bucket, "push", source, target]);
  assert.equal(r.code, 0, r.stderr);
  return r.stdout;
}

testWith(
  "registry [moto]: skopeo copies and inspects pushed images (single-arch, multi-arch, archives)",
  {
    tools: ["skopeo", "gcc"],
  },
  async () => {
    const m = await moto();
    await m.reset();
    const bucket = `s3://${await m.createBucket()}`;
    const tmp = await Deno.makeTempDir({ prefix: "podmin-skopeo-" });
    let registry: Awaited<ReturnType<typeof startRegistry>> | undefined;
    try {
      const hello = await staticHello("hello from podmin", tmp);
      const single = await writeOciLayout({
        dir: path.join(tmp, "single"),
        ref: "1.0",
        platforms: [{ arch: "amd64", files: { hello } }],
      });
      const multi = await writeOciLayout({
        dir: path.join(tmp, "multi"),
        ref: "2.0",
        platforms: [
          { arch: "amd64", files: { hello } },
          { arch: "arm64", files: { hello: new TextEncoder().encode("not really arm64") } },
        ],
      });
      const first = await pushed(bucket, `oci:${tmp}/single:1.0`, "apps/hello:1.0");
      assert.match(first, new RegExp(`digest: +${single.digest}`));
      assert.match(first, /uploaded: 2 blob\(s\)/);
      const again = await pushed(bucket, `oci:${tmp}/single:1.0`, "apps/hello:1.0");
      assert.match(
        again,
        /uploaded: 0 blob\(s\), 0 B; 2 already stored/,
        "a re-push uploads nothing",
      );
      await pushed(bucket, `oci:${tmp}/multi:2.0`, "apps/multi:2.0");

      registry = await startRegistry(bucket);
      const ref = (r: string) => `docker://${registry!.address}/${r}`;
      const tls = "--tls-verify=false";

      // Inspect by tag and by digest; the raw manifest hashes to the source digest.
      const raw = await run("skopeo", ["inspect", tls, "--raw", ref("apps/hello:1.0")]);
      assert.equal(sha(new TextEncoder().encode(raw)), single.digest);
      const byDigest = JSON.parse(
        await run("skopeo", ["inspect", tls, "--no-tags", ref(`apps/hello@${single.digest}`)]),
      );
      assert.equal(byDigest.Digest, single.digest);
      assert.equal(byDigest.Architecture, "amd64");

      // Copy single-arch and the multi-arch index to oci: and compare digests.
      await run("skopeo", [
        "copy",
        "--src-tls-verify=false",
        ref("apps/hello:1.0"),
        `oci:${tmp}/out1:x`,
      ]);
      const out1 = JSON.parse(await Deno.readTextFile(`${tmp}/out1/index.json`));
      assert.equal(out1.manifests[0].digest, single.digest);
      await run("skopeo", [
        "copy",
        "--all",
        "--src-tls-verify=false",
        ref("apps/multi:2.0"),
        `oci:${tmp}/out2:y`,
      ]);
      const out2 = JSON.parse(await Deno.readTextFile(`${tmp}/out2/index.json`));
      assert.equal(out2.manifests[0].digest, multi.digest);
      for (const d of multi.manifestDigests) {
        await Deno.stat(`${tmp}/out2/blobs/sha256/${d.slice(7)}`); // every platform's manifest arrived
      }

      // oci-archive and docker-archive sources, produced by skopeo itself.
      await run("skopeo", ["copy", `oci:${tmp}/single:1.0`, `oci-archive:${tmp}/single.tar:1.0`]);
      const fromArchive = await pushed(
        bucket,
        `oci-archive:${tmp}/single.tar:1.0`,
        "apps/from-archive:1",
      );
      assert.match(fromArchive, new RegExp(`digest: +${single.digest}`));
      assert.match(
        fromArchive,
        /uploaded: 0 blob\(s\)/,
        "blobs are shared across apps/ repositories",
      );
      await run("skopeo", [
        "copy",
        `oci:${tmp}/single:1.0`,
        `docker-archive:${tmp}/docker.tar:hello:1.0`,
      ]);
      await pushed(bucket, `docker-archive:${tmp}/docker.tar`, "apps/from-docker:1");
      const docker = JSON.parse(
        await run("skopeo", ["inspect", tls, "--no-tags", ref("apps/from-docker:1")]),
      );
      assert.equal(docker.Architecture, "amd64");
      await run("skopeo", [
        "copy",
        "--src-tls-verify=false",
        ref("apps/from-docker:1"),
        `oci:${tmp}/out3:z`,
      ]);

      // Bad operator input.
      const bad = await podmin(["--bucket", bucket, "push", `oci:${tmp}/single:nope`, "apps/x:1"]);
      assert.equal(bad.code, 2);
      assert.match(bad.stderr, /has no image named "nope"\nhint: references in the layout: 1.0/);
      const badTarget = await podmin([
        "--bucket",
        bucket,
        "push",
        `oci:${tmp}/single:1.0`,
        "mirror/x:1",
      ]);
      assert.equal(badTarget.code, 2);
    } finally {
      await registry?.stop();
      await Deno.remove(tmp, { recursive: true });
    }
  },
);

testWith("registry [moto]: containerd pulls apps/ through hosts.toml and runs the image", {
  root: true,
  tools: ["containerd", "ctr", "runc", "containerd-shim-runc-v2", "gcc"],
}, async () => {
  const m = await moto();
  await m.reset();
  const bucket = `s3://${await m.createBucket()}`;
  const tmp = await Deno.makeTempDir({ prefix: "podmin-containerd-" });
  let registry: Awaited<ReturnType<typeof startRegistry>> | undefined;
  let containerd: Deno.ChildProcess | undefined;
  const sock = path.join(tmp, "containerd.sock");
  try {
    const hello = await staticHello("hello from the podmin registry", tmp);
    await writeOciLayout({
      dir: path.join(tmp, "img"),
      ref: "1.0",
      platforms: [{ arch: "amd64", files: { hello } }],
    });
    await pushed(bucket, `oci:${tmp}/img:1.0`, "apps/hello:1.0");
    registry = await startRegistry(bucket);

    const certsDir = path.join(tmp, "certs.d");
    await Deno.mkdir(path.join(certsDir, REGISTRY_HOSTNAME), { recursive: true });
    await Deno.writeTextFile(
      path.join(certsDir, REGISTRY_HOSTNAME, "hosts.toml"),
      // The node's own generator (vmconfig) writes what containerd reads.
      await runGenerator({
        name: "gen_hosts_toml",
        args: [REGISTRY_HOSTNAME, ...registry.address.split(":")],
      }),
    );
    await Deno.writeTextFile(
      path.join(tmp, "config.toml"),
      `version = 2
root = "${tmp}/root"
state = "${tmp}/state"
disabled_plugins = ["io.containerd.grpc.v1.cri"]
[grpc]
  address = "${sock}"
`,
    );
    containerd = new Deno.Command("containerd", {
      args: ["--config", path.join(tmp, "config.toml")],
      stdout: "null",
      stderr: "null",
    }).spawn();
    const ctr = (...args: string[]) =>
      run("ctr", ["--address", sock, "--namespace", "podmin-test", ...args]);
    for (let i = 0; i < 100; i++) {
      try {
        await ctr("version");
        break;
      } catch {
        await new Promise((r) => setTimeout(r, 100));
      }
    }
    const image = `${REGISTRY_HOSTNAME}/apps/hello:1.0`;
    await ctr("images", "pull", "--hosts-dir", certsDir, "--snapshotter", "native", image);
    const out = await ctr(
      "run",
      "--rm",
      "--snapshotter",
      "native",
      image,
      `podmin-test-${Date.now()}`,
      "/hello",
    );
    assert.match(out, /hello from the podmin registry/);
  } finally {
    containerd?.kill("SIGTERM");
    await containerd?.status;
    await registry?.stop();
    await new Deno.Command("umount", { args: ["-R", `${tmp}/state`] }).output().catch(() => {});
    await Deno.remove(tmp, { recursive: true }).catch(() => {});
  }
});

Deno.test("registry [filesystem]: the agent's run hosts the registry on --registry-listen", async () => {
  const tmp = await Deno.makeTempDir({ prefix: "podmin-agent-registry-" });
  const port = await freePort();
  const bucket = `file://${tmp}/bucket`;
  const enc = new TextEncoder();
  const img = await writeOciLayout({
    dir: `${tmp}/img`,
    ref: "1",
    platforms: [{ arch: "amd64", files: { a: enc.encode("a") } }],
  });
  await createBucket(bucket);
  await pushed(bucket, `oci:${tmp}/img:1`, "apps/hosted:1");
  const child = spawnAgent([
    ...nodeAgentArgs({ bucket, nodeGroup: "workers", base: tmp }),
    "--registry-listen",
    `127.0.0.1:${port}`,
  ]);
  try {
    let res: Response | undefined;
    await waitFor("the hosted registry", async () => {
      try {
        res = await fetch(`http://127.0.0.1:${port}/v2/apps/hosted/manifests/1`);
        return true;
      } catch {
        return false;
      }
    });
    assert.equal(res!.status, 200);
    assert.equal(res!.headers.get("docker-content-digest"), img.digest);
    await res!.body?.cancel();
  } finally {
    child.kill("SIGTERM");
    await child.output();
    await Deno.remove(tmp, { recursive: true });
  }
});

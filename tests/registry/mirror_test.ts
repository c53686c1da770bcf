/**
 * `podmin mirror` against a real upstream registry (CNCF distribution, built
 * from the Go module proxy by tests/setup.sh) with basic auth, then pulled
 * back through the agent's registry with skopeo.
 */

import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import * as path from "node:path";
import { writeOciLayout } from "../support/oci_image.ts";
import { freePort, moto } from "../support/moto.ts";
import { podmin, waitFor } from "../support/programs.ts";
import { run, startRegistry } from "../support/registry.ts";
import { testWith } from "../support/requirements.ts";

testWith(
  "registry [moto]: mirror from an upstream with basic auth, platform selection and digest pins",
  {
    tools: ["distribution-registry", "skopeo", "htpasswd"],
  },
  async () => {
    const m = await moto();
    await m.reset();
    const bucket = `s3://${await m.createBucket()}`;
    const tmp = await Deno.makeTempDir({ prefix: "podmin-mirror-" });
    let upstream: Deno.ChildProcess | undefined;
    let registry: Awaited<ReturnType<typeof startRegistry>> | undefined;
    try {
      const port = await freePort();
      const host = `127.0.0.1:${port}`;
      const mirrored = `127.0.0.1_${port}`; // the port is written as _PORT in repository names
      await run("htpasswd", ["-Bbc", path.join(tmp, "htpasswd"), "mirror", "s3cret"]);
      await Deno.writeTextFile(
        path.join(tmp, "config.yml"),
        `version: 0.1
log: {level: error}
storage: {filesystem: {rootdirectory: ${tmp}/storage}}
http: {addr: ${host}}
auth: {htpasswd: {realm: podmin-test, path: ${tmp}/htpasswd}}
`,
      );
      upstream = new Deno.Command("distribution-registry", {
        args: ["serve", path.join(tmp, "config.yml")],
        stdout: "null",
        stderr: "null",
      }).spawn();
      await waitFor("the upstream registry", async () => {
        try {
          const res = await fetch(`http://${host}/v2/`);
          await res.body?.cancel();
          return res.status === 401;
        } catch {
          return false;
        }
      });

      const enc = new TextEncoder();
      const multi = await writeOciLayout({
        dir: path.join(tmp, "multi"),
        ref: "2.0",
        platforms: [
          { arch: "amd64", files: { a: enc.encode("amd64 layer") } },
          { arch: "arm64", files: { b: enc.encode("arm64 layer") } },
        ],
      });
      await run("skopeo", [
        "copy",
        "--all",
        "--dest-tls-verify=false",
        "--dest-creds",
        "mirror:s3cret",
        `oci:${tmp}/multi:2.0`,
        `docker://${host}/team/app:2.0`,
      ]);

      // Without credentials: a clear error.
      const denied = await podmin([
        "--bucket",
        bucket,
        "mirror",
        "--plain-http",
        `${host}/team/app:2.0`,
      ]);
      assert.equal(denied.code, 1);
      assert.match(denied.stderr, /needs credentials\nhint: pass --creds USER:PASSWORD/);

      const ok = await podmin([
        "--bucket",
        bucket,
        "mirror",
        "--plain-http",
        "--creds",
        "mirror:s3cret",
        "--arch",
        "amd64",
        `${host}/team/app:2.0`,
      ]);
      assert.equal(ok.code, 0, ok.stderr);
      assert.match(ok.stdout, new RegExp(`mirror/${mirrored}/team/app:2.0`));
      assert.match(ok.stdout, /platforms: linux\/amd64$/m);

      registry = await startRegistry(bucket);
      const ref = (r: string) => `docker://${registry!.address}/mirror/${mirrored}/team/${r}`;
      const raw = await run("skopeo", ["inspect", "--tls-verify=false", "--raw", ref("app:2.0")]);
      const digest = `sha256:${createHash("sha256").update(raw).digest("hex")}`;
      assert.equal(digest, multi.digest, "the index is stored unchanged");
      const [amd64, arm64] = multi.manifestDigests;
      const inspected = JSON.parse(
        await run("skopeo", [
          "inspect",
          "--tls-verify=false",
          "--no-tags",
          "--override-arch",
          "amd64",
          ref("app:2.0"),
        ]),
      );
      assert.equal(inspected.Architecture, "amd64");
      const missing = await fetch(
        `http://${registry.address}/v2/mirror/${mirrored}/team/app/manifests/${arm64}`,
      );
      assert.equal(missing.status, 404, "arm64 was not selected");
      await missing.body?.cancel();

      // A digest-pinned reference mirrors the exact manifest, with no tag.
      const pinned = await podmin([
        "--bucket",
        bucket,
        "mirror",
        "--plain-http",
        "--creds",
        "mirror:s3cret",
        `${host}/team/app@${amd64}`,
      ]);
      assert.equal(pinned.code, 0, pinned.stderr);
      assert.match(pinned.stdout, new RegExp(`app@${amd64}`));
      assert.match(
        pinned.stdout,
        /uploaded: 0 blob\(s\)/,
        "blobs already mirrored are not uploaded again",
      );
    } finally {
      upstream?.kill("SIGTERM");
      await upstream?.status;
      await registry?.stop();
      await Deno.remove(tmp, { recursive: true });
    }
  },
);

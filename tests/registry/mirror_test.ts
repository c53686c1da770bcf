/**
 * `podmin mirror` against a real upstream registry (CNCF distribution, built
 * from the Go module proxy by tests/setup.sh) with basic auth, and with bearer
 * tokens from a token service the test owns (tests/support/token_server.ts),
 * then pulled back through the agent's registry.
 */

import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import * as path from "node:path";
import { writeOciLayout } from "../support/oci_image.ts";
import { freePort, moto } from "../support/moto.ts";
import { podmin, waitFor } from "../support/programs.ts";
import { run, startRegistry } from "../support/registry.ts";
import { testWith } from "../support/requirements.ts";
import { startTokenServer, type TokenServer } from "../support/token_server.ts";

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

testWith(
  "registry [moto]: mirror from an upstream with bearer-token auth: the token service checks the credentials, the registry checks the token",
  {
    tools: ["distribution-registry", "skopeo", "openssl"],
  },
  async () => {
    const m = await moto();
    await m.reset();
    const bucket = `s3://${await m.createBucket()}`;
    const tmp = await Deno.makeTempDir({ prefix: "podmin-mirror-token-" });
    let upstream: Deno.ChildProcess | undefined;
    let tokens: TokenServer | undefined;
    let registry: Awaited<ReturnType<typeof startRegistry>> | undefined;
    try {
      const port = await freePort();
      const host = `127.0.0.1:${port}`;
      const mirrored = `127.0.0.1_${port}`;
      const service = "podmin-test-upstream";
      tokens = await startTokenServer({
        dir: tmp,
        user: "mirror",
        password: "t0ken-s3cret",
        audience: service,
      });
      await Deno.writeTextFile(
        path.join(tmp, "config.yml"),
        `version: 0.1
log: {level: error}
storage: {filesystem: {rootdirectory: ${tmp}/storage}}
http: {addr: ${host}}
auth:
  token:
    realm: ${tokens.realm}
    service: ${service}
    issuer: ${tokens.issuer}
    rootcertbundle: ${tokens.certFile}
`,
      );
      upstream = new Deno.Command("distribution-registry", {
        args: ["serve", path.join(tmp, "config.yml")],
        stdout: "null",
        stderr: "null",
      }).spawn();
      let challenge = "";
      await waitFor("the upstream registry", async () => {
        try {
          const res = await fetch(`http://${host}/v2/`);
          await res.body?.cancel();
          challenge = res.headers.get("www-authenticate") ?? "";
          return res.status === 401;
        } catch {
          return false;
        }
      });
      assert.match(challenge, new RegExp(`^Bearer realm="${tokens.realm}",service="${service}"`));

      const image = await writeOciLayout({
        dir: path.join(tmp, "img"),
        ref: "1.0",
        platforms: [{ arch: "amd64", files: { a: new TextEncoder().encode("token layer") } }],
      });
      // skopeo, a real client, pushes through the same token flow.
      await run("skopeo", [
        "copy",
        "--dest-tls-verify=false",
        "--dest-creds",
        "mirror:t0ken-s3cret",
        `oci:${tmp}/img:1.0`,
        `docker://${host}/team/app:1.0`,
      ]);
      assert.ok(
        tokens.requests.some((r) =>
          r.status === 200 && r.scopes.some((s) => /^repository:team\/app:.*push/.test(s))
        ),
        `skopeo got a push token: ${JSON.stringify(tokens.requests)}`,
      );

      // Wrong credentials: the token service refuses, and mirror says where to look.
      const seen = tokens.requests.length;
      const refused = await podmin([
        "--bucket",
        bucket,
        "mirror",
        "--plain-http",
        "--creds",
        "mirror:wrong",
        `${host}/team/app:1.0`,
      ]);
      assert.equal(refused.code, 1);
      assert.match(refused.stderr, /token service answered 401\nhint: check --creds/);
      assert.deepEqual(
        tokens.requests.slice(seen).map((r) => [r.user, r.status]),
        [["mirror", 401]],
      );

      // A token obtained elsewhere is not accepted by the registry without the service's signature.
      const forged = await fetch(`http://${host}/v2/team/app/manifests/1.0`, {
        headers: { Authorization: "Bearer eyJhbGciOiJub25lIn0.e30." },
      });
      await forged.body?.cancel();
      assert.equal(forged.status, 401);

      const seenBefore = tokens.requests.length;
      const ok = await podmin([
        "--bucket",
        bucket,
        "mirror",
        "--plain-http",
        "--creds",
        "mirror:t0ken-s3cret",
        `${host}/team/app:1.0`,
      ]);
      assert.equal(ok.code, 0, ok.stderr);
      assert.match(ok.stdout, new RegExp(`mirror/${mirrored}/team/app:1.0`));
      const granted = tokens.requests.slice(seenBefore);
      assert.ok(granted.length >= 1, "mirror asked the token service");
      for (const r of granted) {
        assert.equal(r.status, 200);
        assert.equal(r.user, "mirror");
        assert.equal(r.service, service);
        assert.deepEqual(r.scopes, ["repository:team/app:pull"], "mirror asks to pull only");
      }

      registry = await startRegistry(bucket);
      const res = await fetch(
        `http://${registry.address}/v2/mirror/${mirrored}/team/app/manifests/1.0`,
        { headers: { Accept: "application/vnd.oci.image.manifest.v1+json" } },
      );
      const raw = new Uint8Array(await res.arrayBuffer());
      assert.equal(res.status, 200);
      assert.equal(
        `sha256:${createHash("sha256").update(raw).digest("hex")}`,
        image.digest,
        "the manifest is stored unchanged",
      );
    } finally {
      upstream?.kill("SIGTERM");
      await upstream?.status;
      await tokens?.close();
      await registry?.stop();
      await Deno.remove(tmp, { recursive: true });
    }
  },
);

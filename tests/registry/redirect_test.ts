/**
 * Redirected blob pulls end to end, on moto: containerd (CRI, through hosts.toml, as kubelet makes
 * it pull) pulls an image whose large layer the agent's registry answers with a 307 to a presigned
 * URL of moto, and containerd reads it there; a stored layer whose bytes do not match its digest
 * is refused by containerd with a digest error. The URL names the exact blob key, and the
 * registry's log names the key, never the URL. The signature itself is checked on versitygw
 * (moto does not check presigned signatures).
 */

import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import * as path from "node:path";
import { imageBlobKey } from "../../core/bucket/bucket_layout.ts";
import { S3Store } from "../../core/store/s3_store.ts";
import { REGISTRY_HOSTNAME } from "../../registry/defaults.ts";
import { CONTAINERD, CRICTL, startCriContainerd } from "../support/cri_containerd.ts";
import { moto } from "../support/moto.ts";
import { writeOciLayout } from "../support/oci_image.ts";
import { podmin, waitFor } from "../support/programs.ts";
import { startRegistry } from "../support/registry.ts";
import { testWith } from "../support/requirements.ts";
import { startVersitygw, VERSITYGW_CREDENTIALS } from "../support/versitygw.ts";

const OCI = "application/vnd.oci.image.manifest.v1+json";

function randomBytes(n: number): Uint8Array {
  const b = new Uint8Array(n);
  for (let i = 0; i < n; i += 65536) crypto.getRandomValues(b.subarray(i, Math.min(n, i + 65536)));
  return b;
}

testWith(
  "registry redirect [moto]: containerd (CRI) pulls a large layer from a presigned URL; a corrupt stored layer is refused with a digest error",
  { root: true, files: [new URL(`file://${CONTAINERD}`), new URL(`file://${CRICTL}`)] },
  async () => {
    const m = await moto();
    await m.reset();
    const bucket = await m.createBucket();
    const url = `s3://${bucket}`;
    const tmp = await Deno.makeTempDir({ prefix: "podmin-registry-redirect-" });
    let registry: Awaited<ReturnType<typeof startRegistry>> | undefined;
    let containerd: Awaited<ReturnType<typeof startCriContainerd>> | undefined;
    let log = "";
    try {
      for (const [dir, ref] of [["good", "1.0"], ["bad", "2.0"]]) {
        await writeOciLayout({
          dir: path.join(tmp, dir),
          ref,
          platforms: [{ arch: "amd64", files: { big: randomBytes(3 * 1024 * 1024) } }],
        });
        const r = await podmin([
          "--bucket",
          url,
          "push",
          `oci:${tmp}/${dir}:${ref}`,
          `apps/big:${ref}`,
        ]);
        assert.equal(r.code, 0, r.stderr);
      }
      registry = await startRegistry(url, {
        env: { PODMIN_LOG_LEVEL: "debug" },
        args: ["--redirect-min-bytes", "1MiB", "--redirect-ttl", "2m"],
      });
      const base = `http://${registry.address}/v2/apps/big`;
      const layerOf = async (tag: string) => {
        const res = await fetch(`${base}/manifests/${tag}`, { headers: { Accept: OCI } });
        assert.equal(res.status, 200);
        const doc = await res.json();
        return {
          layer: doc.layers[0] as { digest: string; size: number },
          config: doc.config as { digest: string; size: number },
        };
      };
      const good = await layerOf("1.0");
      const bad = await layerOf("2.0");
      const goodKey = imageBlobKey("apps", good.layer.digest.slice(7));

      // The redirect itself: the exact key at the store's endpoint, the lifetime asked for.
      const res = await fetch(`${base}/blobs/${good.layer.digest}`, { redirect: "manual" });
      assert.equal(res.status, 307);
      await res.body?.cancel();
      const location = new URL(res.headers.get("location")!);
      assert.equal(location.origin, m.endpoint);
      assert.equal(location.pathname, `/${bucket}/${goodKey}`);
      assert.equal(location.searchParams.get("X-Amz-Expires"), "120");
      assert.equal(location.searchParams.get("X-Amz-SignedHeaders"), "host");
      assert.match(location.searchParams.get("X-Amz-Signature") ?? "", /^[0-9a-f]{64}$/);
      // moto serves the presigned URL: the bytes of the blob.
      const direct = new Uint8Array(await (await fetch(location)).arrayBuffer());
      assert.equal(
        `sha256:${createHash("sha256").update(direct).digest("hex")}`,
        good.layer.digest,
      );
      // The config is small: served by the registry itself.
      const config = await fetch(`${base}/blobs/${good.config.digest}`, { redirect: "manual" });
      assert.equal(config.status, 200);
      await config.arrayBuffer();

      // containerd through CRI, registries from hosts.toml as the node's generator writes it.
      containerd = await startCriContainerd(path.join(tmp, "containerd"));
      await containerd.route(REGISTRY_HOSTNAME, `http://${registry.address}`);
      const id = await containerd.pull(`${REGISTRY_HOSTNAME}/apps/big:1.0`);
      assert.match(id, /sha256:[0-9a-f]{64}/);

      // The second image's layer, altered in the store (same size): containerd refuses it.
      const badKey = imageBlobKey("apps", bad.layer.digest.slice(7));
      const store = new S3Store({ bucket, region: "us-east-1" });
      const stored = await store.get(badKey);
      assert.ok(!stored.notModified);
      const flipped = stored.body.slice();
      flipped[flipped.length - 100] ^= 0xff;
      await store.put(badKey, flipped);
      const refused = await containerd.pull(`${REGISTRY_HOSTNAME}/apps/big:2.0`).then(
        () => undefined,
        (err: Error) => err.message,
      );
      assert.ok(refused, "the corrupt layer was accepted");
      console.error(refused.split("\n").slice(0, 3).join("\n"));
      assert.match(
        refused,
        new RegExp(`unexpected commit digest sha256:[0-9a-f]{64}, expected ${bad.layer.digest}`),
      );
    } finally {
      await containerd?.stop();
      log = (await registry?.stop()) ?? "";
      await Deno.remove(tmp, { recursive: true }).catch(() => {});
    }
    // Both large layers were redirected, by key; no URL or signature is in the log.
    const redirected = log.split("\n").filter((l) => l.includes('"blob redirected"'));
    assert.ok(redirected.length >= 3, `redirects logged:\n${log}`);
    assert.doesNotMatch(log, /X-Amz-|Signature|https?:\/\/127\.0\.0\.1:\d+\/[^"]*\?/);
  },
);

testWith(
  "registry redirect [versitygw]: the presigned URL passes a server that checks SigV4 query signatures, for its key only and until it expires",
  { tools: ["versitygw"] },
  async () => {
    // moto serves presigned URLs without checking them (and its IAM enforcement reads only the
    // Authorization header), so the signature is checked here against versitygw, which verifies it.
    const gw = await startVersitygw();
    const tmp = await Deno.makeTempDir({ prefix: "podmin-registry-redirect-vgw-" });
    let registry: Awaited<ReturnType<typeof startRegistry>> | undefined;
    try {
      const bucket = await gw.createBucket();
      const env = {
        AWS_ENDPOINT_URL: gw.endpoint,
        AWS_ACCESS_KEY_ID: VERSITYGW_CREDENTIALS.accessKeyId,
        AWS_SECRET_ACCESS_KEY: VERSITYGW_CREDENTIALS.secretAccessKey,
        AWS_REGION: "us-east-1",
      };
      await writeOciLayout({
        dir: path.join(tmp, "img"),
        ref: "1",
        platforms: [{ arch: "amd64", files: { big: randomBytes(256 * 1024) } }],
      });
      const pushed = await podmin([
        "--bucket",
        `s3://${bucket}`,
        "push",
        `oci:${tmp}/img:1`,
        "apps/v:1",
      ], env);
      assert.equal(pushed.code, 0, pushed.stderr);
      registry = await startRegistry(`s3://${bucket}`, {
        env,
        args: ["--redirect-min-bytes", "0"],
      });
      const base = `http://${registry.address}/v2/apps/v`;
      const manifest = await (await fetch(`${base}/manifests/1`, { headers: { Accept: OCI } }))
        .json();
      for (const d of [manifest.config, ...manifest.layers] as { digest: string }[]) {
        const res = await fetch(`${base}/blobs/${d.digest}`, { redirect: "manual" });
        assert.equal(res.status, 307, d.digest);
        await res.body?.cancel();
        const location = new URL(res.headers.get("location")!);
        const got = await fetch(location);
        assert.equal(got.status, 200, await got.clone().text());
        const bytes = new Uint8Array(await got.arrayBuffer());
        assert.equal(`sha256:${createHash("sha256").update(bytes).digest("hex")}`, d.digest);
        // Another signature, or another key with this one: refused by the store.
        const forged = new URL(location);
        const sig = forged.searchParams.get("X-Amz-Signature")!;
        forged.searchParams.set("X-Amz-Signature", (sig[0] === "0" ? "1" : "0") + sig.slice(1));
        const elsewhere = new URL(location);
        elsewhere.pathname = elsewhere.pathname.replace(/[0-9a-f]{64}$/, "0".repeat(64));
        for (const [what, u] of [["another signature", forged], ["another key", elsewhere]]) {
          const r = await fetch(u as URL);
          await r.body?.cancel();
          assert.equal(r.status, 403, `${what}: ${r.status}`);
        }
      }
      // The store's presigned URL stops working once its lifetime is over.
      const store = gw.store(bucket);
      const key = imageBlobKey("apps", manifest.layers[0].digest.slice(7));
      const short = await store.presignGet(key, { expiresSeconds: 1 });
      const first = await fetch(short);
      await first.body?.cancel();
      assert.equal(first.status, 200);
      await waitFor("the 1 s URL to expire", async () => {
        const r = await fetch(short);
        await r.body?.cancel();
        return r.status === 403;
      }, 15_000);
    } finally {
      await registry?.stop();
      await gw.stop();
      await Deno.remove(tmp, { recursive: true }).catch(() => {});
    }
  },
);

/**
 * The agent's registry when the bucket misbehaves, against moto (through an HTTP fault proxy for
 * the outage): 503 with Retry-After while the store is unavailable, 500 MANIFEST_INVALID for a
 * stored manifest that does not match its digest or does not parse, and a blob whose stored
 * bytes are truncated or do not match its digest is never delivered as a complete response.
 */

import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import * as path from "node:path";
import { imageBlobKey, imageManifestKey, imageTagKey } from "../../core/bucket/bucket_layout.ts";
import { S3Store } from "../../core/store/s3_store.ts";
import { httpFaultProxy } from "../support/fault_proxy.ts";
import { moto } from "../support/moto.ts";
import { writeOciLayout } from "../support/oci_image.ts";
import { podmin } from "../support/programs.ts";
import { startRegistry } from "../support/registry.ts";

const sha = (b: Uint8Array) => `sha256:${createHash("sha256").update(b).digest("hex")}`;

/** GETs a URL and reads the whole body; a body cut short is reported as `cut`. */
async function pull(url: string, accept?: string) {
  const res = await fetch(url, { headers: accept ? { Accept: accept } : {} });
  try {
    return {
      status: res.status,
      headers: res.headers,
      body: new Uint8Array(await res.arrayBuffer()),
    };
  } catch (err) {
    return { status: res.status, headers: res.headers, cut: (err as Error).message };
  }
}

Deno.test("registry [moto]: store outage → 503 UNAVAILABLE with Retry-After; corrupt manifests → 500 MANIFEST_INVALID; a corrupt or truncated blob is never served whole", async () => {
  const m = await moto();
  await m.reset();
  const bucket = await m.createBucket();
  const url = `s3://${bucket}`;
  const tmp = await Deno.makeTempDir({ prefix: "podmin-registry-faults-" });
  const proxy = httpFaultProxy(m.endpoint);
  let registry: Awaited<ReturnType<typeof startRegistry>> | undefined;
  try {
    const layer = new Uint8Array(3 * 1024 * 1024);
    for (let i = 0; i < layer.length; i += 65536) {
      crypto.getRandomValues(layer.subarray(i, Math.min(layer.length, i + 65536)));
    }
    for (const [dir, ref] of [["one", "1.0"], ["two", "2.0"]]) {
      const img = await writeOciLayout({
        dir: path.join(tmp, dir),
        ref,
        platforms: [{ arch: "amd64", files: { big: layer, name: new TextEncoder().encode(dir) } }],
      });
      const r = await podmin([
        "--bucket",
        url,
        "push",
        `oci:${tmp}/${dir}:${ref}`,
        `apps/img:${ref}`,
      ]);
      assert.equal(r.code, 0, r.stderr);
      assert.ok(img.digest);
    }
    const store = new S3Store({ bucket, region: "us-east-1" });
    // Blobs served through the registry (redirected ones are verified by the client:
    // tests/registry/redirect_test.ts).
    registry = await startRegistry(url, {
      env: { AWS_ENDPOINT_URL: proxy.endpoint },
      args: ["--redirect-min-bytes", "off"],
    });
    const base = `http://${registry.address}/v2/apps/img`;
    const OCI = "application/vnd.oci.image.manifest.v1+json";

    const good = await pull(`${base}/manifests/1.0`, OCI);
    assert.equal(good.status, 200);
    const manifest = JSON.parse(new TextDecoder().decode(good.body!));
    const layers = manifest.layers as { digest: string; size: number }[];

    // The bucket unavailable: a retryable 503, then normal service once it is back.
    proxy.inject({ status: 503, code: "ServiceUnavailable", times: Infinity });
    const down = await pull(`${base}/manifests/1.0`, OCI);
    assert.equal(down.status, 503);
    assert.equal(down.headers.get("retry-after"), "1");
    assert.match(new TextDecoder().decode(down.body!), /"code":"UNAVAILABLE"/);
    const downBlob = await pull(`${base}/blobs/${layers[0].digest}`);
    assert.equal(downBlob.status, 503);
    proxy.clear();
    assert.equal((await pull(`${base}/manifests/1.0`, OCI)).status, 200);

    // A stored manifest whose bytes do not match its digest (never fetched by digest before).
    const two = await pull(`${base}/manifests/2.0`, OCI);
    const twoDigest = two.headers.get("docker-content-digest")!;
    await store.put(
      imageManifestKey({ root: "apps", name: "img" }, twoDigest.slice(7)),
      good.body!,
      { contentType: OCI },
    );
    const mismatched = await pull(`${base}/manifests/${twoDigest}`, OCI);
    assert.equal(mismatched.status, 500);
    assert.match(new TextDecoder().decode(mismatched.body!), /"code":"MANIFEST_INVALID"/);
    // A tag whose stored manifest does not parse.
    await store.put(
      imageTagKey({ root: "apps", name: "img" }, "2.0"),
      new TextEncoder().encode("{not json"),
      {
        contentType: OCI,
      },
    );
    const garbled = await pull(`${base}/manifests/2.0`, OCI);
    assert.equal(garbled.status, 500);
    assert.match(new TextDecoder().decode(garbled.body!), /"code":"MANIFEST_INVALID"/);

    // The big layer, intact: served whole and right.
    const big = layers[0];
    assert.ok(big.size > layer.length, "random bytes do not compress: a multi-MiB layer");
    const whole = await pull(`${base}/blobs/${big.digest}`);
    assert.equal(whole.status, 200);
    assert.equal(sha(whole.body!), big.digest);

    // Same size, other bytes; then truncated: the client never gets a complete response.
    const blobKey = imageBlobKey("apps", big.digest.slice(7));
    const stored = whole.body!;
    const flipped = stored.slice();
    flipped[flipped.length - 10] ^= 0xff;
    for (
      const [what, bytes] of [["wrong bytes", flipped], [
        "truncated",
        layer.subarray(0, layer.length / 2),
      ]] as const
    ) {
      await store.put(blobKey, bytes);
      const got = await pull(`${base}/blobs/${big.digest}`);
      assert.ok(
        got.status !== 200 || got.cut !== undefined,
        `${what}: served ${got.body?.length} bytes with status ${got.status} as ${big.digest}`,
      );
    }
  } finally {
    const log = await registry?.stop();
    await proxy.close();
    await Deno.remove(tmp, { recursive: true });
    if (log?.includes('"level":"error"') && !/corrupt|digest|registry request failed/.test(log)) {
      console.error(log);
    }
  }
});

import assert from "node:assert/strict";
import { FsStore } from "../core/store/fs_store.ts";
import { createLogger, silentLogger } from "../core/kit/log.ts";
import type { ObjectStore } from "../core/store/object_store.ts";
import { writeOciLayout } from "../tests/support/oci_image.ts";
import { ImageReader } from "./image_reader.ts";
import { openImageSource } from "./image_source.ts";
import { writeImage } from "./image_writer.ts";
import {
  createRegistryHandler,
  parseListen,
  parseRange,
  parseRedirect,
  type RegistryRedirect,
} from "./server.ts";
import { UnavailableError, UsageError } from "../core/kit/errors.ts";
import { imageBlobKey } from "../core/bucket/bucket_layout.ts";

/** Counts store calls by operation. */
function counting(inner: ObjectStore) {
  const calls: string[] = [];
  const store: ObjectStore = {
    url: inner.url,
    get: (k, o) => (calls.push(`get ${k}`), inner.get(k, o)),
    head: (k) => (calls.push(`head ${k}`), inner.head(k)),
    put: (k, b, o) => (calls.push(`put ${k}`), inner.put(k, b, o)),
    putStream: (k, b, o) => (calls.push(`putStream ${k}`), inner.putStream(k, b, o)),
    getStream: (k, o) => (calls.push(`getStream ${k}`), inner.getStream(k, o)),
    delete: (k, o) => (calls.push(`delete ${k}`), inner.delete(k, o)),
    list: (p) => (calls.push(`list ${p}`), inner.list(p)),
  };
  return { store, calls };
}

async function setup(files?: Record<string, Uint8Array>) {
  const tmp = await Deno.makeTempDir({ prefix: "podmin-registry-unit-" });
  const layout = `${tmp}/layout`;
  const img = await writeOciLayout({
    dir: layout,
    ref: "1.0",
    platforms: [{
      arch: "amd64",
      files: files ?? { "hello": new TextEncoder().encode("#!/bin/sh\necho hi\n") },
    }],
  });
  const fs = new FsStore({ root: `${tmp}/bucket`, durable: false });
  const source = await openImageSource(`oci:${layout}:1.0`);
  const result = await writeImage({
    store: fs,
    source,
    repo: { root: "apps", name: "hello" },
    tag: "1.0",
  });
  const manifest = JSON.parse(
    await Deno.readTextFile(`${layout}/blobs/sha256/${img.digest.slice(7)}`),
  );
  const { store, calls } = counting(fs);
  const handler = createRegistryHandler({ reader: new ImageReader({ store }), log: silentLogger });
  const req = (path: string, init?: RequestInit) =>
    handler(new Request(`http://registry${path}`, init));
  return { tmp, img, result, manifest, calls, req };
}

Deno.test("registry: manifests by tag and digest with the distribution headers", async () => {
  const { tmp, img, req } = await setup();
  try {
    const base = await req("/v2/");
    assert.equal(base.status, 200);
    assert.equal(base.headers.get("docker-distribution-api-version"), "registry/2.0");
    await base.body?.cancel();
    for (const ref of ["1.0", img.digest]) {
      const res = await req(`/v2/apps/hello/manifests/${ref}`);
      assert.equal(res.status, 200);
      assert.equal(res.headers.get("content-type"), "application/vnd.oci.image.manifest.v1+json");
      assert.equal(res.headers.get("docker-content-digest"), img.digest);
      const body = new Uint8Array(await res.arrayBuffer());
      assert.equal(res.headers.get("content-length"), String(body.byteLength));
    }
    const head = await req(`/v2/apps/hello/manifests/1.0`, { method: "HEAD" });
    assert.equal(head.status, 200);
    assert.equal(head.headers.get("docker-content-digest"), img.digest);
    assert.equal(await head.text(), "");
  } finally {
    await Deno.remove(tmp, { recursive: true });
  }
});

Deno.test("registry: blobs stream whole or by range; bad ranges are 416", async () => {
  const { tmp, manifest, req } = await setup();
  try {
    const layer = manifest.layers[0];
    const whole = new Uint8Array(
      await (await req(`/v2/apps/hello/blobs/${layer.digest}`)).arrayBuffer(),
    );
    assert.equal(whole.byteLength, layer.size);
    const part = await req(`/v2/apps/hello/blobs/${layer.digest}`, {
      headers: { Range: "bytes=2-5" },
    });
    assert.equal(part.status, 206);
    assert.equal(part.headers.get("content-range"), `bytes 2-5/${layer.size}`);
    assert.deepEqual(new Uint8Array(await part.arrayBuffer()), whole.subarray(2, 6));
    const bad = await req(`/v2/apps/hello/blobs/${layer.digest}`, {
      headers: { Range: `bytes=${layer.size + 10}-` },
    });
    assert.equal(bad.status, 416);
    assert.equal(bad.headers.get("content-range"), `bytes */${layer.size}`);
    await bad.body?.cancel();
    assert.deepEqual(parseRange("bytes=-3", 10), { start: 7, end: 9 });
    assert.equal(parseRange("bytes=10-", 10), null);
  } finally {
    await Deno.remove(tmp, { recursive: true });
  }
});

Deno.test("registry: writes, listings and foreign repositories are refused with OCI errors", async () => {
  const { tmp, req } = await setup();
  try {
    const cases: [string, RequestInit, number, string][] = [
      ["/v2/apps/hello/manifests/1.0", { method: "PUT", body: "{}" }, 405, "UNSUPPORTED"],
      ["/v2/apps/hello/blobs/uploads/", { method: "POST" }, 405, "UNSUPPORTED"],
      ["/v2/apps/hello/manifests/1.0", { method: "DELETE" }, 405, "UNSUPPORTED"],
      ["/v2/_catalog", {}, 404, "UNSUPPORTED"],
      ["/v2/apps/hello/tags/list", {}, 404, "UNSUPPORTED"],
      ["/v2/library/nginx/manifests/latest", {}, 404, "NAME_UNKNOWN"],
      ["/v2/apps/../infra/manifests/x", {}, 404, "NAME_UNKNOWN"],
      ["/v2/apps/hello/manifests/2.0", {}, 404, "MANIFEST_UNKNOWN"],
      [`/v2/apps/hello/blobs/sha256:${"0".repeat(64)}`, {}, 404, "BLOB_UNKNOWN"],
      ["/v2/apps/hello/blobs/sha256:xyz", {}, 400, "DIGEST_INVALID"],
    ];
    for (const [path, init, status, code] of cases) {
      const res = await req(path, init);
      assert.equal(res.status, status, `${init.method ?? "GET"} ${path}`);
      const body = await res.json();
      assert.equal(body.errors[0].code, code, path);
    }
  } finally {
    await Deno.remove(tmp, { recursive: true });
  }
});

Deno.test("registry: a repeated pull makes no extra metadata requests (immutable objects cached)", async () => {
  const { tmp, img, manifest, calls, req } = await setup();
  try {
    const pull = async () => {
      for (
        const path of [`/v2/apps/hello/manifests/1.0`, `/v2/apps/hello/manifests/${img.digest}`]
      ) {
        await (await req(path)).arrayBuffer();
      }
      for (const d of [manifest.config, ...manifest.layers]) {
        await (await req(`/v2/apps/hello/blobs/${d.digest}`, { method: "HEAD" })).arrayBuffer();
        await (await req(`/v2/apps/hello/blobs/${d.digest}`)).arrayBuffer();
      }
    };
    await pull();
    const first = calls.splice(0);
    assert.ok(first.some((c) => c.startsWith("head ")), "the first pull HEADs blobs");
    await pull();
    const second = calls.splice(0);
    assert.equal(second.filter((c) => c.startsWith("head ")).length, 0, `no HEAD: ${second}`);
    assert.equal(
      second.filter((c) => c.includes("_manifests")).length,
      0,
      "manifest by digest cached",
    );
    assert.equal(second.filter((c) => c.includes("_tags")).length, 1, "a tag is one GET");
    assert.equal(second.filter((c) => c.startsWith("getStream")).length, 2, "blob bodies streamed");
    assert.equal(second.filter((c) => c.startsWith("list")).length, 0);
  } finally {
    await Deno.remove(tmp, { recursive: true });
  }
});

Deno.test("registry: a malformed percent-escape is a 400 OCI error, not a 500 with a stack", async () => {
  const tmp = await Deno.makeTempDir({ prefix: "podmin-registry-escape-" });
  try {
    const lines: string[] = [];
    const log = createLogger("registry", { sink: (line) => lines.push(line) });
    const handler = createRegistryHandler({
      reader: new ImageReader({ store: new FsStore({ root: tmp, durable: false }) }),
      log,
    });
    for (const p of ["/v2/%zz", "/v2/apps/web%/manifests/1.0", "/v2/apps/web/blobs/%E0%A4%A"]) {
      const res = await handler(new Request(`http://127.0.0.1${p}`));
      assert.equal(res.status, 400, p);
      assert.equal((await res.json()).errors[0].code, "NAME_INVALID");
    }
    assert.deepEqual(lines, []);
  } finally {
    await Deno.remove(tmp, { recursive: true });
  }
});

Deno.test("registry: parseListen refuses non-loopback addresses unless allowed, saying why", () => {
  for (const ok of ["127.0.0.1:5000", "[::1]:5000", "localhost:5000", "127.0.0.53:1"]) {
    parseListen(ok);
  }
  for (const bad of ["0.0.0.0:5000", "[::]:5000", "10.0.0.5:5000", "[2001:db8::1]:80"]) {
    assert.throws(
      () => parseListen(bad),
      (err: Error) =>
        err instanceof UsageError && /not a loopback address/.test(err.message) &&
        /without authentication/.test(err.message),
      bad,
    );
    assert.deepEqual(
      parseListen(bad, { allowNonLoopback: true }).port,
      Number(bad.split(":").pop()),
    );
  }
});

/**
 * The redirect decision over a filesystem bucket given a presigner (the URLs themselves are
 * S3's and checked against moto in tests/registry/redirect_test.ts): which requests redirect,
 * what is HEADed first, and what is logged.
 */
async function redirecting(redirect: RegistryRedirect | undefined, o: { presign: boolean }) {
  // Random bytes do not compress: the layer is larger than the config.
  const base = await setup({ big: crypto.getRandomValues(new Uint8Array(32 * 1024)) });
  const fs = new FsStore({ root: `${base.tmp}/bucket`, durable: false });
  const { store, calls } = counting(fs);
  let down = false;
  const head = store.head;
  store.head = (k) => down ? Promise.reject(new UnavailableError("store down")) : head(k);
  if (o.presign) {
    store.presignGet = (key, { expiresSeconds }) => {
      calls.push(`presign ${key} ${expiresSeconds}`);
      return Promise.resolve(new URL(`https://store.example/${key}?X-Amz-Signature=secret`));
    };
  }
  const lines: string[] = [];
  const log = createLogger("registry", { level: "debug", sink: (l) => lines.push(l) });
  const handler = createRegistryHandler({ reader: new ImageReader({ store }), log, redirect });
  const req = (path: string, init?: RequestInit) =>
    handler(new Request(`http://registry${path}`, init));
  const layer = base.manifest.layers[0] as { digest: string; size: number };
  const config = base.manifest.config as { digest: string; size: number };
  assert.ok(config.size < 32 * 1024 && layer.size > 32 * 1024, "a small config, a larger layer");
  return { ...base, calls, req, layer, config, lines, setDown: (d: boolean) => down = d };
}

Deno.test("registry redirect: a blob at or above the threshold is a 307 to its exact key, HEADed first", async () => {
  // 32 KiB: above the config, below the layer.
  const t = await redirecting({ minBytes: 32 * 1024, expiresSeconds: 300 }, { presign: true });
  try {
    const key = imageBlobKey("apps", t.layer.digest.slice(7));
    t.calls.splice(0);
    const res = await t.req(`/v2/apps/hello/blobs/${t.layer.digest}`);
    assert.equal(res.status, 307);
    assert.equal(
      res.headers.get("location"),
      `https://store.example/${key}?X-Amz-Signature=secret`,
    );
    assert.equal(res.headers.get("docker-content-digest"), t.layer.digest);
    assert.equal(await res.text(), "");
    assert.deepEqual(t.calls, [`head ${key}`, `presign ${key} 300`], "HEAD, then presign; no GET");
    // The log names the key, never the URL or its signature.
    const logged = t.lines.join("\n");
    assert.match(logged, new RegExp(`"key":"${key}"`));
    assert.doesNotMatch(logged, /secret|store\.example|X-Amz/);
    // A range GET of it redirects too (S3 answers the range).
    const ranged = await t.req(`/v2/apps/hello/blobs/${t.layer.digest}`, {
      headers: { Range: "bytes=0-1" },
    });
    assert.equal(ranged.status, 307);
    await ranged.body?.cancel();
  } finally {
    await Deno.remove(t.tmp, { recursive: true });
  }
});

Deno.test("registry redirect: smaller blobs, manifests and HEAD are served directly and verified", async () => {
  // 32 KiB: above the config, below the layer.
  const t = await redirecting({ minBytes: 32 * 1024, expiresSeconds: 300 }, { presign: true });
  try {
    t.calls.splice(0);
    const small = await t.req(`/v2/apps/hello/blobs/${t.config.digest}`);
    assert.equal(small.status, 200);
    assert.equal((await small.arrayBuffer()).byteLength, t.config.size);
    // Its size is now known to be below the threshold: the next GET is the GET alone.
    t.calls.splice(0);
    await (await t.req(`/v2/apps/hello/blobs/${t.config.digest}`)).arrayBuffer();
    assert.deepEqual(t.calls.map((c) => c.split(" ")[0]), ["getStream"]);
    for (const ref of ["1.0", t.img.digest]) {
      const m = await t.req(`/v2/apps/hello/manifests/${ref}`);
      assert.equal(m.status, 200, ref);
      assert.equal(m.headers.get("docker-content-digest"), t.img.digest);
      await m.arrayBuffer();
    }
    const head = await t.req(`/v2/apps/hello/blobs/${t.layer.digest}`, { method: "HEAD" });
    assert.equal(head.status, 200);
    assert.equal(head.headers.get("content-length"), String(t.layer.size));
    assert.ok(!t.calls.some((c) => c.startsWith("presign")), `no presign: ${t.calls}`);
  } finally {
    await Deno.remove(t.tmp, { recursive: true });
  }
});

Deno.test("registry redirect: a missing blob is BLOB_UNKNOWN and an unreachable store 503, never a redirect", async () => {
  const t = await redirecting({ minBytes: 0, expiresSeconds: 60 }, { presign: true });
  try {
    const missing = await t.req(`/v2/apps/hello/blobs/sha256:${"0".repeat(64)}`);
    assert.equal(missing.status, 404);
    assert.equal((await missing.json()).errors[0].code, "BLOB_UNKNOWN");
    t.setDown(true);
    const down = await t.req(`/v2/apps/hello/blobs/${t.layer.digest}`);
    assert.equal(down.status, 503);
    assert.equal((await down.json()).errors[0].code, "UNAVAILABLE");
    assert.ok(!t.calls.some((c) => c.startsWith("presign")), `no presign: ${t.calls}`);
    t.setDown(false);
    const up = await t.req(`/v2/apps/hello/blobs/${t.layer.digest}`);
    assert.equal(up.status, 307, "minBytes 0 redirects every blob");
    await up.body?.cancel();
  } finally {
    await Deno.remove(t.tmp, { recursive: true });
  }
});

Deno.test("registry redirect: the filesystem store (no presigned URLs) and redirect off serve every blob", async () => {
  for (
    const [what, redirect, presign] of [
      ["filesystem store", { minBytes: 0, expiresSeconds: 60 }, false],
      ["redirect off", undefined, true],
    ] as const
  ) {
    const t = await redirecting(redirect, { presign });
    try {
      t.calls.splice(0);
      const res = await t.req(`/v2/apps/hello/blobs/${t.layer.digest}`);
      assert.equal(res.status, 200, what);
      assert.equal((await res.arrayBuffer()).byteLength, t.layer.size, what);
      assert.deepEqual(t.calls.map((c) => c.split(" ")[0]), ["getStream"], what);
    } finally {
      await Deno.remove(t.tmp, { recursive: true });
    }
  }
});

Deno.test("registry redirect: parseRedirect reads sizes, durations and off, naming the flag", () => {
  assert.deepEqual(parseRedirect({ minBytes: "1MiB", ttl: "5m" }), {
    minBytes: 1048576,
    expiresSeconds: 300,
  });
  assert.deepEqual(parseRedirect({ minBytes: "4096", ttl: "30s" }), {
    minBytes: 4096,
    expiresSeconds: 30,
  });
  assert.equal(parseRedirect({ minBytes: "2GiB", ttl: "1h" })?.minBytes, 2 * 1024 ** 3);
  assert.equal(parseRedirect({ minBytes: "off", ttl: "5m" }), undefined);
  assert.equal(parseRedirect({ minBytes: "1MiB", ttl: "off" }), undefined);
  for (
    const [minBytes, ttl, re] of [
      ["1MB", "5m", /--registry-redirect-min-bytes: "1MB" is not a size/],
      ["-1", "5m", /is not a size/],
      ["1MiB", "2h", /--registry-redirect-ttl 2h: must be 1s to 1h/],
      ["1MiB", "500ms", /must be 1s to 1h/],
    ] as const
  ) {
    assert.throws(
      () =>
        parseRedirect({
          minBytes,
          ttl,
          minBytesFlag: "--registry-redirect-min-bytes",
          ttlFlag: "--registry-redirect-ttl",
        }),
      (err: Error) => err instanceof UsageError && re.test(err.message),
      `${minBytes} ${ttl}`,
    );
  }
});

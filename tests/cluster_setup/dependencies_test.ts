/**
 * Dependency publishing against S3 on moto: only absent files move, the
 * manifest is written last and conditionally, corrupt cache entries are
 * replaced one by one, and racing setups never publish a mixed manifest.
 */

import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import * as path from "node:path";
import { DependencyCache } from "../../cli/setup/dependency_cache.ts";
import type { Catalog } from "../../cli/setup/dependency_catalog.ts";
import {
  planDependencies,
  publishDependencies,
  wantedDependencies,
} from "../../cli/setup/dependency_sync.ts";
import { DEPENDENCY_MANIFEST } from "../../core/bucket/bucket_layout.ts";
import { parseDependencyManifest } from "../../core/bucket/dependency_manifest.ts";
import { getIfExists, type ObjectStore } from "../../core/store/object_store.ts";
import { S3Store } from "../../core/store/s3_store.ts";
import { serveFiles } from "../support/file_server.ts";
import { moto } from "../support/moto.ts";

const sha = (b: Uint8Array) => createHash("sha256").update(b).digest("hex");

/** n random bytes (getRandomValues gives at most 64 KiB per call). */
function randomBytes(n: number): Uint8Array {
  const out = new Uint8Array(n);
  for (let off = 0; off < n; off += 65536) {
    crypto.getRandomValues(out.subarray(off, Math.min(n, off + 65536)));
  }
  return out;
}

/** Counts PUT-like calls and bytes sent. */
function counting(inner: ObjectStore) {
  const c = { puts: 0, bytes: 0 };
  const store: ObjectStore = Object.assign(Object.create(inner), {
    url: inner.url,
    get: inner.get.bind(inner),
    head: inner.head.bind(inner),
    getStream: inner.getStream.bind(inner),
    delete: inner.delete.bind(inner),
    list: inner.list.bind(inner),
    put(k: string, b: Uint8Array, o: never) {
      c.puts++;
      c.bytes += b.byteLength;
      return inner.put(k, b, o);
    },
    async putStream(k: string, b: ReadableStream<Uint8Array>, o: never) {
      c.puts++;
      const r = await inner.putStream(k, b, o);
      c.bytes += r.size;
      return r;
    },
  });
  return { store, c, reset: () => Object.assign(c, { puts: 0, bytes: 0 }) };
}

Deno.test("setup dependencies [moto]: upload once, zero bytes when unchanged, one file per change, cache entries validated independently", async () => {
  const m = await moto();
  await m.reset();
  const s3 = new S3Store({ bucket: await m.createBucket(), region: "us-east-1" });
  const { store, c, reset } = counting(s3);
  const tmp = await Deno.makeTempDir({ prefix: "podmin-deps-" });
  const files = new Map<string, Uint8Array>();
  for (const name of ["containerd-amd64", "runc-amd64", "kubelet-amd64"]) {
    files.set(name, randomBytes(200_000));
  }
  const server = serveFiles(files);
  try {
    const catalog = (): Catalog => ({
      dependencies: [...files].map(([name, bytes]) => ({
        name: name.split("-")[0],
        version: "1.0.0",
        arch: "amd64" as const,
        url: server.url(name),
        sha256: sha(bytes),
        size: bytes.byteLength,
      })),
    });
    const local = [{
      name: "vmconfig",
      version: "0.1.0",
      arch: "amd64" as const,
      bytes: new TextEncoder().encode("vmconfig archive"),
    }];
    const cache = new DependencyCache({ dir: path.join(tmp, "cache") });
    const run = async () => {
      const wanted = wantedDependencies({ catalog: catalog(), local, architectures: ["amd64"] });
      const plan = await planDependencies(store, wanted);
      return { plan, result: await publishDependencies({ store, cache, plan, local }) };
    };

    // First setup: every file uploaded, then the manifest.
    let { result } = await run();
    assert.equal(result.uploadedFiles, 4);
    assert.equal(c.puts, 5);
    assert.ok(result.manifestWritten);
    const manifest = parseDependencyManifest((await getIfExists(s3, DEPENDENCY_MANIFEST))!.body);
    assert.deepEqual(manifest.architectures.amd64!.map((e) => e.name), [
      "containerd",
      "kubelet",
      "runc",
      "vmconfig",
    ]);
    assert.equal(manifest.generation, 1);

    // Second identical setup: nothing uploaded, no manifest write, nothing downloaded.
    reset();
    const hitsBefore = [...server.hits.values()].reduce((a, b) => a + b, 0);
    ({ result } = await run());
    assert.equal(c.puts, 0);
    assert.equal(c.bytes, 0);
    assert.equal(result.manifestWritten, false);
    assert.equal(
      [...server.hits.values()].reduce((a, b) => a + b, 0),
      hitsBefore,
      "no download either",
    );

    // One dependency changes: exactly one file goes up (plus the manifest).
    files.set("runc-amd64", randomBytes(150_000));
    reset();
    ({ result } = await run());
    assert.equal(result.uploadedFiles, 1);
    assert.equal(result.uploadedBytes, 150_000);
    assert.equal(c.puts, 2);
    assert.equal(
      parseDependencyManifest((await getIfExists(s3, DEPENDENCY_MANIFEST))!.body).generation,
      2,
    );

    // A corrupted cache entry is downloaded again; the others are reused.
    const kubelet = files.get("kubelet-amd64")!;
    const kubeletPath = cache.pathOf(sha(kubelet));
    const bytes = await Deno.readFile(kubeletPath);
    bytes[10] ^= 0xff;
    await Deno.writeFile(kubeletPath, bytes);
    const containerdHits = server.hits.get("containerd-amd64");
    const got = await cache.ensure({
      sha256: sha(kubelet),
      url: server.url("kubelet-amd64"),
      label: "kubelet",
    });
    assert.equal(got.outcome, "replaced-corrupt");
    assert.equal(sha(await Deno.readFile(kubeletPath)), sha(kubelet));
    const reused = await cache.ensure({
      sha256: sha(files.get("containerd-amd64")!),
      url: server.url("containerd-amd64"),
      label: "containerd",
    });
    assert.equal(reused.outcome, "reused");
    assert.equal(server.hits.get("containerd-amd64"), containerdHits);

    // A file whose upstream bytes do not match the pin is refused, and nothing is cached.
    await assert.rejects(
      cache.ensure({ sha256: "0".repeat(64), url: server.url("runc-amd64"), label: "runc" }),
      /pinned 0000/,
    );
    await assert.rejects(Deno.stat(cache.pathOf("0".repeat(64))), Deno.errors.NotFound);
  } finally {
    await server.close();
    await Deno.remove(tmp, { recursive: true });
  }
});

Deno.test("setup dependencies [moto]: two racing setups → one fails cleanly, the manifest is never a mix", async () => {
  const m = await moto();
  await m.reset();
  const store = new S3Store({ bucket: await m.createBucket(), region: "us-east-1" });
  const tmp = await Deno.makeTempDir({ prefix: "podmin-race-deps-" });
  try {
    const cache = new DependencyCache({ dir: path.join(tmp, "cache") });
    const setup = (tag: string) => {
      const local = ["agent", "vmconfig", "extra"].map((name) => ({
        name,
        version: tag,
        arch: "amd64" as const,
        bytes: new TextEncoder().encode(`${name} ${tag}`),
      }));
      const wanted = wantedDependencies({
        catalog: { dependencies: [] },
        local,
        architectures: ["amd64"],
      });
      return { local, wanted };
    };
    const a = setup("a"), b = setup("b");
    // Both plan against the same (absent) manifest, then race to publish.
    const [planA, planB] = await Promise.all([
      planDependencies(store, a.wanted),
      planDependencies(store, b.wanted),
    ]);
    const results = await Promise.allSettled([
      publishDependencies({ store, cache, plan: planA, local: a.local }),
      publishDependencies({ store, cache, plan: planB, local: b.local }),
    ]);
    const failed = results.filter((r) => r.status === "rejected");
    assert.equal(failed.length, 1);
    assert.match(
      String((failed[0] as PromiseRejectedResult).reason.message),
      /changed while this setup ran/,
    );
    const manifest = parseDependencyManifest((await getIfExists(store, DEPENDENCY_MANIFEST))!.body);
    const versions = new Set(manifest.architectures.amd64!.map((e) => e.version));
    assert.equal(versions.size, 1, `mixed manifest: ${[...versions]}`);
  } finally {
    await Deno.remove(tmp, { recursive: true });
  }
});

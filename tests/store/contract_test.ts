/**
 * The object store contract, run against both implementations: the S3 store
 * on a real moto server and the filesystem store on a temp directory.
 */

import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import {
  DigestMismatchError,
  NotFoundError,
  PreconditionFailedError,
  UnavailableError,
} from "../../core/kit/errors.ts";
import { FsStore } from "../../core/store/fs_store.ts";
import { LIMITS, TooLargeError } from "../../core/kit/limits.ts";
import { DEPLOYMENT_INDEX, deploymentSpecKey } from "../../core/bucket/bucket_layout.ts";
import { pollDeploymentIndex } from "../../core/bucket/deployment_index.ts";
import { readSpec } from "../../core/bucket/spec_objects.ts";
import {
  getIfExists,
  type ObjectStore,
  putIfAbsent,
  putIfMatch,
} from "../../core/store/object_store.ts";
import { S3Store } from "../../core/store/s3_store.ts";
import { moto } from "../support/moto.ts";
import { httpFaultProxy } from "../support/fault_proxy.ts";

const enc = new TextEncoder();
const dec = new TextDecoder();

interface Backend {
  name: string;
  open(): Promise<{ store: ObjectStore; cleanup(): Promise<void> }>;
}

const backends: Backend[] = [
  {
    name: "s3 (moto)",
    async open() {
      const m = await moto();
      await m.reset();
      const bucket = await m.createBucket();
      return { store: new S3Store({ bucket, region: "us-east-1" }), cleanup: async () => {} };
    },
  },
  {
    name: "filesystem",
    async open() {
      const root = await Deno.makeTempDir({ prefix: "podmin-fs-store-" });
      return {
        store: new FsStore({ root }),
        cleanup: () => Deno.remove(root, { recursive: true }),
      };
    },
  },
];

/** A deterministic pseudo-random stream of `mib` MiB, hashed as it is produced. */
function bigStream(mib: number): { stream: ReadableStream<Uint8Array>; sha256: Promise<string> } {
  const block = new Uint8Array(1024 * 1024);
  let x = 0x2545f491;
  for (let i = 0; i < block.length; i++) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    block[i] = x & 0xff;
  }
  const hash = createHash("sha256");
  let resolve!: (s: string) => void;
  const sha256 = new Promise<string>((r) => (resolve = r));
  let i = 0;
  const stream = new ReadableStream<Uint8Array>({
    pull(controller) {
      if (i === mib) {
        resolve(hash.digest("hex"));
        controller.close();
        return;
      }
      const chunk = block.slice();
      new DataView(chunk.buffer).setUint32(0, i++);
      hash.update(chunk);
      controller.enqueue(chunk);
    },
  });
  return { stream, sha256 };
}

async function streamSha256(stream: ReadableStream<Uint8Array>): Promise<[string, number]> {
  const hash = createHash("sha256");
  let n = 0;
  for await (const chunk of stream) {
    hash.update(chunk);
    n += chunk.byteLength;
  }
  return [hash.digest("hex"), n];
}

for (const backend of backends) {
  const t = (name: string, fn: (store: ObjectStore) => Promise<void>) =>
    Deno.test(`store contract [${backend.name}]: ${name}`, async () => {
      const { store, cleanup } = await backend.open();
      try {
        await fn(store);
      } finally {
        await cleanup();
      }
    });

  t("put, get, head round-trip with content type", async (store) => {
    const { etag } = await store.put("a/b/c.json", enc.encode('{"x":1}'), {
      contentType: "application/json",
    });
    assert.match(etag, /^".+"$/);
    const got = await store.get("a/b/c.json");
    assert.equal(got.notModified, false);
    if (got.notModified) return;
    assert.equal(dec.decode(got.body), '{"x":1}');
    assert.equal(got.info.etag, etag);
    assert.equal(got.info.contentType, "application/json");
    const head = await store.head("a/b/c.json");
    assert.equal(head.size, 7);
    assert.equal(head.etag, etag);
  });

  t("a key and a key below it coexist", async (store) => {
    await store.put("x/y", enc.encode("1"));
    await store.put("x/y/z", enc.encode("2"));
    assert.equal(dec.decode((await getIfExists(store, "x/y"))!.body), "1");
    assert.equal(dec.decode((await getIfExists(store, "x/y/z"))!.body), "2");
  });

  t("absent keys: get and head throw NotFoundError, getIfExists gives undefined", async (store) => {
    await assert.rejects(store.get("missing/key"), NotFoundError);
    await assert.rejects(store.head("missing/key"), NotFoundError);
    await assert.rejects(store.getStream("missing/key"), NotFoundError);
    assert.equal(await getIfExists(store, "missing/key"), undefined);
  });

  t(
    "conditional get: unchanged ETag is not modified, a changed object is returned",
    async (store) => {
      const { etag } = await store.put("idx.json", enc.encode("v1"));
      const same = await store.get("idx.json", { ifNoneMatch: etag });
      assert.equal(same.notModified, true);
      const { etag: etag2 } = await store.put("idx.json", enc.encode("v2"));
      assert.notEqual(etag2, etag);
      const changed = await store.get("idx.json", { ifNoneMatch: etag });
      assert.equal(changed.notModified, false);
      if (!changed.notModified) assert.equal(dec.decode(changed.body), "v2");
    },
  );

  t("put-if-absent: second write fails; 16 racing creators, exactly one wins", async (store) => {
    await putIfAbsent(store, { key: "once", body: enc.encode("first") });
    await assert.rejects(
      putIfAbsent(store, { key: "once", body: enc.encode("second") }),
      PreconditionFailedError,
    );
    assert.equal(dec.decode((await getIfExists(store, "once"))!.body), "first");

    const results = await Promise.allSettled(
      Array.from(
        { length: 16 },
        (_, i) => putIfAbsent(store, { key: "race", body: enc.encode(`w${i}`) }),
      ),
    );
    const winners = results.flatMap((r, i) => (r.status === "fulfilled" ? [i] : []));
    assert.equal(winners.length, 1, `winners: ${winners}`);
    for (const r of results) {
      if (r.status === "rejected") assert.ok(r.reason instanceof PreconditionFailedError);
    }
    assert.equal(dec.decode((await getIfExists(store, "race"))!.body), `w${winners[0]}`);
  });

  t(
    "put-if-match: 32 concurrent writers on one key, exactly one winner per round",
    async (store) => {
      let { etag } = await store.put("cas", enc.encode("round-start"));
      for (let round = 0; round < 5; round++) {
        const results = await Promise.allSettled(
          Array.from(
            { length: 32 },
            (_, i) => putIfMatch(store, { key: "cas", body: enc.encode(`r${round}-w${i}`), etag }),
          ),
        );
        const winners = results.flatMap((r, i) => (r.status === "fulfilled" ? [i] : []));
        assert.equal(winners.length, 1, `round ${round}: winners ${winners}`);
        for (const r of results) {
          if (r.status === "rejected") assert.ok(r.reason instanceof PreconditionFailedError);
        }
        const got = await getIfExists(store, "cas");
        assert.equal(dec.decode(got!.body), `r${round}-w${winners[0]}`);
        etag = got!.info.etag;
      }
    },
  );

  t("put-if-match on an absent key fails", async (store) => {
    await assert.rejects(
      putIfMatch(store, { key: "nothing-here", body: enc.encode("x"), etag: '"0123"' }),
      PreconditionFailedError,
    );
  });

  t("delete: if-match guards, absent key is fine", async (store) => {
    const { etag } = await store.put("d", enc.encode("x"));
    await assert.rejects(store.delete("d", { ifMatch: '"not-the-etag"' }), PreconditionFailedError);
    assert.ok(await getIfExists(store, "d"));
    await store.delete("d", { ifMatch: etag });
    assert.equal(await getIfExists(store, "d"), undefined);
    await store.delete("d"); // absent: no error
    await store.delete("never/written/under/this/prefix.json"); // absent prefix too
    await assert.rejects(store.delete("d", { ifMatch: etag }), PreconditionFailedError);
  });

  t("list by prefix returns keys in order", async (store) => {
    for (const k of ["p/b", "p/a", "p/sub/c", "q/a", "pp"]) await store.put(k, enc.encode(k));
    const keys = [];
    for await (const o of store.list("p/")) keys.push(o.key);
    assert.deepEqual(keys, ["p/a", "p/b", "p/sub/c"]);
    const partial = [];
    for await (const o of store.list("p")) partial.push(o.key);
    assert.deepEqual(partial, ["p/a", "p/b", "p/sub/c", "pp"]);
  });

  t("64 MiB streamed object round-trips with verified digest; ranges", async (store) => {
    const { stream, sha256 } = bigStream(64);
    let progress = 0;
    const put = await store.putStream("big/blob", stream, {
      onProgress: (n) => (progress = n),
    });
    const expected = await sha256;
    assert.equal(put.sha256, expected);
    assert.equal(put.size, 64 * 1024 * 1024);
    assert.equal(progress, 64 * 1024 * 1024);
    const out = await store.getStream("big/blob");
    assert.equal(out.info.size, 64 * 1024 * 1024);
    assert.deepEqual(await streamSha256(out.body), [expected, 64 * 1024 * 1024]);

    const ranged = await store.getStream("big/blob", {
      range: { start: 1024 * 1024, end: 1024 * 1024 + 9 },
    });
    const bytes = new Uint8Array(await new Response(ranged.body).arrayBuffer());
    assert.equal(bytes.length, 10);
    assert.deepEqual([...bytes.subarray(0, 4)], [0, 0, 0, 1]); // chunk counter of MiB 1
  });

  t("streamed upload with a wrong digest or size publishes nothing", async (store) => {
    await store.put("blob", enc.encode("old"));
    const { stream } = bigStream(9); // crosses the multipart threshold on S3
    await assert.rejects(
      store.putStream("blob", stream, { sha256: "0".repeat(64) }),
      DigestMismatchError,
    );
    assert.equal(dec.decode((await getIfExists(store, "blob"))!.body), "old");
    await assert.rejects(
      store.putStream("small", ReadableStream.from([enc.encode("abc")]), { size: 4 }),
      DigestMismatchError,
    );
    assert.equal(await getIfExists(store, "small"), undefined);
  });

  t(
    "get with maxBytes refuses a larger object with TooLargeError naming the limit",
    async (store) => {
      await store.put("big", new Uint8Array(3000));
      await assert.rejects(
        store.get("big", { maxBytes: 2048 }),
        (err: Error) => err instanceof TooLargeError && /over the limit of 2 KiB/.test(err.message),
      );
      await assert.rejects(getIfExists(store, "big", { maxBytes: 2048 }), TooLargeError);
      const got = await store.get("big", { maxBytes: 3000 });
      assert.ok(!got.notModified && got.body.byteLength === 3000);
    },
  );

  t("keys that could escape are rejected or stay inside the store", async (store) => {
    // Dot segments are rejected by both stores: `fetch` would resolve them in an S3 URL path.
    const bad = store instanceof FsStore
      ? ["../x", "a/../../x", "/abs", "a//b", "a/./b"]
      : ["../x", "a/../../x", "a/./b", "a/.."];
    for (const key of bad) {
      await assert.rejects(store.put(key, enc.encode("x")), /invalid object key/);
      await assert.rejects(store.get(key), /invalid object key/);
      await assert.rejects(store.getStream(key), /invalid object key/);
      await assert.rejects(store.delete(key), /invalid object key/);
    }
    if (!(store instanceof FsStore)) {
      // Anything else is an opaque S3 key: dots inside a segment and empty segments stay put.
      for (const key of ["..x", "a/.b/..c", "a//b"]) {
        await store.put(key, enc.encode(key));
        assert.equal(dec.decode((await getIfExists(store, key))!.body), key);
      }
      assert.equal(await getIfExists(store, "x"), undefined);
    }
  });
}

Deno.test("store contract [s3]: an unreachable endpoint is Unavailable after bounded retries", async () => {
  const store = new S3Store({
    bucket: "unreachable",
    region: "us-east-1",
    endpoint: "http://127.0.0.1:9", // discard port: connection refused
    retry: { attempts: 3, baseMs: 10, maxMs: 20 },
  });
  const started = Date.now();
  await assert.rejects(store.get("k"), UnavailableError);
  assert.ok(Date.now() - started < 10_000);
});

Deno.test("store contract [s3 + proxy]: a part that fails mid-upload fails the whole upload; nothing becomes visible", async () => {
  const m = await moto();
  await m.reset();
  const proxy = httpFaultProxy(m.endpoint);
  try {
    const store = new S3Store({
      bucket: await m.createBucket(),
      region: "us-east-1",
      endpoint: proxy.endpoint,
      retry: { attempts: 1, baseMs: 1, maxMs: 1 },
    });
    // Part 2 is refused (e.g. access revoked mid-upload); the others go through.
    proxy.inject({
      status: 403,
      code: "AccessDenied",
      match: (r) => r.method === "PUT" && /[?&]partNumber=2(&|$)/.test(r.path),
    });
    const { stream } = bigStream(24);
    await assert.rejects(store.putStream("big/partial", stream), /access denied/);
    assert.ok(proxy.seen.some((s) => /^PUT .*partNumber=2.* 403$/.test(s)), proxy.seen.join("\n"));
    assert.ok(proxy.seen.some((s) => /^DELETE .*uploadId=/.test(s)), "the upload was aborted");
    assert.equal(await getIfExists(store, "big/partial"), undefined);
  } finally {
    await proxy.close();
  }
});

Deno.test("agent reads [filesystem]: an oversized index or spec is refused before it is parsed", async () => {
  const root = await Deno.makeTempDir({ prefix: "podmin-limits-" });
  try {
    const store = new FsStore({ root, durable: false });
    const pad = new Uint8Array(LIMITS.indexBytes + 1).fill(0x20); // valid JSON whitespace
    pad.set(enc.encode("{}"), 0);
    await store.put(DEPLOYMENT_INDEX, pad);
    await assert.rejects(
      pollDeploymentIndex(store, undefined),
      (err: Error) => err instanceof TooLargeError && /over the limit of 16 MiB/.test(err.message),
    );
    const ref = `sha256:${"a".repeat(64)}`;
    await store.put(deploymentSpecKey("a".repeat(64)), new Uint8Array(LIMITS.specBytes + 1));
    await assert.rejects(
      readSpec(store, { kind: "Deployment", ref }),
      (err: Error) => err instanceof TooLargeError && /over the limit of 1 MiB/.test(err.message),
    );
  } finally {
    await Deno.remove(root, { recursive: true });
  }
});

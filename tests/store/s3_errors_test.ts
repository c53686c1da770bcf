/**
 * How `S3Store` maps S3's failures (core/store/s3_store.ts `classify`): each error is produced by a
 * loopback HTTP proxy in front of moto that answers chosen requests with S3's XML error, so the
 * store parses a real error response; everything else reaches moto. Transient errors are
 * retried (the proxy counts the attempts) and end as `UnavailableError`; conditional conflicts
 * are `PreconditionFailedError` and are not retried by the store; a missing bucket and missing
 * credentials are permanent, with their hints.
 */

import assert from "node:assert/strict";
import { type CasObject, casUpdate } from "../../core/store/cas_update.ts";
import {
  PermanentStoreError,
  PreconditionFailedError,
  UnavailableError,
} from "../../core/kit/errors.ts";
import { S3Store } from "../../core/store/s3_store.ts";
import { encodeSpec, specKey, writeSpec } from "../../core/bucket/spec_objects.ts";
import { parseResource, type Service } from "../../core/model/resources.ts";
import { type HttpFaultProxy, httpFaultProxy } from "../support/fault_proxy.ts";
import { moto } from "../support/moto.ts";
import { podmin } from "../support/programs.ts";

const ATTEMPTS = 3;

async function setup(): Promise<{ store: S3Store; proxy: HttpFaultProxy; bucket: string }> {
  const m = await moto();
  await m.reset();
  const bucket = await m.createBucket();
  const proxy = httpFaultProxy(m.endpoint);
  const store = new S3Store({
    bucket,
    region: "us-east-1",
    endpoint: proxy.endpoint,
    retry: { attempts: ATTEMPTS, baseMs: 1, maxMs: 5 },
  });
  return { store, proxy, bucket };
}

const onKey = (key: string, method: string) => (r: { method: string; path: string }) =>
  r.method === method && r.path.split("?")[0].endsWith(`/${key}`);

/** The statuses the proxy answered for requests on `key`. */
const statuses = (proxy: HttpFaultProxy, key: string) =>
  proxy.seen.filter((s) => s.split(" ")[1].split("?")[0].endsWith(`/${key}`))
    .map((s) => Number(s.split(" ")[2]));

const text = (s: string) => new TextEncoder().encode(s);

for (
  const [status, code] of [
    [503, "SlowDown"],
    [500, "InternalError"],
    [429, "TooManyRequests"],
    [409, "OperationAborted"],
  ] as const
) {
  Deno.test(`s3 errors [moto + proxy]: ${status} ${code} is transient: retried, then UnavailableError`, async () => {
    const { store, proxy } = await setup();
    try {
      await store.put("k", text("v1"));
      // Once: the retry reaches moto and the read succeeds.
      proxy.inject({ status, code, match: onKey("k", "GET") });
      const got = await store.get("k");
      assert.ok(!got.notModified);
      assert.equal(new TextDecoder().decode(got.body), "v1");
      assert.deepEqual(statuses(proxy, "k").slice(-2), [status, 200]);
      // Always: every attempt fails, and the error says the bucket is unavailable.
      proxy.inject({ status, code, match: onKey("k", "PUT"), times: Infinity });
      const before = proxy.seen.length;
      await assert.rejects(store.put("k", text("v2")), (err) => {
        assert.ok(err instanceof UnavailableError, `${err}`);
        assert.match(
          (err as Error).message,
          code === "OperationAborted" ? /conflicting operation in progress on k/ : /unavailable/,
        );
        return true;
      });
      assert.equal(proxy.seen.length - before, ATTEMPTS, "one request per attempt");
    } finally {
      await proxy.close();
    }
  });
}

const counter: CasObject<number> = {
  key: "counter.json",
  parse: (b) => Number(new TextDecoder().decode(b)),
  serialize: (v) => text(String(v)),
  empty: () => 0,
};

Deno.test("s3 errors [moto + proxy]: 409 ConditionalRequestConflict is a lost conditional write: not retried by the store; casUpdate re-reads and wins", async () => {
  const { store, proxy } = await setup();
  try {
    const { etag } = await store.put(counter.key, counter.serialize(1));
    proxy.inject({
      status: 409,
      code: "ConditionalRequestConflict",
      match: onKey(counter.key, "PUT"),
    });
    const before = proxy.seen.length;
    await assert.rejects(
      store.put(counter.key, counter.serialize(2), { ifMatch: etag }),
      PreconditionFailedError,
    );
    assert.equal(proxy.seen.length - before, 1, "a lost race is not retried blindly");
    proxy.inject({
      status: 409,
      code: "ConditionalRequestConflict",
      match: onKey(counter.key, "PUT"),
    });
    const r = await casUpdate({ store, object: counter, mutate: (n) => n + 1 });
    assert.equal(r.conflicts, 1);
    assert.equal(r.value, 2);
    const got = await store.get(counter.key);
    assert.ok(!got.notModified);
    assert.equal(counter.parse(got.body), 2);
  } finally {
    await proxy.close();
  }
});

Deno.test("s3 errors [moto + proxy]: a put-if-absent answered 412 while HEAD finds nothing is retried, not taken as stored", async () => {
  const { store, proxy } = await setup();
  try {
    const spec = encodeSpec(parseResource({
      apiVersion: "podmin.dev/v1",
      kind: "Service",
      metadata: { name: "web" },
      spec: { selector: { app: "web" }, ports: [{ port: 80 }] },
    }) as Service);
    const key = specKey("Service", spec.ref);
    proxy.inject({ status: 412, code: "PreconditionFailed", match: onKey(key, "PUT") });
    await writeSpec(store, spec);
    assert.deepEqual(
      proxy.seen.filter((s) => s.includes(key)).map((s) => `${s.split(" ")[0]} ${s.split(" ")[2]}`),
      ["PUT 412", "HEAD 404", "PUT 200"],
    );
    const got = await store.get(key);
    assert.ok(!got.notModified);
    assert.deepEqual(got.body, spec.bytes);
  } finally {
    await proxy.close();
  }
});

Deno.test("s3 errors [moto + proxy]: NoSuchBucket is permanent (no retries) and says how to fix it", async () => {
  const { proxy } = await setup();
  try {
    const store = new S3Store({
      bucket: "podmin-no-such-bucket",
      region: "us-east-1",
      endpoint: proxy.endpoint,
      retry: { attempts: ATTEMPTS, baseMs: 1, maxMs: 5 },
    });
    await assert.rejects(store.get("deployments/index.json"), (err) => {
      assert.ok(err instanceof PermanentStoreError, `${err}`);
      assert.match((err as Error).message, /bucket of s3:\/\/podmin-no-such-bucket does not exist/);
      assert.match((err as PermanentStoreError).hint ?? "", /podmin setup/);
      return true;
    });
    assert.equal(proxy.seen.length, 1, "not retried");
  } finally {
    await proxy.close();
  }
});

for (
  const [code, expect, hint] of [
    ["AccessDenied", /access denied to k in s3:\/\//, /IAM policy/],
    ["RequestTimeTooSkewed", /clock is too far from S3's/, /set the clock right/],
    ["ExpiredToken", /S3 refused the credentials \(ExpiredToken\)/, /AWS_SESSION_TOKEN/],
    ["SignatureDoesNotMatch", /S3 refused the credentials \(SignatureDoesNotMatch\)/, /profile/],
  ] as const
) {
  Deno.test(`s3 errors [moto + proxy]: 403 ${code} is permanent (no retries) and names its cause`, async () => {
    const { store, proxy } = await setup();
    try {
      proxy.inject({ status: 403, code, match: onKey("k", "GET") });
      await assert.rejects(store.get("k"), (err) => {
        assert.ok(err instanceof PermanentStoreError, `${err}`);
        assert.match((err as Error).message, expect);
        assert.match((err as PermanentStoreError).hint ?? "", hint);
        return true;
      });
      assert.deepEqual(statuses(proxy, "k"), [403], "not retried");
    } finally {
      await proxy.close();
    }
  });
}

Deno.test("s3 errors [moto]: no credentials anywhere: the CLI says so and how to provide them", async () => {
  const m = await moto();
  const bucket = await m.createBucket();
  const home = await Deno.makeTempDir({ prefix: "podmin-nocreds-" });
  try {
    const r = await podmin(["--bucket", `s3://${bucket}`, "get", "deployments"], {
      AWS_ACCESS_KEY_ID: "",
      AWS_SECRET_ACCESS_KEY: "",
      AWS_PROFILE: "",
      HOME: home,
      AWS_CONFIG_FILE: `${home}/none`,
      AWS_SHARED_CREDENTIALS_FILE: `${home}/none`,
      AWS_EC2_METADATA_DISABLED: "true",
      AWS_ENDPOINT_URL: m.endpoint,
    });
    assert.equal(r.code, 1, r.stderr);
    assert.match(r.stderr, /no AWS credentials for s3:\/\//);
    assert.match(r.stderr, /hint: set AWS_PROFILE or AWS_ACCESS_KEY_ID/);
  } finally {
    await Deno.remove(home, { recursive: true });
  }
});

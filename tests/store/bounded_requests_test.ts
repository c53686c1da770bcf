/**
 * Every request is bounded (spec §2.3): against a loopback peer that accepts connections and never
 * answers, or that stalls mid-body, the store, the CLI, the agent and the registry fail with
 * Podmin's own error naming the endpoint and the bound, instead of hanging.
 *
 * Each failure comes after the bound really elapsed: the time taken lies between 0.8 and 3 times
 * the configured bound (attempts × per-attempt bound), so neither a timer that fires early nor one
 * ten times too long passes whatever the message says. The measured figures are printed.
 */

import assert from "node:assert/strict";
import { UnavailableError } from "../../core/kit/errors.ts";
import { silentLogger } from "../../core/kit/log.ts";
import { S3Store } from "../../core/store/s3_store.ts";
import { credentialChain, NoCredentialsError } from "../../core/aws/aws_credentials.ts";
import { AwsValueProvider } from "../../agent/secrets/value_provider.ts";
import { parseUpstreamRef } from "../../core/model/image_ref.ts";
import { ImageReader } from "../../registry/image_reader.ts";
import { UpstreamSource } from "../../registry/upstream.ts";
import { createRegistryHandler } from "../../registry/server.ts";
import { blackHole } from "../support/black_hole.ts";
import { podmin, spawnAgent } from "../support/programs.ts";

const CREDS = {
  AWS_ACCESS_KEY_ID: "testing",
  AWS_SECRET_ACCESS_KEY: "testing",
  AWS_REGION: "us-east-1",
};

/** Fails with `what` when `p` takes longer than `ms` (the old code hung forever). */
function within<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: ReturnType<typeof setTimeout>;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} still hung after ${ms} ms`)), ms);
  });
  return Promise.race([p, deadline]).finally(() => clearTimeout(timer));
}

/** The accepted range of a bounded failure's duration, as multiples of the configured bound. */
const EARLIEST = 0.8, LATEST = 3;

/**
 * The error `p` fails with and how long it took; fails when it succeeds, or when it is still
 * pending at twenty times `boundMs` (a hang: the range check would fail anyway).
 */
async function failure(
  p: Promise<unknown>,
  boundMs: number,
  what: string,
): Promise<{ err: unknown; ms: number }> {
  const t0 = performance.now();
  const err = await within(p, 20 * boundMs, what).then(
    () => assert.fail(`${what} succeeded`),
    (e) => e,
  );
  return { err, ms: performance.now() - t0 };
}

/** Asserts that `ms` lies within [EARLIEST, LATEST] × `boundMs`, and prints both. */
function assertNearBound(ms: number, boundMs: number, what: string): void {
  console.log(`  ${what}: failed after ${ms.toFixed(0)} ms (bound ${boundMs} ms)`);
  assert.ok(
    ms >= EARLIEST * boundMs && ms <= LATEST * boundMs,
    `${what} failed after ${ms.toFixed(0)} ms: not within ${EARLIEST}–${LATEST} × its bound ` +
      `of ${boundMs} ms`,
  );
}

// The in-process stores sign their requests too.
for (const [k, v] of Object.entries(CREDS)) Deno.env.set(k, v);

const opts = { sanitizeOps: false, sanitizeResources: false };

Deno.test("S3Store fails within its bound against a black hole", opts, async () => {
  const hole = blackHole();
  try {
    const store = new S3Store({
      bucket: "podmin-bh",
      region: "us-east-1",
      endpoint: hole.endpoint,
      requestTimeoutMs: 500,
      retry: { attempts: 2, baseMs: 10, maxMs: 20 },
    });
    const { err, ms } = await failure(store.get("deployments/index.json"), 1000, "get");
    assertNearBound(ms, 2 * 500, "black hole: get (2 attempts × 500 ms)");
    assert.ok(err instanceof UnavailableError, String(err));
    assert.match(err.message, new RegExp(`no answer from ${hole.endpoint} within 500 ms`));
    assert.equal(hole.accepted(), 2);
  } finally {
    hole.close();
  }
});

Deno.test("S3Store bounds a body that stalls mid-way", opts, async () => {
  const hole = blackHole("stall-body");
  try {
    const store = new S3Store({
      bucket: "podmin-bh",
      region: "us-east-1",
      endpoint: hole.endpoint,
      requestTimeoutMs: 500,
      retry: { attempts: 1, baseMs: 10, maxMs: 20 },
    });
    const { err, ms } = await failure(store.get("k"), 500, "get");
    assertNearBound(ms, 500, "stalled body: get");
    assert.ok(err instanceof UnavailableError, String(err));
    assert.match(err.message, /stalled for 500 ms/);

    const { body } = await within(store.getStream("k"), 5_000, "getStream");
    const read = (async () => {
      for await (const _ of body) { /* drain */ }
    })();
    const { err: streamErr, ms: streamMs } = await failure(read, 500, "stream read");
    assertNearBound(streamMs, 500, "stalled body: stream read");
    assert.ok(streamErr instanceof UnavailableError, String(streamErr));
    assert.match(streamErr.message, /stalled for 500 ms/);
  } finally {
    hole.close();
  }
});

Deno.test("podmin get deployments fails within its documented bound", opts, async () => {
  const hole = blackHole();
  try {
    // Documented bound: 4 attempts × PODMIN_REQUEST_TIMEOUT + backoff (< 1 s); the program's
    // start is counted too (from the first connection would leave out the first attempt's wait).
    const t0 = performance.now();
    const r = await within(
      podmin(["--bucket", "s3://podmin-bh", "get", "deployments"], {
        ...CREDS,
        AWS_ENDPOINT_URL: hole.endpoint,
        PODMIN_REQUEST_TIMEOUT: "1s",
      }),
      60_000,
      "podmin get deployments",
    );
    const ms = performance.now() - t0;
    assertNearBound(ms, 4 * 1000, `podmin get deployments (exit ${r.code}, 4 attempts × 1 s)`);
    assert.equal(hole.accepted(), 4, "four attempts");
    assert.notEqual(r.code, 0);
    assert.match(r.stderr, new RegExp(`no answer from ${hole.endpoint} within 1000 ms`));
    assert.doesNotMatch(r.stderr, /at .*\.ts:\d+/); // no stack trace
  } finally {
    hole.close();
  }
});

Deno.test(
  "the agent reports a black-holed bucket in its status within one bound",
  opts,
  async () => {
    const hole = blackHole();
    const base = await Deno.makeTempDir({ prefix: "podmin-bh-agent-" });
    const agent = spawnAgent([
      "run",
      "--bucket",
      "s3://podmin-bh",
      "--cluster",
      "test",
      "--nodegroup",
      "default",
      "--manifest-dir",
      `${base}/manifests`,
      "--secrets-dir",
      `${base}/secrets`,
      "--tls-dir",
      `${base}/tls`,
      "--state-dir",
      `${base}/state`,
      "--registry-listen",
      "off",
    ], { ...CREDS, AWS_ENDPOINT_URL: hole.endpoint, PODMIN_REQUEST_TIMEOUT: "3s" });
    try {
      // From the agent's first request: one bound (3 s) plus slack, not 4 attempts' worth.
      const deadline = Date.now() + 30_000;
      while (hole.accepted() === 0 && Date.now() < deadline) await sleep(50);
      assert.ok(hole.accepted() > 0, "the agent never connected");
      const t0 = performance.now();
      let status: { converged: boolean; errors: string[] } | undefined;
      while (performance.now() - t0 < 20 * 3_000) {
        try {
          status = JSON.parse(await Deno.readTextFile(`${base}/state/status.json`));
          break;
        } catch { /* not yet */ }
        await sleep(50);
      }
      const ms = performance.now() - t0;
      assert.ok(status, `no status.json ${ms.toFixed(0)} ms after the first request`);
      assertNearBound(ms, 3_000, "black hole: the agent's status (from its first request)");
      assert.equal(status.converged, false);
      assert.match(status.errors.join("\n"), /no answer from .* within 3000 ms/);
    } finally {
      agent.kill("SIGTERM");
      await agent.status;
      await agent.stderr.cancel().catch(() => {});
      hole.close();
      await Deno.remove(base, { recursive: true });
    }
  },
);

Deno.test("the registry answers 503 instead of hanging on a black-holed bucket", opts, async () => {
  const hole = blackHole();
  try {
    const store = new S3Store({
      bucket: "podmin-bh",
      region: "us-east-1",
      endpoint: hole.endpoint,
      requestTimeoutMs: 500,
      retry: { attempts: 1, baseMs: 10, maxMs: 20 },
    });
    const handler = createRegistryHandler({
      reader: new ImageReader({ store }),
      log: silentLogger,
    });
    const t0 = performance.now();
    const res = await within(
      handler(new Request("http://127.0.0.1/v2/apps/web/manifests/1.0")),
      10_000,
      "registry GET",
    );
    assertNearBound(performance.now() - t0, 500, "black hole: registry GET answered 503");
    assert.equal(res.status, 503);
    assert.equal((await res.json()).errors[0].code, "UNAVAILABLE");
  } finally {
    hole.close();
  }
});

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

Deno.test(
  "mirror: an upstream registry that never answers fails within the bound",
  opts,
  async () => {
    for (const mode of ["black-hole", "stall-body"] as const) {
      const hole = blackHole(mode);
      try {
        const src = new UpstreamSource({
          ref: parseUpstreamRef(`127.0.0.1:${hole.port}/library/web:1.0`),
          plainHttp: true,
          requestTimeoutMs: 500,
        });
        const { err, ms } = await failure(
          (async () => {
            const d = {
              mediaType: "application/octet-stream",
              digest: `sha256:${"0".repeat(64)}`,
              size: 1000,
            };
            if (mode === "black-hole") return await src.root();
            for await (const _ of await src.blob(d)) { /* drain */ }
          })(),
          500,
          `upstream ${mode}`,
        );
        assertNearBound(ms, 500, `upstream ${mode}`);
        assert.ok(err instanceof UnavailableError, String(err));
        assert.match(err.message, mode === "black-hole" ? /within 500 ms/ : /stalled for 500 ms/);
      } finally {
        hole.close();
      }
    }
  },
);

Deno.test(
  "Parameter Store and Secrets Manager reads fail within their bound (black hole, stalled answer)",
  opts,
  async () => {
    for (const mode of ["black-hole", "stall-body"] as const) {
      const hole = blackHole(mode);
      const saved = Deno.env.get("AWS_ENDPOINT_URL");
      Deno.env.set("AWS_ENDPOINT_URL", hole.endpoint); // the provider reads it when constructed
      try {
        const provider = new AwsValueProvider({ region: "us-east-1", requestTimeoutMs: 500 });
        // Each read: two attempts × 500 ms.
        const t0 = performance.now();
        const batch = await within(provider.fetchMany("ssm", ["/c/n/a/k"]), 20_000, "fetchMany");
        assertNearBound(performance.now() - t0, 2 * 500, `${mode}: SSM fetchMany`);
        const err = batch.get("/c/n/a/k");
        const { err: single, ms } = await failure(
          provider.fetch("secretsmanager", "/c/n/a/s"),
          2 * 500,
          "fetch",
        );
        assertNearBound(ms, 2 * 500, `${mode}: Secrets Manager fetch`);
        assert.equal(
          hole.accepted(),
          4,
          "each read tried twice (one retry on a transient failure)",
        );
        for (const e of [err, single]) {
          assert.ok(e instanceof UnavailableError, String(e));
          assert.match(
            e.message,
            mode === "black-hole"
              ? new RegExp(`no answer from ${hole.endpoint} within 500 ms`)
              : new RegExp(`answer from ${hole.endpoint} stalled for 500 ms`),
          );
        }
      } finally {
        if (saved === undefined) Deno.env.delete("AWS_ENDPOINT_URL");
        else Deno.env.set("AWS_ENDPOINT_URL", saved);
        hole.close();
      }
    }
  },
);

Deno.test(
  "instance credentials: a metadata endpoint that never answers fails within 1 s per request",
  opts,
  async () => {
    const hole = blackHole();
    try {
      const chain = credentialChain((n) =>
        ({ HOME: "/nonexistent", AWS_EC2_METADATA_SERVICE_ENDPOINT: hole.endpoint })[n]
      );
      const { err, ms } = await failure(chain(), 1000, "credentials");
      assertNearBound(ms, 1000, "black hole: instance credentials");
      assert.ok(err instanceof NoCredentialsError, String(err));
      assert.match(err.message, /EC2 instance metadata/);
      assert.equal(hole.accepted(), 1, "the token request, then no more");
    } finally {
      hole.close();
    }
  },
);

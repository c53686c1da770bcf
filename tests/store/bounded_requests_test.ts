/**
 * Every request is bounded (spec §2.3): against a loopback peer that accepts connections and never
 * answers, or that stalls mid-body, the store, the CLI, the agent and the registry fail with
 * Podmin's own error naming the endpoint and the bound, instead of hanging.
 *
 * Thresholds are the documented bound plus generous slack; the measured figures are printed.
 */

import assert from "node:assert/strict";
import { UnavailableError } from "../../core/errors.ts";
import { silentLogger } from "../../core/log.ts";
import { S3Store } from "../../core/s3_store.ts";
import { credentialChain, NoCredentialsError } from "../../core/aws_credentials.ts";
import { AwsValueProvider } from "../../agent/secrets/value_provider.ts";
import { parseUpstreamRef } from "../../core/image_ref.ts";
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
    const t0 = Date.now();
    const err = await within(store.get("deployments/index.json"), 15_000, "get").then(
      () => assert.fail("get succeeded"),
      (e) => e,
    );
    const ms = Date.now() - t0;
    console.log(`  black hole: get failed after ${ms} ms (2 attempts × 500 ms)`);
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
    const err = await within(store.get("k"), 15_000, "get").then(
      () => assert.fail("get succeeded"),
      (e) => e,
    );
    assert.ok(err instanceof UnavailableError, String(err));
    assert.match(err.message, /stalled for 500 ms/);

    const { body } = await within(store.getStream("k"), 15_000, "getStream");
    const read = (async () => {
      for await (const _ of body) { /* drain */ }
    })();
    const streamErr = await within(read, 15_000, "stream read").then(
      () => assert.fail("stream completed"),
      (e) => e,
    );
    assert.ok(streamErr instanceof UnavailableError, String(streamErr));
    assert.match(streamErr.message, /stalled for 500 ms/);
  } finally {
    hole.close();
  }
});

Deno.test("podmin get deployments fails within its documented bound", opts, async () => {
  const hole = blackHole();
  try {
    const t0 = Date.now();
    // Documented bound: 4 attempts × PODMIN_REQUEST_TIMEOUT + backoff (< 1 s).
    const r = await within(
      podmin(["--bucket", "s3://podmin-bh", "get", "deployments"], {
        ...CREDS,
        AWS_ENDPOINT_URL: hole.endpoint,
        PODMIN_REQUEST_TIMEOUT: "1s",
      }),
      60_000,
      "podmin get deployments",
    );
    const ms = Date.now() - t0;
    console.log(`  black hole: podmin get deployments exited ${r.code} after ${ms} ms`);
    assert.notEqual(r.code, 0);
    assert.match(r.stderr, new RegExp(`no answer from ${hole.endpoint} within 1000 ms`));
    assert.doesNotMatch(r.stderr, /at .*\.ts:\d+/); // no stack trace
    assert.ok(ms < 4 * 1000 + 15_000, `took ${ms} ms`);
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
      const t0 = Date.now();
      let status: { converged: boolean; errors: string[] } | undefined;
      while (Date.now() - t0 < 3_000 + 6_000) {
        try {
          status = JSON.parse(await Deno.readTextFile(`${base}/state/status.json`));
          break;
        } catch { /* not yet */ }
        await sleep(100);
      }
      const ms = Date.now() - t0;
      assert.ok(status, `no status.json ${ms} ms after the first request`);
      console.log(
        `  black hole: agent status reported the outage ${ms} ms after its first request`,
      );
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
    const res = await within(
      handler(new Request("http://127.0.0.1/v2/apps/web/manifests/1.0")),
      15_000,
      "registry GET",
    );
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
        const err = await within(
          (async () => {
            const d = {
              mediaType: "application/octet-stream",
              digest: `sha256:${"0".repeat(64)}`,
              size: 1000,
            };
            if (mode === "black-hole") return await src.root();
            for await (const _ of await src.blob(d)) { /* drain */ }
          })(),
          15_000,
          `upstream ${mode}`,
        ).then(() => assert.fail("succeeded"), (e) => e);
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
        const t0 = Date.now();
        const batch = await within(provider.fetchMany("ssm", ["/c/n/a/k"]), 15_000, "fetchMany");
        const err = batch.get("/c/n/a/k");
        const single = await within(provider.fetch("secretsmanager", "/c/n/a/s"), 15_000, "fetch")
          .then(() => assert.fail("fetch succeeded"), (e) => e);
        console.log(`  ${mode}: both reads failed after ${Date.now() - t0} ms`);
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
      const t0 = Date.now();
      const err = await within(chain(), 10_000, "credentials").then(
        () => assert.fail("credentials resolved"),
        (e) => e,
      );
      const ms = Date.now() - t0;
      console.log(`  black hole: instance credentials failed after ${ms} ms (bound 1000 ms)`);
      assert.ok(err instanceof NoCredentialsError, String(err));
      assert.match(err.message, /EC2 instance metadata/);
      assert.equal(hole.accepted(), 1, "the token request, then no more");
    } finally {
      hole.close();
    }
  },
);

/**
 * The agent logs a persisting problem once per kind, not once per pass, even when its detail
 * alternates (a peer that resets one connection and answers 503 to the next).
 */

import assert from "node:assert/strict";
import * as path from "node:path";
import { DeploymentsPass } from "../../agent/deployments/deployments_pass.ts";
import { SecretsSync } from "../../agent/secrets/secrets_sync.ts";
import { AwsValueProvider } from "../../agent/secrets/value_provider.ts";
import { createLogger } from "../../core/kit/log.ts";
import { S3Store } from "../../core/store/s3_store.ts";
import { blackHole } from "../support/black_hole.ts";

Deno.test("agent log: an outage whose error alternates is logged once, not once per pass", {
  sanitizeOps: false,
  sanitizeResources: false,
}, async () => {
  for (const [k, v] of Object.entries({ AWS_ACCESS_KEY_ID: "t", AWS_SECRET_ACCESS_KEY: "t" })) {
    Deno.env.set(k, v);
  }
  const peer = blackHole("alternate");
  const tmp = await Deno.makeTempDir({ prefix: "podmin-agent-log-" });
  try {
    const lines: { level: string; msg: string }[] = [];
    const log = createLogger("agent", { sink: (l) => lines.push(JSON.parse(l)) });
    const store = new S3Store({
      bucket: "podmin-log",
      region: "us-east-1",
      endpoint: peer.endpoint,
      requestTimeoutMs: 2_000,
      retry: { attempts: 1, baseMs: 10, maxMs: 20 },
    });
    const loop = new DeploymentsPass({
      store,
      nodeGroup: "workers",
      manifestDir: path.join(tmp, "manifests"),
      secretsDir: path.join(tmp, "secrets"),
      tlsDir: path.join(tmp, "tls"),
      secrets: new SecretsSync({
        cluster: "test",
        secretsDir: path.join(tmp, "secrets"),
        provider: new AwsValueProvider({ region: "us-east-1" }),
        refreshMs: 60_000,
        log,
      }),
      log,
    });
    const seen = new Set<string>();
    for (let pass = 0; pass < 8; pass++) {
      const { status } = await loop.pass();
      assert.equal(status.converged, false);
      seen.add(status.errors.join("\n"));
    }
    assert.ok(seen.size >= 2, `the peer's errors should alternate: ${[...seen].join(" | ")}`);
    const errors = lines.filter((l) => l.level === "error");
    assert.equal(errors.length, 1, JSON.stringify(errors));
  } finally {
    peer.close();
    await Deno.remove(tmp, { recursive: true });
  }
});

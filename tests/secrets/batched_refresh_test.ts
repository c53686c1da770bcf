/**
 * Provider calls within quotas (issue 18): a node's due Parameter Store values are read with
 * `GetParameters`, 10 names per call across all its Deployments; refreshes are spread with
 * jitter; throttling keeps the last good values and backs off. Against moto, through a counting
 * HTTP proxy the test owns (it can also answer the way Parameter Store answers when throttling).
 */

import { workerDeployment } from "../support/fixtures.ts";
import assert from "node:assert/strict";
import * as path from "node:path";
import { SecretsSync } from "../../agent/secrets/secrets_sync.ts";
import { AwsValueProvider } from "../../agent/secrets/value_provider.ts";
import { silentLogger } from "../../core/kit/log.ts";
import { deleteParameter, moto, putParameter, putSecret } from "../support/moto.ts";

function deployment(name: string, secrets: { key: string; from: "ssm" | "secretsmanager" }[]) {
  return workerDeployment(name, { secrets });
}

/** An HTTP proxy to moto that counts calls by X-Amz-Target and can throttle one of them. */
function countingProxy(target: string) {
  const calls = new Map<string, number>();
  let throttle: string | undefined;
  const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen() {} }, async (req) => {
    const op = req.headers.get("x-amz-target")?.split(".").pop() ?? "other";
    calls.set(op, (calls.get(op) ?? 0) + 1);
    if (op === throttle) {
      await req.body?.cancel();
      return new Response(
        JSON.stringify({ __type: "ThrottlingException", message: "Rate exceeded" }),
        { status: 400, headers: { "content-type": "application/x-amz-json-1.1" } },
      );
    }
    const url = new URL(req.url);
    const res = await fetch(`${target}${url.pathname}${url.search}`, {
      method: req.method,
      headers: req.headers,
      body: req.body,
    });
    return new Response(res.body, { status: res.status, headers: res.headers });
  });
  return {
    endpoint: `http://127.0.0.1:${server.addr.port}`,
    count: (op: string) => calls.get(op) ?? 0,
    reset: () => calls.clear(),
    throttle(op: string | undefined) {
      throttle = op;
    },
    close: () => server.shutdown(),
  };
}

Deno.test("secrets [moto]: due Parameter Store values are batched 10 per call across Deployments; throttling keeps the last good values", async () => {
  const m = await moto();
  await m.reset();
  const proxy = countingProxy(m.endpoint);
  const saved = Deno.env.get("AWS_ENDPOINT_URL");
  const tmp = await Deno.makeTempDir({ prefix: "podmin-batch-" });
  try {
    const keysA = Array.from({ length: 8 }, (_, i) => ({ key: `a${i}`, from: "ssm" as const }));
    const keysB = Array.from({ length: 8 }, (_, i) => ({ key: `b${i}`, from: "ssm" as const }));
    const keysC = [
      ...Array.from({ length: 4 }, (_, i) => ({ key: `c${i}`, from: "ssm" as const })),
      { key: "token", from: "secretsmanager" as const },
    ];
    const ds = [deployment("a", keysA), deployment("b", keysB), deployment("c", keysC)];
    for (const [d, keys] of [["a", keysA], ["b", keysB], ["c", keysC]] as const) {
      for (const k of keys) {
        if (k.from === "ssm") await putParameter(`/test/default/${d}/${k.key}`, `${d}-${k.key}-1`);
        else await putSecret(`/test/default/${d}/${k.key}`, "tok-1");
      }
    }
    Deno.env.set("AWS_ENDPOINT_URL", proxy.endpoint);
    const refreshMs = 60_000;
    const secrets = new SecretsSync({
      cluster: "test",
      secretsDir: path.join(tmp, "secrets"),
      provider: new AwsValueProvider({ region: "us-east-1" }),
      refreshMs,
      retryMs: 1_000,
      random: () => 0, // jitter at its low end: refresh after 0.8 × the interval
      log: silentLogger,
    });
    const t0 = 1_000_000;
    let r = await secrets.sync(ds, t0);
    assert.deepEqual(r.errors, []);
    assert.deepEqual([...r.ready].sort(), ["default/a", "default/b", "default/c"]);
    // 20 parameters: 2 GetParameters calls (not 20 GetParameter); the secret: 1 call.
    assert.equal(proxy.count("GetParameters"), 2);
    assert.equal(proxy.count("GetParameter"), 0);
    assert.equal(proxy.count("GetSecretValue"), 1);
    const file = path.join(tmp, "secrets", "default_b", "b3");
    assert.equal(await Deno.readTextFile(file), "b-b3-1");

    // Not due yet (the jittered refresh is at 0.8 × the interval): no call at all.
    proxy.reset();
    r = await secrets.sync(ds, t0 + 0.79 * refreshMs);
    assert.equal(proxy.count("GetParameters") + proxy.count("GetSecretValue"), 0);

    // Due, but Parameter Store throttles: every value stays as it was and the Pods stay ready.
    await putParameter("/test/default/b/b3", "b-b3-2");
    proxy.throttle("GetParameters");
    r = await secrets.sync(ds, t0 + 0.81 * refreshMs);
    assert.match(r.errors.join("\n"), /Rate exceeded|Throttling/);
    assert.equal(r.errors.filter((e) => /default\/(a|b|c)/.test(e)).length, 3);
    assert.deepEqual([...r.ready].sort(), ["default/a", "default/b", "default/c"]);
    assert.equal(await Deno.readTextFile(file), "b-b3-1");
    // Backing off: 1 s after a failure is too early for a second try (0.5–1 × the first retry).
    proxy.reset();
    await secrets.sync(ds, t0 + 0.81 * refreshMs + 400);
    assert.equal(proxy.count("GetParameters"), 0);

    // Healed: the change arrives; a missing parameter holds back only its own Deployment.
    proxy.throttle(undefined);
    await deleteParameter("/test/default/a/a0");
    r = await secrets.sync(ds, t0 + 0.81 * refreshMs + 2_000);
    assert.equal(await Deno.readTextFile(file), "b-b3-2");
    assert.equal(r.errors.length, 1, r.errors.join("\n"));
    assert.match(r.errors[0], /values of default\/a: .*\/test\/default\/a\/a0 does not exist/);
  } finally {
    if (saved === undefined) Deno.env.delete("AWS_ENDPOINT_URL");
    else Deno.env.set("AWS_ENDPOINT_URL", saved);
    await proxy.close();
    await Deno.remove(tmp, { recursive: true });
  }
});

/**
 * Agent failure behaviour: local faults in the values directory never crash
 * a pass or hold back Deployments without values; an index entry that reuses
 * another entry's spec digest is rejected even when that spec is cached.
 */

import assert from "node:assert/strict";
import * as path from "node:path";
import { DeploymentsPass } from "../../agent/deployments/deployments_pass.ts";
import { SecretsSync } from "../../agent/secrets/secrets_sync.ts";
import { AwsValueProvider } from "../../agent/secrets/value_provider.ts";
import { applyResources } from "../../cli/desired_state.ts";
import { DEPLOYMENT_INDEX } from "../../core/bucket/bucket_layout.ts";
import {
  parseDeploymentIndex,
  serializeDeploymentIndex,
} from "../../core/bucket/deployment_index.ts";
import { FsStore } from "../../core/store/fs_store.ts";
import { silentLogger } from "../../core/kit/log.ts";
import { getIfExists } from "../../core/store/object_store.ts";
import { parseResource } from "../../core/model/resources.ts";
import { moto, putParameter } from "../support/moto.ts";

const deployment = (name: string, secrets?: { key: string }[]) =>
  parseResource({
    apiVersion: "podmin.dev/v1",
    kind: "Deployment",
    metadata: { name },
    spec: {
      nodeGroup: "workers",
      ...(secrets ? { secrets } : {}),
      template: { spec: { containers: [{ name: "c", image: `r/apps/${name}:1` }] } },
    },
  });

function node(tmp: string, secretsDir = path.join(tmp, "secrets")) {
  const store = new FsStore({ root: path.join(tmp, "bucket"), durable: false });
  const loop = new DeploymentsPass({
    store,
    nodeGroup: "workers",
    manifestDir: path.join(tmp, "manifests"),
    secretsDir,
    tlsDir: path.join(tmp, "tls"),
    secrets: new SecretsSync({
      cluster: "test",
      secretsDir,
      provider: new AwsValueProvider({ region: "us-east-1" }),
      refreshMs: 60_000,
      retryMs: 0,
      log: silentLogger,
    }),
    log: silentLogger,
  });
  return { store, loop, manifests: path.join(tmp, "manifests") };
}

Deno.test("agent [moto SSM]: a broken values directory is reported, not fatal, and repaired", async () => {
  const m = await moto();
  await m.reset();
  await putParameter("/test/default/web/token", "t1");
  const tmp = await Deno.makeTempDir({ prefix: "podmin-agent-faults-" });
  try {
    // The secrets root is a file: values cannot be written; the plain Deployment still converges.
    const blocked = path.join(tmp, "not-a-dir");
    await Deno.writeTextFile(blocked, "x");
    const a = node(tmp, blocked);
    await applyResources({
      store: a.store,
      resources: [deployment("web", [{ key: "token" }]), deployment("plain")],
    });
    const first = await a.loop.pass();
    assert.match(first.status.errors.join("\n"), /values directory .*not-a-dir/);
    assert.deepEqual(first.status.pending.map((p) => p.deployment), ["default/web"]);
    await Deno.stat(path.join(a.manifests, "podmin_default_plain.json"));

    // A dangling ..data (generation deleted by hand) is treated as no generation and rewritten.
    const b = node(tmp);
    const ok = await b.loop.pass();
    assert.ok(ok.status.converged, ok.status.errors.join("\n"));
    const podDir = path.join(tmp, "secrets", "default_web");
    const gen = await Deno.readLink(path.join(podDir, "..data"));
    await Deno.remove(path.join(podDir, gen), { recursive: true });
    const c = node(tmp); // a restarted agent: refreshes at once
    const repaired = await c.loop.pass();
    assert.ok(repaired.status.converged, repaired.status.errors.join("\n"));
    assert.equal(await Deno.readTextFile(path.join(podDir, "token")), "t1");
  } finally {
    await Deno.remove(tmp, { recursive: true });
  }
});

Deno.test("agent: an index entry reusing another entry's (cached) spec digest is rejected", async () => {
  const tmp = await Deno.makeTempDir({ prefix: "podmin-agent-reuse-" });
  try {
    const a = node(tmp);
    await applyResources({ store: a.store, resources: [deployment("web")] });
    assert.ok((await a.loop.pass()).status.converged); // web's spec is now cached
    const index = parseDeploymentIndex((await getIfExists(a.store, DEPLOYMENT_INDEX))!.body);
    index.deployments.push({ ...index.deployments[0], name: "api" });
    index.generation++;
    await a.store.put(DEPLOYMENT_INDEX, serializeDeploymentIndex(index));
    const { status } = await a.loop.pass();
    assert.match(
      status.errors.join("\n"),
      /default\/api: spec sha256:[0-9a-f]+ does not describe default\/api/,
    );
    await assert.rejects(
      Deno.stat(path.join(a.manifests, "podmin_default_api.json")),
      Deno.errors.NotFound,
    );
  } finally {
    await Deno.remove(tmp, { recursive: true });
  }
});

/**
 * The agent's secrets loop against moto's Parameter Store and Secrets Manager:
 * values land in immutable generations swapped atomically; a provider failure
 * keeps the last good values; undeclared or missing values hold a Pod back.
 */

import assert from "node:assert/strict";
import * as path from "node:path";
import { DeploymentsPass } from "../../agent/deployments/deployments_pass.ts";
import { SecretsSync, VERIFY_MS } from "../../agent/secrets/secrets_sync.ts";
import { AwsValueProvider } from "../../agent/secrets/value_provider.ts";
import { applyResources, deleteResource } from "../../cli/desired_state.ts";
import { silentLogger } from "../../core/kit/log.ts";
import { type Deployment, parseResource } from "../../core/model/resources.ts";
import { openStore } from "../../core/store/store_url.ts";
import { deleteParameter, moto, putParameter, putSecret } from "../support/moto.ts";

const web = parseResource({
  apiVersion: "podmin.dev/v1",
  kind: "Deployment",
  metadata: { name: "web" },
  spec: {
    nodeGroup: "workers",
    secrets: [{ key: "db-password", from: "ssm" }, { key: "api-token", from: "secretsmanager" }],
    template: { spec: { containers: [{ name: "web", image: "r/apps/web:1" }] } },
  },
});

Deno.test("secrets loop [moto]: generations swap atomically on change; failures keep the last good values", async () => {
  const m = await moto();
  await m.reset();
  const bucket = await m.createBucket();
  const store = openStore(`s3://${bucket}`);
  const tmp = await Deno.makeTempDir({ prefix: "podmin-secrets-" });
  try {
    await putParameter("/test/default/web/db-password", "v1");
    await putSecret("/test/default/web/api-token", "token-1");
    await applyResources({ store, resources: [web] });

    const secretsDir = path.join(tmp, "secrets");
    const manifests = path.join(tmp, "manifests");
    const loop = new DeploymentsPass({
      store,
      nodeGroup: "workers",
      manifestDir: manifests,
      secretsDir,
      tlsDir: path.join(tmp, "tls"),
      secrets: new SecretsSync({
        cluster: "test",
        secretsDir,
        provider: new AwsValueProvider({ region: "us-east-1" }),
        refreshMs: 0, // refresh on every pass
        retryMs: 0,
        log: silentLogger,
      }),
      log: silentLogger,
    });
    const podDir = path.join(secretsDir, "default_web");

    let { status } = await loop.pass();
    assert.ok(status.converged, status.errors.join("\n"));
    assert.equal(await Deno.readTextFile(path.join(podDir, "db-password")), "v1");
    assert.equal(await Deno.readTextFile(path.join(podDir, "api-token")), "token-1");
    assert.equal(await Deno.readLink(path.join(podDir, "db-password")), "..data/db-password");
    const gen1 = await Deno.readLink(path.join(podDir, "..data"));
    assert.equal((await Deno.stat(path.join(podDir, gen1, "db-password"))).mode! & 0o777, 0o444);
    const pod = JSON.parse(
      await Deno.readTextFile(path.join(manifests, "podmin_default_web.json")),
    );
    const vol = pod.spec.volumes.find((v: { name: string }) => v.name === "podmin-values");
    assert.deepEqual(vol.hostPath, { path: podDir, type: "Directory" });
    assert.ok(
      pod.spec.containers[0].volumeMounts.some((v: { mountPath: string; readOnly: boolean }) =>
        v.mountPath === "/var/run/secrets/podmin.dev/values" && v.readOnly
      ),
    );

    // Unchanged values: no new generation.
    await loop.pass();
    assert.equal(await Deno.readLink(path.join(podDir, "..data")), gen1);

    // Changed in SSM: a new generation replaces the old one.
    await putParameter("/test/default/web/db-password", "v2");
    ({ status } = await loop.pass());
    assert.ok(status.converged);
    const gen2 = await Deno.readLink(path.join(podDir, "..data"));
    assert.notEqual(gen2, gen1);
    assert.equal(await Deno.readTextFile(path.join(podDir, "db-password")), "v2");
    assert.equal(await Deno.readTextFile(path.join(podDir, "api-token")), "token-1");
    await assert.rejects(Deno.stat(path.join(podDir, gen1)), Deno.errors.NotFound);

    // Provider failure: the last good values stay, the Pod stays, the error is reported.
    await deleteParameter("/test/default/web/db-password");
    ({ status } = await loop.pass());
    assert.equal(status.converged, false);
    assert.match(
      status.errors.join("\n"),
      /values of default\/web: Parameter Store \/test\/default\/web\/db-password does not exist/,
    );
    assert.equal(await Deno.readTextFile(path.join(podDir, "db-password")), "v2");
    assert.equal(await Deno.readLink(path.join(podDir, "..data")), gen2);
    assert.ok(await Deno.stat(path.join(manifests, "podmin_default_web.json")));

    // A Deployment whose values were never fetched is held back, not started without them.
    const api = parseResource({
      apiVersion: "podmin.dev/v1",
      kind: "Deployment",
      metadata: { name: "api" },
      spec: {
        nodeGroup: "workers",
        secrets: [{ key: "missing", from: "ssm" }],
        template: { spec: { containers: [{ name: "api", image: "r/apps/api:1" }] } },
      },
    });
    await putParameter("/test/default/web/db-password", "v3");
    await applyResources({ store, resources: [api] });
    ({ status } = await loop.pass());
    assert.deepEqual(status.pending.map((p) => p.deployment), ["default/api"]);
    await assert.rejects(
      Deno.stat(path.join(manifests, "podmin_default_api.json")),
      Deno.errors.NotFound,
    );
    assert.equal(await Deno.readTextFile(path.join(podDir, "db-password")), "v3");

    // Deleted: the manifest goes, and its values go with it (after it, in the same pass).
    await deleteResource({ store, kind: "Deployment", namespace: "default", name: "web" });
    ({ status } = await loop.pass());
    await assert.rejects(
      Deno.stat(path.join(manifests, "podmin_default_web.json")),
      Deno.errors.NotFound,
    );
    await assert.rejects(Deno.stat(podDir), Deno.errors.NotFound);
  } finally {
    await Deno.remove(tmp, { recursive: true });
  }
});

Deno.test("secrets loop [moto]: the check every verifyMs enforces the values dir mode and repairs the layout (passes between touch no file); a symlinked Pod dir is left alone", async () => {
  const m = await moto();
  await m.reset();
  const tmp = await Deno.makeTempDir({ prefix: "podmin-secrets-" });
  try {
    await putParameter("/test/default/web/db-password", "v1");
    await putSecret("/test/default/web/api-token", "token-1");
    const secretsDir = path.join(tmp, "secrets");
    await Deno.mkdir(secretsDir, { mode: 0o755 }); // pre-existing, too open
    await Deno.chmod(secretsDir, 0o755);
    const sync = new SecretsSync({
      cluster: "test",
      secretsDir,
      provider: new AwsValueProvider({ region: "us-east-1" }),
      refreshMs: 3_600_000, // no refetch: later passes only verify
      log: silentLogger,
    });
    const deployment = web as Deployment;
    const t0 = Date.now();
    let r = await sync.sync([deployment], t0);
    assert.ok(r.ready.has("default/web"), r.errors.join("\n"));
    assert.equal((await Deno.stat(secretsDir)).mode! & 0o777, 0o700);

    // Loosened by hand, and a key link lost (as by a crash between swap and links).
    await Deno.chmod(secretsDir, 0o755);
    const podDir = path.join(secretsDir, "default_web");
    await Deno.remove(path.join(podDir, "db-password"));
    // A pass before the next check touches no file: the damage is still there.
    r = await sync.sync([deployment], t0 + VERIFY_MS - 1);
    assert.ok(r.ready.has("default/web"), r.errors.join("\n"));
    assert.equal((await Deno.stat(secretsDir)).mode! & 0o777, 0o755);
    await assert.rejects(Deno.stat(path.join(podDir, "db-password")), Deno.errors.NotFound);
    // The check repairs both.
    r = await sync.sync([deployment], t0 + VERIFY_MS);
    assert.ok(r.ready.has("default/web"), r.errors.join("\n"));
    assert.equal((await Deno.stat(secretsDir)).mode! & 0o777, 0o700);
    assert.equal(await Deno.readTextFile(path.join(podDir, "db-password")), "v1");
    // So does a restart (a new process fetches and checks on its first pass).
    await Deno.remove(path.join(podDir, "db-password"));
    const restarted = new SecretsSync({
      cluster: "test",
      secretsDir,
      provider: new AwsValueProvider({ region: "us-east-1" }),
      refreshMs: 3_600_000,
      log: silentLogger,
    });
    r = await restarted.sync([deployment], t0 + VERIFY_MS + 1);
    assert.ok(r.ready.has("default/web"), r.errors.join("\n"));
    assert.equal(await Deno.readTextFile(path.join(podDir, "db-password")), "v1");

    // The Pod dir replaced by a symlink to another directory: reported, not followed.
    const other = path.join(tmp, "other");
    await Deno.mkdir(path.join(other, "sub"), { recursive: true });
    await Deno.writeTextFile(path.join(other, "important.txt"), "keep");
    await Deno.remove(podDir, { recursive: true });
    await Deno.symlink(other, podDir);
    r = await sync.sync([deployment], t0 + 2 * VERIFY_MS);
    assert.ok(!r.ready.has("default/web"));
    assert.match(r.errors.join("\n"), /default_web is a symlink/);
    await sync.prune(new Set());
    const names = (await Array.fromAsync(Deno.readDir(other))).map((e) => e.name).sort();
    assert.deepEqual(names, ["important.txt", "sub"]);
  } finally {
    await Deno.remove(tmp, { recursive: true });
  }
});

Deno.test("secrets loop [moto]: a value over the 64 KiB limit is refused and not written", async () => {
  const m = await moto();
  await m.reset();
  const tmp = await Deno.makeTempDir({ prefix: "podmin-secrets-" });
  try {
    await putParameter("/test/default/web/db-password", "v1");
    await putSecret("/test/default/web/api-token", "t".repeat(100 * 1024));
    const sync = new SecretsSync({
      cluster: "test",
      secretsDir: path.join(tmp, "secrets"),
      provider: new AwsValueProvider({ region: "us-east-1" }),
      refreshMs: 0,
      log: silentLogger,
    });
    const r = await sync.sync([web as Deployment]);
    assert.ok(!r.ready.has("default/web"));
    assert.match(
      r.errors.join("\n"),
      /value api-token \(secretsmanager\) is 100 KiB, over the limit of 64 KiB/,
    );
    await assert.rejects(Deno.stat(path.join(tmp, "secrets", "default_web")), Deno.errors.NotFound);
  } finally {
    await Deno.remove(tmp, { recursive: true });
  }
});

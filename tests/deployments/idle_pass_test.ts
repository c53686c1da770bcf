/**
 * The agent's idle pass (spec §7.1): on a not-modified index after a converged pass, the agent
 * reads no spec, renders nothing and does not touch the manifest directory; the periodic full
 * scan still repairs a manifest deleted by hand, and a changed index is acted on at once.
 */

import assert from "node:assert/strict";
import * as path from "node:path";
import { DeploymentsPass } from "../../agent/deployments/deployments_pass.ts";
import { SecretsSync } from "../../agent/secrets/secrets_sync.ts";
import { AwsValueProvider } from "../../agent/secrets/value_provider.ts";
import { applyResources } from "../../cli/desired_state.ts";
import { FsStore } from "../../core/store/fs_store.ts";
import { silentLogger } from "../../core/kit/log.ts";
import { parseResource } from "../../core/model/resources.ts";

const deployment = (name: string) =>
  parseResource({
    apiVersion: "podmin.dev/v1",
    kind: "Deployment",
    metadata: { name },
    spec: {
      nodeGroup: "workers",
      template: { spec: { containers: [{ name: "c", image: `r/apps/${name}:1` }] } },
    },
  });

/** A store that counts the reads of spec objects. */
class CountingStore extends FsStore {
  specReads = 0;
  override get(key: string, options?: { ifNoneMatch?: string; maxBytes?: number }) {
    if (key.startsWith("deployments/specs/")) this.specReads++;
    return super.get(key, options);
  }
}

Deno.test("agent: an idle pass reads no spec and no manifest; the full scan repairs", async () => {
  const tmp = await Deno.makeTempDir({ prefix: "podmin-idle-" });
  try {
    let clock = 1_000_000;
    const store = new CountingStore({ root: path.join(tmp, "bucket"), durable: false });
    const manifests = path.join(tmp, "manifests");
    const loop = new DeploymentsPass({
      store,
      nodeGroup: "workers",
      manifestDir: manifests,
      secretsDir: path.join(tmp, "secrets"),
      tlsDir: path.join(tmp, "tls"),
      secrets: new SecretsSync({
        cluster: "test",
        secretsDir: path.join(tmp, "secrets"),
        provider: new AwsValueProvider({ region: "us-east-1" }),
        refreshMs: 60_000,
        log: silentLogger,
      }),
      log: silentLogger,
      fullScanMs: 60_000,
      now: () => clock,
    });
    await applyResources({ store, resources: [deployment("web"), deployment("api")] });
    const first = await loop.pass();
    assert.ok(first.status.converged, first.status.errors.join("\n"));
    assert.equal(store.specReads, 2);
    const web = path.join(manifests, "podmin_default_web.json");
    await Deno.stat(web);

    // Idle: the directory is moved away entirely; a pass that scanned or converged it would
    // recreate it (and rewrite both manifests). It does neither, reads no spec, and reports
    // the last converged state.
    const moved = path.join(tmp, "moved");
    await Deno.rename(manifests, moved);
    clock += 59_000;
    const idle = await loop.pass();
    assert.ok(idle.status.converged);
    assert.deepEqual(idle.status.written, first.status.written);
    assert.equal(store.specReads, 2);
    await assert.rejects(Deno.stat(manifests), Deno.errors.NotFound);
    await Deno.rename(moved, manifests);

    // A manifest deleted by hand stays deleted while idle, and is repaired by the full scan.
    await Deno.remove(web);
    clock += 500;
    await loop.pass();
    await assert.rejects(Deno.stat(web), Deno.errors.NotFound);
    clock += 1_000; // 60.5 s after the last full pass
    const full = await loop.pass();
    assert.ok(full.status.converged, full.status.errors.join("\n"));
    await Deno.stat(web);
    assert.equal(store.specReads, 2, "specs stay cached across full scans");

    // A changed index is acted on at the next pass, idle or not.
    await applyResources({ store, resources: [deployment("db")] });
    clock += 1_000;
    const changed = await loop.pass();
    assert.ok(changed.status.written.includes("podmin_default_db.json"));
    assert.equal(store.specReads, 3);
  } finally {
    await Deno.remove(tmp, { recursive: true });
  }
});

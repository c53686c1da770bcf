/**
 * Surge across an agent restart and a bucket outage (spec §7.1, "Surge"): the deployments pass on
 * a real bucket (file store) and manifest directory, with kubelet's view given as the Pods API
 * watch hands it over. A restarted agent resumes from the slots on disk: it removes nothing while
 * its view is not whole, observes the new Pod's Ready streak again, then hands over; a failed
 * index read mid-surge leaves both Pods; a change of `spec.rollout` alone restarts nothing.
 */

import assert from "node:assert/strict";
import * as path from "node:path";
import { rolloutDeployment } from "../support/fixtures.ts";
import { DeploymentsPass, type PodsView } from "../../agent/deployments/deployments_pass.ts";
import { SecretsSync } from "../../agent/secrets/secrets_sync.ts";
import { AwsValueProvider } from "../../agent/secrets/value_provider.ts";
import type { PodInfo } from "../../agent/discovery/pod_proto.ts";
import { applyResources } from "../../cli/desired_state.ts";
import { FsStore } from "../../core/store/fs_store.ts";
import { UnavailableError } from "../../core/kit/errors.ts";
import { silentLogger } from "../../core/kit/log.ts";

const web = (tag: string, rollout: Record<string, unknown> = { minReadySeconds: 3 }) =>
  rolloutDeployment(tag, rollout);

/** A file store whose reads fail while `down`. */
class FlakyStore extends FsStore {
  down = false;
  override get(key: string, options?: { ifNoneMatch?: string; maxBytes?: number }) {
    if (this.down) return Promise.reject(new UnavailableError("bucket unreachable (test)"));
    return super.get(key, options);
  }
}

Deno.test("surge: a restarted agent resumes from disk; an outage mid-surge removes nothing", async () => {
  const tmp = await Deno.makeTempDir({ prefix: "podmin-surge-" });
  try {
    let clock = Date.now();
    const store = new FlakyStore({ root: path.join(tmp, "bucket"), durable: false });
    const manifests = path.join(tmp, "manifests");
    let view: PodsView = { synced: true, pods: [] };
    const agent = () =>
      new DeploymentsPass({
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
        pods: () => view,
        log: silentLogger,
        now: () => clock,
      });
    const files = async () =>
      (await Array.fromAsync(Deno.readDir(manifests))).map((e) => e.name).sort();
    const specOf = async (file: string) =>
      JSON.parse(await Deno.readTextFile(path.join(manifests, file))).metadata.annotations[
        "podmin.dev/spec"
      ] as string;
    const pod = (spec: string, ready: boolean): PodInfo => ({
      namespace: "default",
      name: "web",
      uid: spec,
      labels: { "podmin.dev/namespace": "default", "podmin.dev/deployment": "web" },
      phase: "Running",
      ready,
      ips: [],
      annotations: { "podmin.dev/spec": spec },
    });

    const first = agent();
    await applyResources({ store, resources: [web("1")] });
    assert.equal((await first.pass()).status.converged, true);
    assert.deepEqual(await files(), ["podmin_default_web.json"]);
    const v1 = await specOf("podmin_default_web.json");
    view = { synced: true, pods: [pod(v1, true)] };

    await applyResources({ store, resources: [web("2")] });
    const surging = (await first.pass()).status;
    assert.equal(surging.rollouts?.[0]?.phase, "surging");
    const [surge] = (await files()).filter((f) => f !== "podmin_default_web.json");
    assert.match(surge, /^podmin_default_web\.[0-9a-f]{8}\.json$/);
    const v2 = await specOf(surge);
    assert.equal(surging.rollouts?.[0]?.to, v2);

    // The bucket goes away mid-surge: both Pods stay.
    store.down = true;
    view = { synced: true, pods: [pod(v1, true), pod(v2, true)] };
    clock += 10_000;
    const outage = await first.pass();
    assert.equal(outage.unavailable, true);
    assert.deepEqual(await files(), [surge, "podmin_default_web.json"].sort());
    store.down = false;

    // The agent restarts; kubelet's view is not whole yet: nothing is removed.
    const second = agent();
    view = { synced: false, pods: [] };
    clock += 10_000;
    const blind = (await second.pass()).status;
    assert.equal(blind.rollouts?.[0]?.phase, "surging");
    assert.match(blind.rollouts?.[0]?.reason ?? "", /whole view/);
    assert.deepEqual(await files(), [surge, "podmin_default_web.json"].sort());

    // The view is back with v2 Ready: its streak is observed again before the old Pod goes.
    view = { synced: true, pods: [pod(v1, true), pod(v2, true)] };
    const streak = (await second.pass()).status;
    assert.match(streak.rollouts?.[0]?.reason ?? "", /waiting minReadySeconds/);
    assert.equal((await files()).length, 2);
    clock += 3_000;
    const done = (await second.pass()).status;
    assert.deepEqual(done.rollouts, []);
    assert.equal(done.converged, true);
    assert.deepEqual(await files(), [surge], "v2 runs alone, in its own slot");

    // Only spec.rollout changes: a new digest, the same Pod: nothing is rewritten or started.
    const before = await Deno.readFile(path.join(manifests, surge));
    await applyResources({
      store,
      resources: [web("2", { minReadySeconds: 3, autoRevert: true })],
    });
    const same = (await second.pass()).status;
    assert.equal(same.converged, true);
    assert.deepEqual(same.rollouts, []);
    assert.deepEqual(await files(), [surge]);
    assert.deepEqual(await Deno.readFile(path.join(manifests, surge)), before, "bytes untouched");
  } finally {
    await Deno.remove(tmp, { recursive: true });
  }
});

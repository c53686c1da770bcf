/**
 * Changes over the mesh against a hostile coordinator (issue 33 item 1, spec §7.9 "Changes over
 * the mesh", §8.3) on moto: a real `MeshNode` coordinator whose announcements carry, under the
 * true digest of the new spec, a different spec (another image). Its members take the index change
 * (which it does not alter) but refuse the spec — it does not match its digest —, write nothing of
 * it, and read the true spec from the bucket. A change whose base a member does not hold (a gap)
 * is not applied: the member reads the index from the bucket. Neither is a change whose entries
 * the coordinator made up (a spec of its own under its true digest): the index it rebuilds fails
 * the CLI's signature (core/bucket/index_signing.ts). Counts and content are asserted, never
 * durations.
 */

import assert from "node:assert/strict";
import * as path from "node:path";
import { IndexNotifier } from "../../agent/index_notifier.ts";
import { Loop } from "../../agent/loop.ts";
import type { Announcer } from "../../agent/mesh/coordinator.ts";
import { indexPoller } from "../../agent/mesh/index_poller.ts";
import { MeshNode } from "../../agent/mesh/mesh_node.ts";
import { parseClusterCa } from "../../agent/mesh/node_tls.ts";
import { applyResources } from "../../cli/desired_state.ts";
import { newCaPem } from "../../cli/setup/cluster_cas.ts";
import { DEPLOYMENT_INDEX, DEPLOYMENT_SPEC_PREFIX } from "../../core/bucket/bucket_layout.ts";
import { encodeSpec } from "../../core/bucket/spec_objects.ts";
import { silentLogger } from "../../core/kit/log.ts";
import type { ClusterSnapshot } from "../../core/model/endpoint_snapshot.ts";
import type { ObjectStore } from "../../core/store/object_store.ts";
import { openStore } from "../../core/store/store_url.ts";
import { countingStore } from "../support/counting_store.ts";
import { memberDeploymentsPass } from "../support/member_deployments.ts";
import { workerDeployment } from "../support/fixtures.ts";
import { moto } from "../support/moto.ts";

async function until(what: string, f: () => Promise<boolean> | boolean, timeoutMs = 30_000) {
  const deadline = Date.now() + timeoutMs;
  while (!(await f())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

/** How the hostile coordinator lies. */
type Lie = "swap specs" | "wrong base" | "forge entry";

/**
 * The deployments index's announcer of a hostile coordinator: every inline spec swapped for another
 * valid Deployment of the same name under the true digest, or the change's base misnamed.
 */
function hostileAnnouncer(store: ObjectStore, lie: () => Lie, forged: () => void): Announcer {
  const honest = indexPoller(store);
  return {
    poll: async () => {
      const got = await honest();
      if (!got.change) return got;
      if (lie() === "wrong base") {
        forged();
        return { ...got, change: { ...got.change, base: { etag: '"elsewhere"', generation: 1 } } };
      }
      if (lie() === "forge entry") {
        // A Deployment of its own making, under its own (true) digest, in place of the applied
        // one: every spec matches its entry, only the CLI's signature cannot.
        const upsert = got.change.upsert.map((e) => {
          const d = JSON.parse(got.change!.specs[e.spec]);
          d.spec.template.spec.containers[0].image = "r/evil/miner:1";
          const evil = encodeSpec(d);
          forged();
          return { entry: { ...e, spec: evil.ref }, text: new TextDecoder().decode(evil.bytes) };
        });
        return {
          ...got,
          change: {
            ...got.change,
            upsert: upsert.map((u) => u.entry),
            specs: Object.fromEntries(upsert.map((u) => [u.entry.spec, u.text])),
          },
        };
      }
      const specs: Record<string, string> = {};
      for (const [ref, text] of Object.entries(got.change.specs)) {
        const d = JSON.parse(text);
        d.spec.template.spec.containers[0].image = "r/evil/miner:1";
        specs[ref] = new TextDecoder().decode(encodeSpec(d).bytes);
        forged();
      }
      return { ...got, change: { ...got.change, specs } };
    },
  };
}

Deno.test("hostile change [moto]: a spec that does not match its digest is refused and read from the bucket; a change without its base, or with entries the CLI did not sign, is not applied", async () => {
  const m = await moto();
  const bucket = await m.createBucket();
  const shared = openStore(`s3://${bucket}`);
  const { certPem, keyPem } = await newCaPem("podmin cluster CA test");
  const ca = await parseClusterCa(certPem + keyPem);
  const tmp = await Deno.makeTempDir({ prefix: "podmin-hostile-" });
  let forgeries = 0;
  let lie: Lie = "swap specs";
  const node = (id: string, onSnapshot: (s: ClusterSnapshot) => void, announce?: Announcer) =>
    new MeshNode({
      store: shared,
      cluster: "test",
      nodeGroup: "workers",
      nodeId: id,
      ca,
      listen: "127.0.0.1:0",
      advertiseHost: "127.0.0.1",
      leaseMs: 3_000,
      heartbeatMs: 500,
      ...(announce ? { announce: { index: announce } } : {}),
      pollMs: 200,
      onSnapshot,
      log: silentLogger,
    });
  // The hostile coordinator starts alone, so it holds the lease.
  const hostile = node(
    "hostile",
    () => {},
    hostileAnnouncer(shared, () => lie, () => forgeries++),
  );
  await applyResources({ store: shared, resources: [workerDeployment("first")] });
  await hostile.start();
  await until("the hostile node coordinates", () => hostile.coordinator !== undefined);

  const counting = countingStore(shared);
  const base = path.join(tmp, "member");
  const notifier = new IndexNotifier({ connected: () => mesh.member.connected() });
  const warnings: string[] = [];
  const deployments = memberDeploymentsPass({
    store: counting.store,
    base,
    notifier,
    log: { ...silentLogger, warn: (msg) => warnings.push(msg) },
  });
  const loop = new Loop({
    name: "deployments",
    intervalMs: 200,
    pass: async () => ({ backOff: (await deployments.pass()).unavailable }),
  });
  const mesh = node("member", (s) => {
    deployments.offer(s);
    if (notifier.onSnapshot(s, deployments.indexEtag)) loop.hint();
  });
  const manifest = (name: string) =>
    Deno.readTextFile(path.join(base, "manifests", `podmin_default_${name}.json`)).catch(() => "");
  try {
    await mesh.start();
    loop.start();
    await until(
      "the member on notifications",
      async () => notifier.fresh() && !!await manifest("first"),
    );

    // An apply: the hostile coordinator forges the new spec it inlines.
    counting.reset();
    await applyResources({ store: shared, resources: [workerDeployment("second")] });
    await until("the member wrote the second Deployment", async () => !!await manifest("second"));
    const written = await manifest("second");
    console.log(
      `hostile change: ${forgeries} spec(s) forged; member: ${
        JSON.stringify(deployments.meshChanges)
      }, ` +
        `${counting.count("get", DEPLOYMENT_INDEX)} index and ` +
        `${counting.countPrefix("get", DEPLOYMENT_SPEC_PREFIX)} spec reads; warnings ${warnings}`,
    );
    assert.ok(forgeries >= 1, "the coordinator forged the inline spec");
    assert.ok(written.includes("r/apps/second:1"), "the manifest runs the applied image");
    assert.ok(!written.includes("r/evil"), "nothing of the forged spec was written");
    assert.equal(deployments.meshChanges.specsRefused, 1, "the forged spec was refused");
    assert.equal(deployments.meshChanges.specsTaken, 0);
    assert.equal(
      counting.countPrefix("get", DEPLOYMENT_SPEC_PREFIX),
      1,
      "the true spec was read from the bucket",
    );
    assert.ok(warnings.some((w) => w.includes("spec from the mesh refused")));

    // A change whose base the member does not hold (a faulty peer, or a member that missed an
    // index): not applied; the member reads the index and the spec from the bucket.
    lie = "wrong base";
    counting.reset();
    const { applied, skipped } = deployments.meshChanges;
    await applyResources({ store: shared, resources: [workerDeployment("third")] });
    await until("the member wrote the third Deployment", async () => !!await manifest("third"));
    assert.equal(deployments.meshChanges.skipped, skipped + 1, "the change was not applied");
    assert.equal(deployments.meshChanges.applied, applied);
    assert.equal(counting.count("get", DEPLOYMENT_INDEX), 1, "the index came from the bucket");
    assert.equal(counting.countPrefix("get", DEPLOYMENT_SPEC_PREFIX), 1, "so did the spec");
    assert.ok(!!await manifest("first") && !!await manifest("second"), "nothing else changed");

    // A change whose entries the coordinator made up (its own spec, under its true digest, inline):
    // the rebuilt index fails the CLI's signature; the member reads the index and the spec from the
    // bucket and runs what was applied.
    lie = "forge entry";
    counting.reset();
    const { unverified } = deployments.meshChanges;
    await applyResources({ store: shared, resources: [workerDeployment("fourth")] });
    await until("the member wrote the fourth Deployment", async () => !!await manifest("fourth"));
    const fourth = await manifest("fourth");
    assert.ok(fourth.includes("r/apps/fourth:1"), "the manifest runs the applied image");
    assert.ok(!fourth.includes("r/evil"), "nothing of the forged entry was written");
    assert.equal(deployments.meshChanges.unverified, unverified + 1, "the change was refused");
    assert.equal(counting.count("get", DEPLOYMENT_INDEX), 1, "the index came from the bucket");
    assert.ok(warnings.some((w) => w.includes("not signed by the cluster's key")));
  } finally {
    await loop.stop();
    mesh.member.stop();
    hostile.member.stop();
    await mesh.stop().catch(() => {});
    await hostile.stop().catch(() => {});
    await Deno.remove(tmp, { recursive: true });
  }
});

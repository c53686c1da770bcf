/**
 * The cluster-wide budget across agents (spec §7.1, "Budget"; issue 32 items 3 and 4): four
 * agents' deployments passes, in one process, share a bucket (file store) and nothing else: each
 * has its own manifest directory, its own rollout gate and a kubelet stand-in that reports each
 * manifest's Pod (Ready unless its image is `crash`). One clock, advanced by the test; the agents
 * pass in turn. Asserted from the nodes' own writes: every write of the rollout object admits at
 * most `maxUnavailable` nodes, and at no moment are more nodes in transition (two manifests, or one
 * being replaced) than that. A crashing image halts after its first wave: no other node ever
 * writes it, and autoRevert leaves every node on the previous spec, also the nodes that had
 * completed their transition when another node failed. Pause holds every node on the old spec; resume completes the rollout within
 * the budget.
 */

import assert from "node:assert/strict";
import * as path from "node:path";
import { rolloutDeployment } from "../support/fixtures.ts";
import { DeploymentsPass, type PodsView } from "../../agent/deployments/deployments_pass.ts";
import { RolloutGate } from "../../agent/deployments/rollout_gate.ts";
import { SecretsSync } from "../../agent/secrets/secrets_sync.ts";
import { AwsValueProvider } from "../../agent/secrets/value_provider.ts";
import type { PodInfo } from "../../agent/discovery/pod_proto.ts";
import { applyResources } from "../../cli/desired_state.ts";
import { FsStore } from "../../core/store/fs_store.ts";
import { silentLogger } from "../../core/kit/log.ts";
import type { PutOptions } from "../../core/store/object_store.ts";
import { deploymentRolloutKey } from "../../core/bucket/bucket_layout.ts";
import {
  parseRolloutState,
  rolloutStateObject,
  setPaused,
} from "../../core/bucket/rollout_state.ts";
import { casUpdate } from "../../core/store/cas_update.ts";
import { getIfExists } from "../../core/store/object_store.ts";

const ROLLOUT = { maxUnavailable: 1, minReadySeconds: 1, progressDeadlineSeconds: 20 };
const web = (tag: string, rollout: Record<string, unknown> = ROLLOUT) =>
  rolloutDeployment(tag, rollout);
const KEY = deploymentRolloutKey("default", "web");
const ref = { namespace: "default", name: "web" };

/** A file store that records every admission count written to the rollout object. */
class RecordingStore extends FsStore {
  admittedWrites: number[] = [];
  override async put(key: string, body: Uint8Array, options?: PutOptions) {
    const etag = await super.put(key, body, options);
    if (key === KEY) this.admittedWrites.push(parseRolloutState(body, ref).admitted.length);
    return etag;
  }
}

Deno.test("rollout budget: waves within maxUnavailable, a failed first wave halts and reverts, pause holds", async () => {
  const tmp = await Deno.makeTempDir({ prefix: "podmin-budget-" });
  try {
    let t = Date.now();
    const store = new RecordingStore({ root: path.join(tmp, "bucket"), durable: false });
    const nodes = ["n1", "n2", "n3", "n4"].map((id) => {
      const dir = path.join(tmp, id);
      const manifests = path.join(dir, "manifests");
      let view: PodsView = { synced: true, pods: [] };
      const pass = new DeploymentsPass({
        store,
        nodeGroup: "workers",
        manifestDir: manifests,
        secretsDir: path.join(dir, "secrets"),
        tlsDir: path.join(dir, "tls"),
        secrets: new SecretsSync({
          cluster: "test",
          secretsDir: path.join(dir, "secrets"),
          provider: new AwsValueProvider({ region: "us-east-1" }),
          refreshMs: 60_000,
          log: silentLogger,
        }),
        pods: () => view,
        gate: new RolloutGate({
          store,
          node: id,
          log: silentLogger,
          clock: { monotonicMs: () => t, wallMs: () => t },
        }),
        log: silentLogger,
        now: () => t,
      });
      /** The manifests on disk: file → image tag. */
      const disk = async () => {
        await Deno.mkdir(manifests, { recursive: true });
        const out = new Map<string, { tag: string; spec: string; name: string }>();
        for await (const e of Deno.readDir(manifests)) {
          if (!e.name.startsWith("podmin_")) continue;
          const pod = JSON.parse(await Deno.readTextFile(path.join(manifests, e.name)));
          out.set(e.name, {
            tag: pod.spec.containers[0].image.split(":").at(-1),
            spec: pod.metadata.annotations["podmin.dev/spec"],
            name: pod.metadata.name,
          });
        }
        return out;
      };
      /** kubelet's stand-in: a Pod per manifest, Ready unless its image crashes. */
      const kubelet = async () => {
        const pods: PodInfo[] = [...(await disk()).values()].map((m) => ({
          namespace: "default",
          name: m.name,
          uid: m.spec,
          labels: { "podmin.dev/namespace": "default", "podmin.dev/deployment": "web" },
          phase: "Running",
          ready: m.tag !== "crash" && m.tag !== `crash-${id}`,
          ...(m.tag === "crash" || m.tag === `crash-${id}`
            ? { reason: "c: CrashLoopBackOff (last exit 1: Error)" }
            : {}),
          ips: [],
          annotations: { "podmin.dev/spec": m.spec },
        }));
        view = { synced: true, pods };
      };
      /**
       * The agents' clock is the test's: a manifest the pass just wrote gets that clock as its
       * mtime (a slot's progress deadline counts from its mtime).
       */
      const written = new Set<string>();
      const stamp = async () => {
        for (const [file, m] of await disk()) {
          if (written.has(`${file} ${m.spec}`)) continue;
          written.add(`${file} ${m.spec}`);
          await Deno.utime(path.join(manifests, file), t / 1000, t / 1000);
        }
      };
      return { id, pass, disk, kubelet, stamp };
    });

    let maxInTransition = 0;
    const tagsSeen = new Map<string, Set<string>>(nodes.map((n) => [n.id, new Set()]));
    const phases = new Set<string>();
    /** One round: every agent passes once, then the clock moves on. */
    const round = async () => {
      for (const n of nodes) {
        await n.kubelet();
        const { status } = await n.pass.pass();
        await n.stamp();
        for (const r of status.rollouts ?? []) phases.add(`${r.phase}: ${r.reason ?? ""}`);
        let inTransition = 0;
        for (const m of nodes) {
          const d = await m.disk();
          for (const x of d.values()) tagsSeen.get(m.id)!.add(x.tag);
          if (d.size > 1) inTransition++;
        }
        maxInTransition = Math.max(maxInTransition, inTransition);
      }
      t += 2_500;
    };
    const tagsNow = async () => {
      const out: string[] = [];
      for (const n of nodes) out.push([...(await n.disk()).values()].map((x) => x.tag).join("+"));
      return out;
    };
    const until = async (what: string, done: () => Promise<boolean>, rounds = 80) => {
      for (let i = 0; i < rounds; i++) {
        if (await done()) return;
        await round();
      }
      const got = await getIfExists(store, KEY);
      assert.fail(
        `${what}: not reached; nodes run ${await tagsNow()}; rollout object: ` +
          (got ? new TextDecoder().decode(got.body) : "absent") + `; phases: ${[...phases]}`,
      );
    };
    const all = (tag: string) => async () => (await tagsNow()).every((x) => x === tag);

    await applyResources({ store, resources: [web("v1")] });
    await until("v1 everywhere", all("v1"));

    // A good image: one node at a time, each waits for its admission.
    await applyResources({ store, resources: [web("v2")] });
    await until("v2 everywhere", all("v2"));
    assert.equal(maxInTransition, 1, "never more than maxUnavailable nodes in transition");
    assert.ok(store.admittedWrites.length > 0);
    assert.ok(Math.max(...store.admittedWrites) <= 1, `admitted: ${store.admittedWrites}`);
    assert.ok([...phases].some((p) => p.startsWith("waiting: waiting for admission")));

    // A crashing image with autoRevert: the first wave fails, the rollout halts, every node ends
    // on v2, and no node but the first ever wrote the crashing image.
    const crash = { ...ROLLOUT, autoRevert: true };
    await applyResources({ store, resources: [web("crash", crash)] });
    const object = rolloutStateObject(ref);
    /** The rollout object halted, for the spec its node `by` failed (any node when not given). */
    const halted = (by?: string) => async () => {
      const got = await getIfExists(store, object.key);
      const h = got && object.parse(got.body).halted;
      return !!h && (by === undefined || h.node === by);
    };
    await until("halted", halted());
    await until("reverted everywhere", all("v2"));
    await round();
    for (const n of nodes) {
      // Its record names the spec it runs, the restored one (after a pass that saw the halt).
      const [running] = [...(await n.disk()).values()];
      assert.equal(n.pass.summary().deployments[0].spec, running.spec, n.id);
    }
    const wrote = nodes.filter((n) => tagsSeen.get(n.id)!.has("crash")).map((n) => n.id);
    assert.equal(wrote.length, 1, `only the first wave ran the crashing image: ${wrote}`);
    assert.ok(Math.max(...store.admittedWrites) <= 1);
    const state = object.parse((await getIfExists(store, object.key))!.body);
    assert.equal(state.halted?.node, wrote[0]);
    assert.match(state.halted?.reason ?? "", /CrashLoopBackOff/);
    // It stays halted: more rounds change nothing.
    for (let i = 0; i < 4; i++) await round();
    assert.deepEqual(await tagsNow(), ["v2", "v2", "v2", "v2"]);

    // Two at a time, the image failing on n2 only: the nodes whose transition completed meanwhile
    // (each completion admits the next node) go back to v2 when n2 halts the rollout.
    tagsSeen.forEach((tags) => tags.clear());
    const pair = { ...ROLLOUT, maxUnavailable: 2, autoRevert: true };
    await applyResources({ store, resources: [web("crash-n2", pair)] });
    await until("halted by n2", halted("n2"));
    await until("reverted everywhere", all("v2"));
    const ran = nodes.filter((n) => tagsSeen.get(n.id)!.has("crash-n2")).map((n) => n.id);
    assert.ok(ran.includes("n1") && ran.includes("n2"), `ran: ${ran}`);
    assert.ok(Math.max(...store.admittedWrites) <= 2, `admitted: ${store.admittedWrites}`);
    assert.ok(maxInTransition <= 2, `in transition at once: ${maxInTransition}`);

    // Paused: a new spec waits everywhere; resumed: it rolls out within the budget.
    store.admittedWrites = [];
    await casUpdate({ store, object, mutate: (s) => setPaused(s, true) });
    await applyResources({ store, resources: [web("v3")] });
    phases.clear();
    for (let i = 0; i < 6; i++) await round();
    assert.deepEqual(await tagsNow(), ["v2", "v2", "v2", "v2"], "paused: nobody moves");
    assert.ok([...phases].some((p) => /waiting: rollout paused/.test(p)), [...phases].join("\n"));
    await casUpdate({ store, object, mutate: (s) => setPaused(s, false) });
    maxInTransition = 0;
    await until("v3 everywhere", all("v3"));
    assert.equal(maxInTransition, 1);
    assert.ok(Math.max(...store.admittedWrites) <= 1);
  } finally {
    await Deno.remove(tmp, { recursive: true });
  }
});

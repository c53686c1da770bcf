import assert from "node:assert/strict";
import * as path from "node:path";
import { FsStore } from "../../core/store/fs_store.ts";
import { silentLogger } from "../../core/kit/log.ts";
import { rolloutSettings } from "../../core/model/rollout.ts";
import {
  ADMISSION_START_MS,
  FOLLOW_IDLE_MS,
  RECLAIM_MARGIN_MS,
  ROLLOUT_POLL_MS,
  RolloutGate,
} from "./rollout_gate.ts";
import { getIfExists } from "../../core/store/object_store.ts";
import { rolloutStateObject, setPaused } from "../../core/bucket/rollout_state.ts";
import { casUpdate } from "../../core/store/cas_update.ts";

const S1 = `sha256:${"1".repeat(64)}`;
const S2 = `sha256:${"2".repeat(64)}`;
const target = {
  namespace: "default",
  name: "web",
  spec: S2,
  from: S1,
  generation: 2,
  settings: rolloutSettings({ maxUnavailable: 1, progressDeadlineSeconds: 60 }),
};

async function withStore(fn: (store: FsStore) => Promise<void>) {
  const tmp = await Deno.makeTempDir({ prefix: "podmin-gate-" });
  try {
    const store = new FsStore({ root: path.join(tmp, "bucket"), durable: false });
    await fn(store);
  } finally {
    await Deno.remove(tmp, { recursive: true });
  }
}

Deno.test("rollout gate: a crashed holder's admission is reclaimed after its lifetime, by the waiter's clock", async () => {
  await withStore(async (store) => {
    let t = 1_000_000;
    const clock = { monotonicMs: () => t, wallMs: () => t };
    let n = 0;
    const gate = (node: string) =>
      new RolloutGate({
        store,
        node,
        log: silentLogger,
        clock,
        nonce: () => (++n).toString(16).padStart(8, "0"),
      });
    const a = gate("a");
    const b = gate("b");
    assert.equal((await a.admit(target)).go, true);
    // a crashes: it never releases. b waits; its clock starts at its first read of a's admission.
    const waiting = await b.admit(target);
    assert.equal(waiting.go, false);
    assert.match(waiting.reason ?? "", /waiting for admission: 1 node\(s\) in transition/);
    const lifetime = 60_000 + ADMISSION_START_MS + RECLAIM_MARGIN_MS;
    t += lifetime - 1;
    assert.equal((await b.admit(target)).go, false, "not before the lifetime passed");
    t += ROLLOUT_POLL_MS;
    assert.equal((await b.admit(target)).go, true, "reclaimed");
    const object = rolloutStateObject(target);
    const stored = object.parse((await getIfExists(store, object.key))!.body);
    assert.deepEqual(stored.admitted.map((x) => x.node), ["b"]);
    // a restarts (new gate): it is not admitted beside b.
    const a2 = gate("a");
    assert.equal((await a2.admit(target)).go, false);
    // b's transition ends: a is admitted at its next read.
    await b.release(target);
    t += ROLLOUT_POLL_MS;
    assert.equal((await a2.admit(target)).go, true);
  });
});

Deno.test("rollout gate: pause holds admissions; a halt with autoRevert names the spec to restore", async () => {
  await withStore(async (store) => {
    let t = 0;
    const clock = { monotonicMs: () => t, wallMs: () => 1_700_000_000_000 + t };
    const object = rolloutStateObject(target);
    await casUpdate({ store, object, mutate: (s) => setPaused(s, true) });
    const a = new RolloutGate({ store, node: "a", log: silentLogger, clock });
    const paused = await a.admit(target);
    assert.equal(paused.go, false);
    assert.match(paused.reason ?? "", /paused/);
    await casUpdate({ store, object, mutate: (s) => setPaused(s, false) });
    t += ROLLOUT_POLL_MS;
    assert.equal((await a.admit(target)).go, true);
    await a.halt(target, "not Ready: CrashLoopBackOff");
    const revert = { ...target, settings: { ...target.settings, autoRevert: true } };
    const b = new RolloutGate({ store, node: "b", log: silentLogger, clock });
    const halted = await b.admit(revert);
    assert.equal(halted.go, false);
    assert.equal(halted.revertTo, S1);
    assert.match(halted.reason ?? "", /halted on a: not Ready: CrashLoopBackOff/);
    assert.equal((await b.admit(target)).revertTo, undefined, "no autoRevert: halt only");
    const c = new RolloutGate({ store, node: "c", log: silentLogger, clock });
    assert.equal(await c.follow(revert), S1, "a node already on the new spec learns it too");
  });
});

Deno.test("rollout gate: a node on the new spec stops reading once nobody was in transition for a while", async () => {
  await withStore(async (store) => {
    let t = 0;
    const clock = { monotonicMs: () => t, wallMs: () => 1_700_000_000_000 + t };
    let reads = 0;
    const counting = Object.assign(Object.create(store), {
      get: (key: string, o?: { ifNoneMatch?: string; maxBytes?: number }) => {
        reads++;
        return store.get(key, o);
      },
    }) as FsStore;
    const a = new RolloutGate({ store, node: "a", log: silentLogger, clock });
    assert.equal((await a.admit(target)).go, true);
    const b = new RolloutGate({ store: counting, node: "b", log: silentLogger, clock });
    assert.equal(await b.follow(target), undefined);
    t += ROLLOUT_POLL_MS;
    await a.release(target);
    for (let i = 0; i < 10; i++) {
      assert.equal(await b.follow(target), undefined);
      t += ROLLOUT_POLL_MS;
    }
    const before = reads;
    assert.ok(before <= 2 + FOLLOW_IDLE_MS / ROLLOUT_POLL_MS + 1, `reads: ${before}`);
    for (let i = 0; i < 10; i++) {
      await b.follow(target);
      t += ROLLOUT_POLL_MS;
    }
    assert.equal(reads, before, "finished: no more reads");
  });
});

Deno.test("rollout gate: a waiter's reads are jittered within (0.8–1) × ROLLOUT_POLL_MS and readDelayMs says when the next is due", async () => {
  await withStore(async (store) => {
    let t = 1_000_000;
    const clock = { monotonicMs: () => t, wallMs: () => t };
    const randoms = [0, 0.999];
    const a = new RolloutGate({ store, node: "a", log: silentLogger, clock });
    const b = new RolloutGate({
      store,
      node: "b",
      log: silentLogger,
      clock,
      random: () => randoms.shift() ?? 0.5,
    });
    assert.equal((await a.admit(target)).go, true);
    assert.equal(b.readDelayMs(target), 0, "nothing read yet: due now");
    assert.equal((await b.admit(target)).go, false);
    assert.equal(b.readDelayMs(target), ROLLOUT_POLL_MS * 0.8, "random 0: the shortest interval");
    t += ROLLOUT_POLL_MS * 0.8 - 1;
    assert.equal(b.readDelayMs(target), 1);
    await a.release(target);
    assert.equal((await b.admit(target)).go, false, "not read again before it is due");
    t += 1;
    assert.equal(b.readDelayMs(target), 0);
    assert.equal((await b.admit(target)).go, true, "read when due: the slot is free");
  });
});

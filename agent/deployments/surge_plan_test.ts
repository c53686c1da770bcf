import assert from "node:assert/strict";
import { ROLLOUT_DEFAULTS, type RolloutSettings } from "../../core/model/rollout.ts";
import type { PodInfo } from "../discovery/pod_proto.ts";
import { type Slot, slotOf } from "./static_pod.ts";
import { planSurge, type SlotOnDisk, type SurgeInput } from "./surge_plan.ts";

const OLD = `sha256:${"0".repeat(64)}`;
const NEW = `sha256:${"1".repeat(64)}`;
const NEWER = `sha256:${"2".repeat(64)}`;
const enc = new TextEncoder();
const bytesOf = (spec: string, slot: Slot) => enc.encode(`${slot}:${spec}`);
/** The surge slots of NEW and NEWER; the first spec's slot is "". */
const S_NEW = slotOf(NEW);
const S_NEWER = slotOf(NEWER);
const disk = (spec: string, slot: Slot, writtenMs = 0): [Slot, SlotOnDisk] => [slot, {
  spec,
  bytes: bytesOf(spec, slot),
  writtenMs,
}];
const on = (...slots: [Slot, SlotOnDisk][]) => new Map(slots);
const pod = (spec: string, o: Partial<PodInfo> = {}): PodInfo => ({
  namespace: "default",
  name: `web-${spec.slice(7, 9)}`,
  uid: spec,
  labels: {},
  phase: "Running",
  ready: false,
  ips: [],
  annotations: { "podmin.dev/spec": spec },
  ...o,
});
const settings: RolloutSettings = { ...ROLLOUT_DEFAULTS, minReadySeconds: 5 };

function plan(o: Partial<SurgeInput> & Pick<SurgeInput, "onDisk">) {
  const spec = o.spec ?? NEW;
  return planSurge({
    deployment: "default/web",
    spec,
    render: (slot) => bytesOf(spec, slot),
    settings,
    watching: true,
    now: 100_000,
    ...o,
  });
}
const slots = (m: Map<Slot, unknown> | Set<Slot>) => [...m.keys()].sort();

Deno.test("surge: a first spec goes to slot a; a settled spec is rewritten only in its slot", () => {
  const first = plan({ onDisk: on() });
  assert.deepEqual(slots(first.write), [""]);
  assert.equal(first.rollout, undefined);
  const steady = plan({ onDisk: on(disk(NEW, S_NEW)) });
  assert.deepEqual(slots(steady.write), [S_NEW]);
  assert.deepEqual(slots(steady.keep), []);
});

Deno.test("surge: a new spec starts in the free slot and the old one is kept", () => {
  const p = plan({ onDisk: on(disk(OLD, "")), pods: [pod(OLD, { ready: true })] });
  assert.deepEqual(slots(p.write), [S_NEW]);
  assert.deepEqual(slots(p.keep), [""]);
  assert.equal(p.rollout?.phase, "surging");
  assert.equal(p.rollout?.from, OLD);
  assert.equal(p.rollout?.to, NEW);
});

Deno.test("surge: the old Pod goes only after the new one was Ready for minReadySeconds", () => {
  const onDisk = on(disk(OLD, ""), disk(NEW, S_NEW, 90_000));
  const notReady = plan({ onDisk, pods: [pod(OLD, { ready: true }), pod(NEW)] });
  assert.deepEqual(slots(notReady.keep), [""]);
  assert.equal(notReady.readySince, undefined);
  const ready = plan({ onDisk, pods: [pod(OLD, { ready: true }), pod(NEW, { ready: true })] });
  assert.deepEqual(slots(ready.keep), [""], "a fresh Ready streak keeps the old Pod");
  assert.equal(ready.readySince, 100_000);
  assert.equal(ready.recheckAt, 105_000);
  const early = plan({
    onDisk,
    pods: [pod(NEW, { ready: true })],
    readySince: 100_000,
    now: 104_999,
  });
  assert.deepEqual(slots(early.keep), [""]);
  const done = plan({
    onDisk,
    pods: [pod(NEW, { ready: true })],
    readySince: 100_000,
    now: 105_000,
  });
  assert.deepEqual(slots(done.write), [S_NEW]);
  assert.deepEqual(slots(done.keep), [], "slot a is removed");
  assert.equal(done.rollout, undefined);
  assert.equal(done.handedOver, true);
  // A break in the streak starts it over.
  const broke = plan({ onDisk, pods: [pod(NEW)], readySince: 100_000, now: 106_000 });
  assert.equal(broke.readySince, undefined);
  assert.deepEqual(slots(broke.keep), [""]);
});

Deno.test("surge: without a whole view of kubelet's Pods nothing is removed or failed early", () => {
  const onDisk = on(disk(OLD, ""), disk(NEW, S_NEW, 90_000));
  const p = plan({ onDisk, pods: undefined, readySince: 0, now: 200_000 });
  assert.deepEqual(slots(p.keep), [""]);
  assert.equal(p.rollout?.phase, "surging");
  assert.match(p.rollout?.reason ?? "", /whole view/);
  // Past the deadline it is reported failed, but the old Pod still stays.
  const late = plan({ onDisk, pods: undefined, now: 90_000 + 601_000 });
  assert.equal(late.rollout?.phase, "failed");
  assert.deepEqual(slots(late.keep), [""]);
  // --once (no watch at all) never removes a running surge's old Pod either.
  const once = plan({ onDisk, watching: false });
  assert.deepEqual(slots(once.keep), [""]);
});

Deno.test("surge: past the progress deadline the node halts with kubelet's reason", () => {
  const onDisk = on(disk(OLD, ""), disk(NEW, S_NEW, 0));
  const crashing = pod(NEW, { reason: "web: CrashLoopBackOff (last exit 1: Error)" });
  const p = plan({ onDisk, pods: [pod(OLD, { ready: true }), crashing], now: 600_000 });
  assert.equal(p.rollout?.phase, "failed");
  assert.match(p.rollout?.reason ?? "", /within 600 s: web: CrashLoopBackOff \(last exit 1/);
  assert.deepEqual(slots(p.keep), [""], "the old Pod keeps serving");
  assert.deepEqual(slots(p.write), [S_NEW], "the new Pod is left to kubelet's restarts");
  // It may still recover: Ready for minReadySeconds completes the handover.
  const later = plan({
    onDisk,
    pods: [pod(NEW, { ready: true })],
    readySince: 700_000,
    now: 705_000,
  });
  assert.equal(later.handedOver, true);
});

Deno.test("surge: autoRevert removes the failed new Pod and does not start it again", () => {
  const onDisk = on(disk(OLD, ""), disk(NEW, S_NEW, 0));
  const p = plan({
    onDisk,
    pods: [pod(NEW, { reason: "web: ErrImagePull" })],
    settings: { ...settings, autoRevert: true },
    now: 600_000,
  });
  assert.equal(p.rollout?.phase, "failed");
  assert.deepEqual(slots(p.write), []);
  assert.deepEqual(slots(p.keep), [""]);
  assert.equal(p.reverted, true);
  const next = plan({ onDisk: on(disk(OLD, "")), reverted: true, pods: [] });
  assert.deepEqual(slots(next.write), []);
  assert.deepEqual(slots(next.keep), [""]);
  assert.equal(next.rollout?.phase, "failed");
});

Deno.test("surge: a node that cannot hold both Pods replaces in place", () => {
  const onDisk = on(disk(OLD, ""), disk(NEW, S_NEW, 90_000));
  const p = plan({ onDisk, pods: [pod(NEW, { phase: "Failed", reason: "OutOfmemory" })] });
  assert.deepEqual(slots(p.write), [""]);
  assert.deepEqual(slots(p.keep), [], "the refused surge slot is removed");
  assert.equal(p.rollout?.phase, "replacing");
  assert.match(p.rollout?.reason ?? "", /OutOfmemory/);
  // A static Pod is critical to kubelet: with nothing to preempt it says so instead.
  const preempt = plan({
    onDisk,
    pods: [pod(NEW, {
      phase: "Failed",
      reason:
        "UnexpectedAdmissionError: preemption: no set of running pods found to reclaim resources",
    })],
  });
  assert.equal(preempt.rollout?.phase, "replacing");
  const crashed = plan({ onDisk, pods: [pod(NEW, { phase: "Failed", reason: "Evicted: disk" })] });
  assert.equal(crashed.rollout?.phase, "surging", "only admission refusals replace in place");
});

Deno.test("surge: in place when the Deployment asks for it or there is no Pods view", () => {
  const inPlace = plan({ onDisk: on(disk(OLD, "")), inPlace: "spec.rollout.surge is false" });
  assert.deepEqual(slots(inPlace.write), [""]);
  assert.equal(inPlace.rollout?.phase, "replacing");
  const once = plan({ onDisk: on(disk(OLD, S_NEW)), watching: false });
  assert.deepEqual(slots(once.write), [S_NEW]);
  assert.match(once.rollout?.reason ?? "", /no view of kubelet's Pods/);
});

Deno.test("surge: a newer spec during a surge replaces the surge, not the serving Pod", () => {
  const onDisk = on(disk(OLD, "", 0), disk(NEW, S_NEW, 90_000));
  const p = plan({ onDisk, spec: NEWER, pods: [pod(OLD, { ready: true }), pod(NEW)] });
  assert.deepEqual(slots(p.write), [S_NEWER], "its own slot: never a name kubelet is stopping");
  assert.deepEqual(slots(p.keep), [""], "the NEW surge, never Ready, is removed");
  assert.equal(p.rollout?.from, OLD);
  // An undo back to the serving spec: its Pod is Ready, so the surge goes after minReadySeconds.
  const undo = plan({
    onDisk,
    spec: OLD,
    pods: [pod(OLD, { ready: true })],
    readySince: 95_000,
  });
  assert.deepEqual(slots(undo.write), [""]);
  assert.deepEqual(slots(undo.keep), []);
});

Deno.test("surge: with the mesh, the old Pod is withdrawn and drained before it goes", () => {
  const onDisk = on(disk(OLD, ""), disk(NEW, S_NEW, 90_000));
  const ready = { pods: [pod(NEW, { ready: true })], readySince: 90_000 };
  const asked = plan({ onDisk, ...ready, oldAddressesGone: false });
  assert.equal(asked.withdraw, OLD);
  assert.deepEqual(slots(asked.keep), [""]);
  assert.match(asked.rollout?.reason ?? "", /withdrawing the old Pod's endpoints/);
  const gone = plan({ onDisk, ...ready, oldAddressesGone: true });
  assert.equal(gone.drainedSince, 100_000);
  assert.deepEqual(slots(gone.keep), [""], "drained for DRAIN_GRACE_MS first");
  assert.equal(gone.recheckAt, 102_000);
  const done = plan({ onDisk, ...ready, oldAddressesGone: true, drainedSince: 98_000 });
  assert.equal(done.handedOver, true);
  assert.deepEqual(slots(done.keep), []);
  assert.equal(done.withdraw, OLD, "still withdrawn while kubelet stops it");
  // The addresses came back (a snapshot from before the withdrawal): the grace starts over.
  const back = plan({ onDisk, ...ready, oldAddressesGone: false, drainedSince: 98_000 });
  assert.equal(back.drainedSince, undefined);
  assert.deepEqual(slots(back.keep), [""]);
});

Deno.test("surge: a slot that renders the same Pod (only spec.rollout changed) is left as it is", () => {
  const [slot, same] = disk(OLD, "");
  const onDisk = on([slot, { ...same, equivalent: true }]);
  const p = plan({ onDisk, pods: [pod(OLD, { ready: true })] });
  assert.deepEqual(slots(p.write), [], "not rewritten: kubelet would restart the Pod");
  assert.deepEqual(slots(p.keep), [""]);
  assert.equal(p.rollout, undefined, "settled");
});

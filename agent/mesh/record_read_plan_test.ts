import assert from "node:assert/strict";
import { RecordReadPlan } from "./record_read_plan.ts";

const STEP = 5_000;
const LEASE = 15_000;
const TAKEOVER = LEASE + 1_500 + STEP;

/** Drives one plan the way a member does: an attempt every `attemptMs`, reading when due. */
function readsOver(o: { plan: RecordReadPlan; clock: { now: number }; untilMs: number }) {
  const at: number[] = [];
  for (; o.clock.now < o.untilMs; o.clock.now += 100) {
    if (o.plan.due()) {
      at.push(o.clock.now);
      o.plan.read();
    }
  }
  return at;
}

function plan(clock: { now: number }, random = Math.random) {
  return new RecordReadPlan({
    stepMs: STEP,
    takeoverMs: TAKEOVER,
    everyMs: LEASE,
    now: () => clock.now,
    random,
  });
}

Deno.test("record read plan: starting, it reads at once, then once per step", () => {
  const clock = { now: 0 };
  const at = readsOver({ plan: plan(clock, () => 0.5), clock, untilMs: 20_000 });
  assert.deepEqual(at, [0, 5_000, 10_000, 15_000]);
});

Deno.test("record read plan: after a crash, one read after the takeover, then one per lease; after a handover, one a step later", () => {
  const clock = { now: 100_000 };
  const p = plan(clock);
  p.lost({ nodes: 1_000 });
  const at = readsOver({ plan: p, clock, untilMs: 100_000 + 10 * LEASE }).map((t) => t - 100_000);
  assert.ok(at[0] >= TAKEOVER && at[0] <= TAKEOVER + LEASE + 100, `first ${at[0]}`);
  // The second a step after the whole cluster's first reads, spread the same way.
  const second = TAKEOVER + LEASE + STEP;
  assert.ok(at[1] >= second && at[1] <= second + LEASE + 100, `second ${at[1]}`);
  assert.equal(p.electionEndsAt(), 100_000 + TAKEOVER + 2 * LEASE + 2 * STEP);
  for (let i = 2; i < at.length; i++) {
    const gap = at[i] - at[i - 1];
    assert.ok(gap >= 0.8 * LEASE && gap <= 1.2 * LEASE + 100, `gap ${gap}`);
  }
  // At most once per step, and about once per lease period while leaderless.
  assert.ok(at.length <= 10, `${at.length} reads in 10 lease periods`);

  // A handover in a 3-node cluster: one read a step later, no spread to speak of.
  clock.now = 0;
  const small = plan(clock);
  small.lost({ nodes: 3, handover: true });
  const [first, next] = readsOver({ plan: small, clock, untilMs: 3 * STEP });
  assert.ok(first >= STEP && first <= STEP + 200, `first read after a handover ${first}`);
  assert.ok(next - first >= STEP && next - first <= STEP + 200, `second ${next - first}`);
  small.connected();
  assert.equal(small.electionEndsAt(), undefined);
});

Deno.test("record read plan: 1,000 members that lost the same coordinator spread their reads", () => {
  const members = Array.from(
    { length: 1_000 },
    () => ({ clock: { now: 0 }, plan: undefined! }),
  ) as {
    clock: { now: number };
    plan: RecordReadPlan;
  }[];
  const perSecond = new Map<number, number>();
  for (const m of members) {
    m.plan = plan(m.clock);
    m.plan.lost({ nodes: 1_000 });
    for (const t of readsOver({ plan: m.plan, clock: m.clock, untilMs: 4 * LEASE })) {
      const s = Math.floor(t / 1000);
      perSecond.set(s, (perSecond.get(s) ?? 0) + 1);
    }
  }
  const total = [...perSecond.values()].reduce((a, b) => a + b, 0);
  const peak = Math.max(...perSecond.values());
  console.log(`record reads: ${total} by 1,000 members in 4 lease periods, at most ${peak} in 1 s`);
  assert.ok(total <= 1_000 * 4, `${total} reads: more than one per member per lease period`);
  // Spread over a lease period: about 1,000 / 15 s, never a burst of the whole cluster.
  assert.ok(peak <= 150, `${peak} reads in one second`);
});

Deno.test("record read plan: this node wrote the record — read at once; a new holder seen — a third of a step later", () => {
  const clock = { now: 0 };
  const p = plan(clock, () => 0.5);
  p.lost({ nodes: 1_000 });
  assert.equal(p.due(), false);
  p.changed();
  assert.equal(p.due(), true);
  p.read();
  assert.equal(p.due(), false);
  p.changing();
  clock.now = STEP / 3 - 1;
  assert.equal(p.due(), false);
  clock.now = STEP / 3;
  assert.equal(p.due(), true);
});

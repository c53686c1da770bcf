import assert from "node:assert/strict";
import { ContentionGate } from "./contention_gate.ts";

/** A seeded generator, so the counts below are the same on every run. */
function seeded(seed: number): () => number {
  let x = seed;
  return () => {
    x = (x * 1_103_515_245 + 12_345) % 2 ** 31;
    return x / 2 ** 31;
  };
}

Deno.test("contention gate: a connected member never contends; without a snapshot it contends at once", () => {
  let now = 0;
  const gate = new ContentionGate({ slotMs: 5_000, now: () => now, random: () => 0.99 });
  assert.equal(gate.contend(true, 1_000), false);
  assert.equal(gate.contend(false, undefined), true);
  now = 60_000;
  assert.equal(gate.contend(true, undefined), false);
});

Deno.test("contention gate: 1,000 disconnected agents come forward about 3 per step, and all of them eventually", () => {
  let now = 0;
  const random = seeded(7);
  const gates = Array.from(
    { length: 1_000 },
    () => new ContentionGate({ slotMs: 5_000, now: () => now, random }),
  );
  const contending = () => gates.filter((g) => g.contend(false, 1_000)).length;
  const first = contending();
  assert.ok(first >= 1 && first <= 10, `first step: ${first} contenders`);
  now = 5_000 * 10;
  const tenth = contending();
  assert.ok(tenth > first && tenth <= 60, `after 10 steps: ${tenth}`);
  now = 5_000 * 334;
  assert.equal(contending(), 1_000);
});

Deno.test("contention gate: a member that reconnects and loses its stream again draws a new slot", () => {
  let now = 0;
  const draws = [0.99, 0];
  const gate = new ContentionGate({ slotMs: 1_000, now: () => now, random: () => draws.shift()! });
  assert.equal(gate.contend(false, 300), false, "slot 99 of 100");
  now = 50_000;
  assert.equal(gate.contend(false, 300), false);
  assert.equal(gate.contend(true, 300), false);
  now = 50_001;
  assert.equal(gate.contend(false, 300), true, "slot 0 after the second loss");
});

Deno.test("contention gate: a loss between two steps is timed from the member's loss, with a new slot", () => {
  let now = 0;
  const draws = [0, 0.99];
  const gate = new ContentionGate({ slotMs: 1_000, now: () => now, random: () => draws.shift()! });
  // Lost its first stream at 0: slot 0, contends at once.
  assert.equal(gate.contend(false, 300, 0), true);
  // It reconnected and lost the stream again at 40 s, all between two steps: the gate never saw
  // it connected. The new loss draws a new slot (99 of 100) timed from 40 s, not from 0.
  now = 40_500;
  assert.equal(gate.contend(false, 300, 40_000), false, "slot 99 counted from the new loss");
  now = 40_000 + 99_000;
  assert.equal(gate.contend(false, 300, 40_000), true);
});

import assert from "node:assert/strict";
import {
  ContentionGate,
  electionHash,
  type GateSnapshot,
  successorsOf,
} from "./contention_gate.ts";

const STEP = 5_000;
const ROUND = 15_000 + 1_500 + STEP;

function gates(n: number, now: () => number) {
  return Array.from(
    { length: n },
    (_, i) => new ContentionGate({ nodeId: `node-${i}`, stepMs: STEP, roundMs: ROUND, now }),
  );
}

Deno.test("election hash: the same on every node, in [0, 1), different per term", () => {
  const h = electionHash("node-1", 7);
  assert.equal(h, electionHash("node-1", 7));
  assert.ok(h >= 0 && h < 1);
  assert.notEqual(h, electionHash("node-1", 8));
  const ids = Array.from({ length: 1_000 }, (_, i) => `node-${i}`);
  const low = ids.filter((id) => electionHash(id, 7) < 0.1).length;
  assert.ok(low > 60 && low < 140, `${low} of 1,000 below 0.1`);
  assert.deepEqual(
    successorsOf(ids, 7, 3),
    [...ids].sort((a, b) => electionHash(a, 7) - electionHash(b, 7)).slice(0, 3),
  );
});

Deno.test("contention gate: a connected member never contends; without a snapshot it contends at once", () => {
  let now = 0;
  const [gate] = gates(1, () => now);
  assert.equal(gate.contend(true, { term: 1, nodes: 1_000 }), false);
  assert.equal(gate.contend(false, undefined), true);
  now = 60_000;
  assert.equal(gate.contend(true, undefined), false);
});

Deno.test("contention gate: the listed successors contend, round 0 at once and round 1 a step later; nobody else for a round", () => {
  let now = 0;
  const all = gates(1_000, () => now);
  const ids = all.map((_, i) => `node-${i}`);
  // The coordinator (node-0) listed six successors, lowest hashes first.
  const successors = successorsOf(ids.slice(1), 4, 6);
  const snapshot: GateSnapshot = { term: 4, nodes: 1_000, successors };
  const contending = () => ids.filter((_, i) => i > 0 && all[i].contend(false, snapshot, 0)).sort();
  assert.deepEqual(contending(), successors.slice(0, 3).sort());
  now = STEP;
  assert.deepEqual(contending(), successors.slice(0, 6).sort());
  now = STEP + ROUND - 1;
  assert.equal(contending().length, 6);
});

Deno.test("contention gate: 1,000 leaderless agents — never more than about three rounds step at once, and every agent gets its turn", () => {
  let now = 0;
  const all = gates(1_000, () => now);
  const successors = successorsOf(all.map((_, i) => `node-${i}`).slice(1), 9, 6);
  const snapshot: GateSnapshot = { term: 9, nodes: 1_000, successors };
  const seen = new Set<number>();
  let most = 0;
  let total = 0;
  let samples = 0;
  // Sample every step for the whole cycle of rounds (about 2 h at the default lease).
  const rounds = all[1].round(snapshot).rounds;
  assert.equal(rounds, 2 + Math.ceil((1_000 - 6 - 1) / 3));
  for (now = 0; now < STEP + rounds * ROUND; now += STEP) {
    let n = 0;
    for (let i = 1; i < all.length; i++) {
      if (all[i].contend(false, snapshot, 0)) {
        n++;
        seen.add(i);
      }
    }
    most = Math.max(most, n);
    total += n;
    samples++;
  }
  console.log(
    `gate: ${rounds} rounds; contenders per step: at most ${most}, mean ${
      (total / samples).toFixed(1)
    }; ${seen.size} of 999 contended at some point`,
  );
  assert.equal(seen.size, 999, "every agent came forward within one cycle");
  // Three rounds at most overlap (two listed rounds of exactly 3, later rounds about 3 each).
  assert.ok(most <= 20, `at most ${most} contenders in one step`);
  assert.ok(total / samples <= 10, `mean ${total / samples} contenders per step`);
});

Deno.test("contention gate: a small cluster contends at once, all of it, for as long as it is leaderless", () => {
  let now = 0;
  const all = gates(3, () => now);
  const snapshot: GateSnapshot = { term: 2, nodes: 3, successors: ["node-1", "node-2"] };
  for (now = 0; now < 20 * ROUND; now += STEP) {
    assert.ok(all[1].contend(false, snapshot, 0) && all[2].contend(false, snapshot, 0));
  }
});

Deno.test("contention gate: without a list (an older coordinator), an agent places itself by its hash", () => {
  const snapshot: GateSnapshot = { term: 3, nodes: 301 };
  const [gate] = gates(1, () => 0);
  const { round, rounds } = gate.round(snapshot);
  assert.equal(rounds, 100);
  assert.equal(round, Math.floor(electionHash("node-0", 3) * 100));
});

Deno.test("contention gate: a loss between two calls is timed from the member's loss", () => {
  let now = 0;
  const gate = new ContentionGate({
    nodeId: "node-x",
    stepMs: 1_000,
    roundMs: 5_000,
    now: () => now,
  });
  // Listed in round 1: contends one step after its loss.
  const snapshot: GateSnapshot = { term: 5, nodes: 100, successors: ["a", "b", "c", "node-x"] };
  assert.equal(gate.contend(false, snapshot, 0), false);
  now = 1_000;
  assert.equal(gate.contend(false, snapshot, 0), true);
  // It reconnected and lost the stream again at 40 s, all between two calls: timed from 40 s.
  now = 40_500;
  assert.equal(gate.contend(false, snapshot, 40_000), false, "a step from the new loss");
  now = 41_000;
  assert.equal(gate.contend(false, snapshot, 40_000), true);
});

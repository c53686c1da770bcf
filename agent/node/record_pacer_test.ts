import assert from "node:assert/strict";
import { RecordPacer } from "./record_pacer.ts";
import { CONVERGED_RECORDS_PER_S } from "../../core/bucket/node_record.ts";

Deno.test("record pacer: a change write is spread over the window, one per window at most", () => {
  const pacer = new RecordPacer({ nodes: () => 1_000, random: () => 0.5 });
  const window = 1_000 / CONVERGED_RECORDS_PER_S * 1000;
  assert.equal(pacer.delayMs(0), window / 2);
  assert.equal(pacer.delayMs(window / 4), undefined, "the pending write covers a second change");
  // Right after the write: the next comes a whole window after it, not at a random point.
  assert.equal(pacer.delayMs(window / 2 + 1), window - 1);
  // Long after: spread again.
  assert.equal(pacer.delayMs(10 * window), window / 2);
});

Deno.test("record pacer: 1,000 nodes under back-to-back changes write at the bounded rate", () => {
  const nodes = 1_000;
  const pacers = Array.from({ length: nodes }, () => new RecordPacer({ nodes: () => nodes }));
  const writes: number[] = [];
  // A change every 2 s for 10 minutes: every node asks for a write at each one.
  for (let t = 0; t < 600_000; t += 2_000) {
    for (const p of pacers) {
      const d = p.delayMs(t);
      if (d !== undefined) writes.push(t + d);
    }
  }
  writes.sort((a, b) => a - b);
  // The busiest 10 s: at most the bound (and a little for the random spread).
  let busiest = 0;
  for (let i = 0, j = 0; i < writes.length; i++) {
    while (writes[i] - writes[j] >= 10_000) j++;
    busiest = Math.max(busiest, i - j + 1);
  }
  console.log(`record pacer: ${writes.length} writes, busiest 10 s: ${busiest}`);
  assert.ok(busiest <= 2 * CONVERGED_RECORDS_PER_S * 10, `${busiest} writes in 10 s`);
  assert.ok(writes.length <= (600_000 + 60_000) / 1000 * CONVERGED_RECORDS_PER_S);
});

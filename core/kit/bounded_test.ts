import assert from "node:assert/strict";
import { mapBounded } from "./bounded.ts";

Deno.test("mapBounded: keeps order, never exceeds its limit", async () => {
  let inFlight = 0;
  let most = 0;
  const out = await mapBounded([5, 1, 4, 2, 3, 0], 3, async (n, i) => {
    inFlight++;
    most = Math.max(most, inFlight);
    // Settle in an order unlike the input's: later items can finish first.
    for (let k = 0; k < n; k++) await Promise.resolve();
    inFlight--;
    return `${i}:${n}`;
  });
  assert.deepEqual(out, ["0:5", "1:1", "2:4", "3:2", "4:3", "5:0"]);
  assert.equal(most, 3);
});

Deno.test("mapBounded: the first failure is thrown after the started calls settled; no new call starts", async () => {
  const started: number[] = [];
  let settled = 0;
  const err = await mapBounded([0, 1, 2, 3, 4, 5], 2, async (n) => {
    started.push(n);
    await Promise.resolve();
    settled++;
    if (n === 1) throw new Error("boom 1");
    return n;
  }).catch((e) => e as Error);
  assert.equal((err as Error).message, "boom 1");
  assert.equal(settled, started.length, "every started call settled before the throw");
  assert.ok(started.length < 6, `calls after the failure were not started: ${started}`);
});

Deno.test("mapBounded: an empty list and a bad limit", async () => {
  assert.deepEqual(await mapBounded([], 4, () => Promise.resolve(1)), []);
  await assert.rejects(mapBounded([1], 0, () => Promise.resolve(1)), RangeError);
});

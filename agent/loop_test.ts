import assert from "node:assert/strict";
import { Loop } from "./loop.ts";

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

Deno.test("loop: timed passes are full, hints coalesce, the status sink sees every status", async () => {
  const requests: { full: boolean; hints: number }[] = [];
  const statuses: number[] = [];
  const loop = new Loop<number>({
    name: "test",
    intervalMs: 60_000,
    hintDelayMs: 10,
    pass: (request) => {
      requests.push(request);
      return Promise.resolve({ status: requests.length });
    },
    status: (s) => {
      statuses.push(s);
    },
  });
  loop.start();
  await loop.idle();
  for (let i = 0; i < 5; i++) loop.hint();
  await loop.idle();
  await loop.stop();
  assert.deepEqual(requests, [{ full: true, hints: 0 }, { full: false, hints: 5 }]);
  assert.deepEqual(statuses, [1, 2]);
});

Deno.test("loop: failures back off from the interval to the cap, with jitter; success resets", async () => {
  let backOff = true;
  let throws = false;
  const errors: string[] = [];
  const loop = new Loop({
    name: "test",
    intervalMs: 100,
    maxBackoffMs: 1_000,
    random: () => 0.999,
    pass: () => throws ? Promise.reject(new Error("boom")) : Promise.resolve({ backOff }),
    log: {
      debug: () => {},
      info: () => {},
      warn: () => {},
      error: (m, f) => errors.push(`${m}: ${f?.error}`),
    },
  });
  loop.start();
  await loop.idle();
  await loop.stop();
  assert.equal(loop.failures, 1);
  assert.equal(loop.nextDelayMs(), 199, "jitter below interval · 2^failures");
  for (let i = 0; i < 10; i++) {
    loop.start();
    await loop.idle();
    await loop.stop();
  }
  assert.equal(loop.failures, 11);
  assert.equal(loop.nextDelayMs(), 999, "capped");
  throws = true;
  loop.start();
  await loop.idle();
  await loop.stop();
  assert.equal(loop.failures, 12, "a thrown pass is a failure, not the end of the loop");
  assert.deepEqual(errors, ["test pass failed: boom"]);
  throws = backOff = false;
  loop.start();
  await loop.idle();
  await loop.stop();
  assert.equal(loop.failures, 0);
  assert.equal(loop.nextDelayMs(), 100);
});

Deno.test("loop: stop waits for the running pass and ends the timer", async () => {
  let passes = 0;
  const loop = new Loop({
    name: "test",
    intervalMs: 20,
    pass: async () => {
      passes++;
      await sleep(30);
      return {};
    },
  });
  loop.start();
  await sleep(5);
  await loop.stop();
  const after = passes;
  await sleep(80);
  assert.equal(passes, after, "no pass after stop");
  loop.hint();
  await sleep(250);
  assert.equal(passes, after, "hints after stop are ignored");
});

Deno.test("loop: a hint's own delay; a sooner hint brings the pass forward, a later one joins it", async () => {
  const passes: { at: number; hints: number }[] = [];
  const t0 = performance.now();
  const loop = new Loop({
    name: "test",
    intervalMs: 60_000,
    hintDelayMs: 10,
    pass: (request) => {
      passes.push({ at: performance.now() - t0, hints: request.hints });
      return Promise.resolve({});
    },
  });
  loop.start();
  await loop.idle();
  passes.length = 0;
  // A spread hint waits its own delay; a later one joins it.
  loop.hint({ delayMs: 300 });
  loop.hint({ delayMs: 1_000 });
  await loop.idle();
  assert.equal(passes.length, 1);
  assert.equal(passes[0].hints, 2);
  assert.ok(passes[0].at >= 290, `ran after ${passes[0].at} ms`);
  assert.ok(passes[0].at < 1_000, `ran after ${passes[0].at} ms`);
  // A default hint (10 ms) while a spread one is pending brings the pass forward.
  const before = performance.now() - t0;
  loop.hint({ delayMs: 5_000 });
  loop.hint();
  await loop.idle();
  await loop.stop();
  assert.equal(passes.length, 2);
  assert.equal(passes[1].hints, 2);
  assert.ok(passes[1].at - before < 1_000, `ran ${passes[1].at - before} ms after the hints`);
});

import assert from "node:assert/strict";
import { ValidationError } from "../../core/kit/errors.ts";
import type { ApplyResult } from "./dataplane.ts";
import { DataplaneLoop } from "./dataplane_loop.ts";
import { emptyServiceSnapshot } from "./service_snapshot.ts";

/**
 * Records applies and signals each one. `hold()` makes the next applies wait until released, so a
 * test can act while a pass is provably running; `started(n)` resolves once the n-th apply began.
 */
function recorder() {
  const calls: { snapshot: unknown; full: boolean }[] = [];
  const waiters: { n: number; resolve: () => void }[] = [];
  let gate: Promise<void> | undefined;
  return {
    calls,
    hold(): () => void {
      const { promise, resolve } = Promise.withResolvers<void>();
      gate = promise;
      return () => {
        gate = undefined;
        resolve();
      };
    },
    started(n: number): Promise<void> {
      if (calls.length >= n) return Promise.resolve();
      const { promise, resolve } = Promise.withResolvers<void>();
      waiters.push({ n, resolve });
      return promise;
    },
    async apply(snapshot: unknown, options?: { full?: boolean }): Promise<ApplyResult> {
      calls.push({ snapshot, full: options?.full ?? false });
      for (const w of waiters.filter((w) => calls.length >= w.n)) w.resolve();
      await gate;
      return {} as ApplyResult;
    },
  };
}

Deno.test("dataplane loop: a burst of hints costs one pass; hints during a pass one more", async () => {
  const dp = recorder();
  let generation = 0;
  const loop = new DataplaneLoop({
    dataplane: dp,
    snapshot: () => ({ ...emptyServiceSnapshot(), generation: ++generation }),
    scanIntervalMs: 60_000,
    hintDelayMs: 30,
  });
  loop.start(); // the initial full pass
  await loop.idle();
  assert.deepEqual(dp.calls.map((c) => c.full), [true]);

  const release = dp.hold();
  for (let i = 0; i < 20; i++) loop.hint();
  await dp.started(2); // the coalesced pass is running now, held until released
  for (let i = 0; i < 20; i++) loop.hint(); // arrive during it
  release();
  await loop.idle();
  assert.deepEqual(dp.calls.map((c) => c.full), [true, false, false]);
  assert.equal(loop.passes[1].hints, 20);
  assert.equal(loop.passes[2].hints, 20);
  // Each pass read the snapshot afresh.
  assert.deepEqual(dp.calls.map((c) => (c.snapshot as { generation: number }).generation), [
    1,
    2,
    3,
  ]);
  await loop.stop();
  loop.hint();
  await loop.idle(); // waits for any hint timer and the pass it would start
  assert.equal(dp.calls.length, 3, "no pass after stop");
});

Deno.test("dataplane loop: the periodic scan runs full passes without hints", async () => {
  const dp = recorder();
  const loop = new DataplaneLoop({
    dataplane: dp,
    snapshot: () => emptyServiceSnapshot(),
    scanIntervalMs: 40,
  });
  loop.start();
  await dp.started(3); // the start pass and two timed passes, whenever the timer gets to run
  await loop.stop();
  assert.ok(dp.calls.every((c) => c.full));
  assert.ok(loop.passes.every((p) => p.hints === 0));
});

Deno.test("dataplane loop: a failing pass is reported once and retried", async () => {
  let fail = true;
  const logged: string[] = [];
  const loop = new DataplaneLoop({
    dataplane: {
      apply: () =>
        fail ? Promise.reject(new ValidationError("bad vip")) : Promise.resolve({} as ApplyResult),
    },
    snapshot: () => emptyServiceSnapshot(),
    scanIntervalMs: 60_000,
    hintDelayMs: 5,
    log: {
      debug: () => {},
      info: (m) => logged.push(`info ${m}`),
      warn: () => {},
      error: (m, f) => logged.push(`error ${m} ${f?.error}`),
    },
  });
  loop.start();
  await loop.idle();
  loop.hint();
  await loop.idle();
  assert.equal(loop.lastError, "ValidationError: bad vip");
  assert.equal(logged.filter((l) => l.startsWith("error")).length, 1, "logged once");
  fail = false;
  loop.hint();
  await loop.idle();
  assert.equal(loop.lastError, undefined);
  assert.ok(logged.includes("info dataplane converged again"));
  await loop.stop();
});

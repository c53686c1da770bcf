import assert from "node:assert/strict";
import { ValidationError } from "../../core/errors.ts";
import type { ApplyResult } from "./dataplane.ts";
import { DataplaneLoop } from "./dataplane_loop.ts";

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Records applies; each takes `ms`. */
function recorder(ms = 0) {
  const calls: { snapshot: unknown; full: boolean }[] = [];
  return {
    calls,
    async apply(snapshot: unknown, options?: { full?: boolean }): Promise<ApplyResult> {
      calls.push({ snapshot, full: options?.full ?? false });
      await sleep(ms);
      return {} as ApplyResult;
    },
  };
}

Deno.test("dataplane loop: a burst of hints costs one pass; hints during a pass one more", async () => {
  const dp = recorder(60);
  let generation = 0;
  const loop = new DataplaneLoop({
    dataplane: dp,
    snapshot: () => ({ generation: ++generation }),
    scanIntervalMs: 60_000,
    hintDelayMs: 30,
  });
  loop.start(); // the initial full pass
  await loop.idle();
  assert.deepEqual(dp.calls.map((c) => c.full), [true]);

  for (let i = 0; i < 20; i++) loop.hint();
  await sleep(50); // the coalesced pass is running now
  for (let i = 0; i < 20; i++) loop.hint(); // arrive during it
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
  await sleep(60);
  assert.equal(dp.calls.length, 3, "no pass after stop");
});

Deno.test("dataplane loop: the periodic scan runs full passes without hints", async () => {
  const dp = recorder();
  const loop = new DataplaneLoop({ dataplane: dp, snapshot: () => ({}), scanIntervalMs: 40 });
  loop.start();
  await sleep(150);
  await loop.stop();
  assert.ok(dp.calls.length >= 3, `${dp.calls.length} passes`);
  assert.ok(dp.calls.every((c) => c.full));
});

Deno.test("dataplane loop: a failing pass is reported once and retried", async () => {
  let fail = true;
  const logged: string[] = [];
  const loop = new DataplaneLoop({
    dataplane: {
      apply: () =>
        fail ? Promise.reject(new ValidationError("bad vip")) : Promise.resolve({} as ApplyResult),
    },
    snapshot: () => ({}),
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

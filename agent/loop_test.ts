import assert from "node:assert/strict";
import { Loop, type LoopTimers } from "./loop.ts";

/** Lets every pending promise reaction run (one macrotask turn; no time passes on `ManualTimers`). */
const settle = () => new Promise((r) => setTimeout(r, 0));

/** A clock that moves only when the test advances it, firing due timers in order. */
class ManualTimers implements LoopTimers {
  #now = 0;
  #nextId = 1;
  readonly #timers = new Map<number, { at: number; fn: () => void }>();
  now(): number {
    return this.#now;
  }
  setTimeout(fn: () => void, ms: number): number {
    const id = this.#nextId++;
    this.#timers.set(id, { at: this.#now + Math.max(0, ms), fn });
    return id;
  }
  clearTimeout(id: unknown): void {
    if (typeof id === "number") this.#timers.delete(id);
  }
  /** Timers set and not yet fired or cleared. */
  get pending(): number {
    return this.#timers.size;
  }
  /** Moves the clock `ms` forward, firing each timer due on the way (and letting it settle). */
  async advance(ms: number): Promise<void> {
    const end = this.#now + ms;
    for (;;) {
      const [next] = [...this.#timers].filter(([, t]) => t.at <= end)
        .sort(([ia, a], [ib, b]) => a.at - b.at || ia - ib);
      if (!next) break;
      this.#timers.delete(next[0]);
      this.#now = next[1].at;
      next[1].fn();
      await settle();
    }
    this.#now = end;
    await settle();
  }
}

Deno.test("loop: timed passes are full, hints coalesce, the status sink sees every status", async () => {
  const clock = new ManualTimers();
  const requests: { full: boolean; hints: number; at: number }[] = [];
  const statuses: number[] = [];
  const loop = new Loop<number>({
    name: "test",
    intervalMs: 60_000,
    hintDelayMs: 10,
    timers: clock,
    pass: (request) => {
      requests.push({ ...request, at: clock.now() });
      return Promise.resolve({ status: requests.length });
    },
    status: (s) => {
      statuses.push(s);
    },
  });
  loop.start();
  await loop.idle();
  for (let i = 0; i < 5; i++) loop.hint();
  await clock.advance(9);
  assert.equal(requests.length, 1, "the hints wait their coalescing delay");
  await clock.advance(1);
  await loop.idle();
  // The interval's timed pass: full, at 60 s.
  await clock.advance(60_000 - 10);
  await loop.idle();
  await loop.stop();
  assert.deepEqual(requests, [
    { full: true, hints: 0, at: 0 },
    { full: false, hints: 5, at: 10 },
    { full: true, hints: 0, at: 60_000 },
  ]);
  assert.deepEqual(statuses, [1, 2, 3]);
  assert.equal(clock.pending, 0, "stop leaves no timer");
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
    timers: new ManualTimers(),
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
  const clock = new ManualTimers();
  let passes = 0;
  let release = () => {};
  const loop = new Loop({
    name: "test",
    intervalMs: 20,
    timers: clock,
    pass: async () => {
      passes++;
      await new Promise<void>((r) => release = r);
      return {};
    },
  });
  loop.start();
  await settle();
  assert.equal(passes, 1);
  let stopped = false;
  const stopping = loop.stop().then(() => stopped = true);
  await settle();
  assert.equal(stopped, false, "stop waits for the running pass");
  release();
  await stopping;
  assert.equal(clock.pending, 0, "no timer left");
  await clock.advance(1_000);
  assert.equal(passes, 1, "no pass after stop");
  loop.hint();
  await clock.advance(1_000);
  assert.equal(passes, 1, "hints after stop are ignored");
});

Deno.test("loop: a hint's own delay; a sooner hint brings the pass forward, a later one joins it", async () => {
  const clock = new ManualTimers();
  const passes: { at: number; hints: number }[] = [];
  const loop = new Loop({
    name: "test",
    intervalMs: 60_000,
    hintDelayMs: 10,
    timers: clock,
    pass: (request) => {
      passes.push({ at: clock.now(), hints: request.hints });
      return Promise.resolve({});
    },
  });
  loop.start();
  await loop.idle();
  passes.length = 0;
  // A spread hint waits its own delay; a later one joins it.
  loop.hint({ delayMs: 300 });
  loop.hint({ delayMs: 1_000 });
  await clock.advance(299);
  assert.deepEqual(passes, [], "not before its delay");
  await clock.advance(1);
  await loop.idle();
  assert.deepEqual(passes, [{ at: 300, hints: 2 }]);
  await clock.advance(1_000);
  assert.equal(passes.length, 1, "the later hint joined the first pass");
  // A default hint (10 ms) while a spread one is pending brings the pass forward.
  loop.hint({ delayMs: 5_000 });
  loop.hint();
  await clock.advance(10);
  await loop.idle();
  assert.deepEqual(passes[1], { at: 1_310, hints: 2 });
  await clock.advance(10_000);
  await loop.stop();
  assert.equal(passes.length, 2, "the spread hint's own timer was replaced");
});

Deno.test("loop: fixedRate timed passes begin an interval apart however long each takes; without it the period stretches", async () => {
  const starts = async (fixedRate: boolean) => {
    const clock = new ManualTimers();
    const at: number[] = [];
    const loop = new Loop({
      name: "poll",
      intervalMs: 2_000,
      fixedRate,
      timers: clock,
      pass: async () => {
        at.push(clock.now());
        // Each pass takes 300 ms of the clock (a slow GET); the third one 2,500 ms.
        await new Promise((r) =>
          clock.setTimeout(() => r(undefined), at.length === 3 ? 2_500 : 300)
        );
        return {};
      },
    });
    loop.start();
    await clock.advance(9_000);
    await loop.stop();
    return at;
  };
  // A pass longer than the interval is followed at once (3rd: 4,000 + 2,500).
  assert.deepEqual(await starts(true), [0, 2_000, 4_000, 6_500, 8_500]);
  assert.deepEqual(await starts(false), [0, 2_300, 4_600]);
});

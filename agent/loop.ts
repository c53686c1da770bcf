/**
 * The loop runner every agent loop uses: a pass on start and then every interval, extra passes on
 * hints (coalesced), bounded exponential backoff with full jitter after a failed pass, a status
 * sink, and a stop that waits for the running pass.
 *
 * - `hint()` schedules a pass after a short coalescing delay: a burst of hints costs one pass;
 *   hints arriving during a pass cost one more pass after it, never more. Hint passes are not
 *   `full` and do not move the interval timer.
 * - The interval timer runs a `full` pass, an interval after the last one ended (`fixedRate`: an
 *   interval after it began, so a slow pass does not stretch the period); after a pass that failed
 *   (threw, or asked to back off) the next timed pass waits
 *   `max(interval, jitter(interval · 2^failures))`, capped at `maxBackoffMs`.
 * - A pass that throws never stops the loop (a bug or a local fault must not kill the agent): it is
 *   logged and counts as a failure.
 */

import type { Logger } from "../core/kit/log.ts";
import { silentLogger } from "../core/kit/log.ts";
import { backoffMs } from "../core/kit/retry.ts";

/** What a pass is asked to do. */
export interface LoopRequest {
  /** True for the start and interval passes (a full convergence scan); false for hint passes. */
  full: boolean;
  /** Hints folded into this pass. */
  hints: number;
}

/** What a pass reports. */
export interface LoopOutcome<S> {
  /** Handed to the status sink. */
  status?: S;
  /** True when the pass failed in a way that warrants backing off (e.g. the bucket is down). */
  backOff?: boolean;
}

/** The clock and timers a loop runs on; tests inject a manual one (`realLoopTimers` otherwise). */
export interface LoopTimers {
  /** Monotonic milliseconds. */
  now(): number;
  /** Calls `fn` once after `ms`; returns an id for `clearTimeout`. */
  setTimeout(fn: () => void, ms: number): unknown;
  /** Cancels a pending `setTimeout` (an unknown or undefined id is ignored). */
  clearTimeout(id: unknown): void;
}

/** The real clock (`performance.now`) and the runtime's timers. */
export const realLoopTimers: LoopTimers = {
  now: () => performance.now(),
  setTimeout: (fn, ms) => setTimeout(fn, ms),
  clearTimeout: (id) => clearTimeout(id as ReturnType<typeof setTimeout> | undefined),
};

/** Options of `Loop`. */
export interface LoopOptions<S> {
  /** Names the loop in logs. */
  name: string;
  /** Interval of the timed (full) passes. */
  intervalMs: number;
  /**
   * Timed passes begin every `intervalMs` from the previous one's start, not its end (a pass
   * longer than the interval is followed at once); default false. For polls whose period is a
   * latency bound (the coordinator's announcements, spec §7.9).
   */
  fixedRate?: boolean;
  /** One pass. May throw: the runner logs it and backs off. */
  pass(request: LoopRequest): Promise<LoopOutcome<S>>;
  /** Where each pass's status goes (e.g. the status file). A failing sink is logged, not fatal. */
  status?(status: S): Promise<void> | void;
  /** Coalescing delay of hints (default 200 ms). */
  hintDelayMs?: number;
  /** Cap of the backoff after failed passes (default 30 s). */
  maxBackoffMs?: number;
  /** Source of jitter in [0, 1) (default Math.random). */
  random?: () => number;
  /** Clock and timers (default `realLoopTimers`). */
  timers?: LoopTimers;
  log?: Logger;
}

/** Runs passes on a timer and on hints. `start()`, then `stop()`. */
export class Loop<S = unknown> {
  readonly #options: LoopOptions<S>;
  readonly #log: Logger;
  readonly #timers: LoopTimers;
  #timer?: unknown;
  #hintTimer?: unknown;
  /** When the pending hint's pass is due (`timers.now()` time). */
  #hintDue = Infinity;
  #running?: Promise<void>;
  #pendingHints = 0;
  #pendingFull = false;
  #stopped = true;
  #failures = 0;

  constructor(options: LoopOptions<S>) {
    this.#options = options;
    this.#log = options.log ?? silentLogger;
    this.#timers = options.timers ?? realLoopTimers;
  }

  /** Consecutive failed passes (0 after a good one). */
  get failures(): number {
    return this.#failures;
  }

  /** Starts: a full pass now, then one per interval (or backoff). */
  start(): void {
    if (!this.#stopped) return;
    this.#stopped = false;
    this.#request(true);
  }

  /**
   * A refresh hint: something changed (coalesced). `delayMs` replaces the loop's coalescing delay
   * for this hint (e.g. a write spread over the cluster); a pending hint due sooner takes it along,
   * and a hint due sooner than the pending one brings the pass forward.
   */
  hint(options: { delayMs?: number } = {}): void {
    if (this.#stopped) return;
    this.#pendingHints++;
    if (this.#running) return;
    const due = this.#timers.now() + (options.delayMs ?? this.#options.hintDelayMs ?? 200);
    if (this.#hintTimer !== undefined) {
      if (due >= this.#hintDue) return;
      this.#timers.clearTimeout(this.#hintTimer);
    }
    this.#hintDue = due;
    this.#hintTimer = this.#timers.setTimeout(() => {
      this.#hintTimer = undefined;
      this.#request(false);
    }, Math.max(0, due - this.#timers.now()));
  }

  /** Stops the timers and waits for a running pass. */
  async stop(): Promise<void> {
    this.#stopped = true;
    this.#timers.clearTimeout(this.#timer);
    this.#timers.clearTimeout(this.#hintTimer);
    this.#timer = this.#hintTimer = undefined;
    await this.#running;
  }

  /**
   * Waits until no pass is running or pending (tests). With injected timers, a pending hint waits
   * for the test to advance them.
   */
  async idle(): Promise<void> {
    while (this.#running || this.#hintTimer !== undefined) {
      await (this.#running ?? new Promise((r) => setTimeout(r, 10)));
    }
  }

  #request(full: boolean): void {
    if (this.#stopped) return;
    this.#pendingFull ||= full;
    if (this.#running) return;
    this.#timers.clearTimeout(this.#hintTimer);
    this.#hintTimer = undefined;
    this.#running = this.#drain().finally(() => {
      this.#running = undefined;
    });
  }

  async #drain(): Promise<void> {
    while (!this.#stopped && (this.#pendingFull || this.#pendingHints > 0)) {
      const request = { full: this.#pendingFull, hints: this.#pendingHints };
      this.#pendingFull = false;
      this.#pendingHints = 0;
      const startedAt = this.#timers.now();
      const ok = await this.#pass(request);
      this.#failures = ok ? 0 : this.#failures + 1;
      if (request.full) this.#scheduleTimedPass(this.#timers.now() - startedAt);
    }
  }

  /** Runs one pass and its status sink; false when the pass failed. */
  async #pass(request: LoopRequest): Promise<boolean> {
    const { name } = this.#options;
    let outcome: LoopOutcome<S>;
    try {
      outcome = await this.#options.pass(request);
    } catch (err) {
      this.#log.error(`${name} pass failed`, {
        error: (err as Error).message,
        stack: (err as Error).stack,
      });
      return false;
    }
    if (outcome.status !== undefined && this.#options.status) {
      try {
        await this.#options.status(outcome.status);
      } catch (err) {
        this.#log.warn("cannot write status", { loop: name, error: (err as Error).message });
      }
    }
    return !outcome.backOff;
  }

  /** Arms the next timed pass; `tookMs`: how long the full pass that ended took. */
  #scheduleTimedPass(tookMs = 0): void {
    if (this.#stopped) return;
    this.#timers.clearTimeout(this.#timer);
    const delayMs = this.#options.fixedRate && this.#failures === 0
      ? Math.max(0, this.#options.intervalMs - tookMs)
      : this.nextDelayMs();
    this.#timer = this.#timers.setTimeout(() => {
      this.#timer = undefined;
      this.#request(true);
    }, delayMs);
  }

  /** The wait before the next timed pass: the interval, or the backoff after failures. */
  nextDelayMs(): number {
    const { intervalMs } = this.#options;
    if (this.#failures === 0) return intervalMs;
    const policy = { attempts: 0, baseMs: intervalMs, maxMs: this.#options.maxBackoffMs ?? 30_000 };
    return Math.max(intervalMs, backoffMs(policy, this.#failures, this.#options.random));
  }
}

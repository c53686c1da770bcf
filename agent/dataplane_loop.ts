/**
 * The dataplane loop: keeps the node's dataplane equal to the current
 * Service snapshot.
 *
 * - `hint()` (called by the kubelet Pod watcher on every Pod event, and by
 *   discovery when peers' endpoints change) schedules a pass after a short
 *   coalescing delay: a burst of events costs one pass; events arriving
 *   during a pass cost one more pass after it, never more.
 * - A periodic convergence scan runs a full pass (maps read back from the
 *   kernel, interfaces re-discovered, filters re-checked) even without hints.
 * - A failed pass (invalid snapshot, kernel error) changes nothing further,
 *   is logged when the error changes, and is retried by the next hint or scan.
 */

import type { Logger } from "../core/log.ts";
import { silentLogger } from "../core/log.ts";
import type { ApplyResult } from "./dataplane.ts";

/** What the loop drives (a `Dataplane`). */
export interface DataplaneTarget {
  apply(snapshot: unknown, options?: { full?: boolean }): Promise<ApplyResult>;
}

/** Options of `DataplaneLoop`. */
export interface DataplaneLoopOptions {
  dataplane: DataplaneTarget;
  /** The current Service snapshot (validated by the dataplane). */
  snapshot: () => unknown | Promise<unknown>;
  /** Full convergence scan interval (default 30 s). */
  scanIntervalMs?: number;
  /** Coalescing delay of hints (default 200 ms). */
  hintDelayMs?: number;
  log?: Logger;
}

/** The outcome of one pass. */
export interface LoopPass {
  full: boolean;
  /** Hints folded into this pass. */
  hints: number;
  result?: ApplyResult;
  error?: string;
}

type ResolvedOptions = Required<DataplaneLoopOptions>;

/** Runs passes on hints and on a timer. `start()`, then `stop()`. */
export class DataplaneLoop {
  readonly #o: ResolvedOptions;
  #timer?: ReturnType<typeof setInterval>;
  #hintTimer?: ReturnType<typeof setTimeout>;
  #running?: Promise<void>;
  #pendingHints = 0;
  #pendingFull = false;
  #stopped = true;
  #lastError?: string;
  /** Passes run so far (for status and tests). */
  readonly passes: LoopPass[] = [];

  constructor(options: DataplaneLoopOptions) {
    this.#o = {
      scanIntervalMs: 30_000,
      hintDelayMs: 200,
      log: silentLogger,
      ...options,
    };
  }

  /** Starts: a full pass now, then one every `scanIntervalMs`. */
  start(): void {
    if (!this.#stopped) return;
    this.#stopped = false;
    this.#request(true);
    this.#timer = setInterval(() => this.#request(true), this.#o.scanIntervalMs);
  }

  /** A refresh hint: something changed (coalesced). */
  hint(): void {
    if (this.#stopped) return;
    this.#pendingHints++;
    if (this.#hintTimer !== undefined || this.#running) return;
    this.#hintTimer = setTimeout(() => {
      this.#hintTimer = undefined;
      this.#request(false);
    }, this.#o.hintDelayMs);
  }

  /** The last pass's error, if it failed. */
  get lastError(): string | undefined {
    return this.#lastError;
  }

  /** Stops the timers and waits for a running pass. Does not unload the dataplane. */
  async stop(): Promise<void> {
    this.#stopped = true;
    clearInterval(this.#timer);
    clearTimeout(this.#hintTimer);
    this.#hintTimer = undefined;
    await this.#running;
  }

  /** Waits until no pass is running or pending (tests). */
  async idle(): Promise<void> {
    while (this.#running || this.#hintTimer !== undefined) {
      await (this.#running ?? new Promise((r) => setTimeout(r, 10)));
    }
  }

  #request(full: boolean): void {
    if (this.#stopped) return;
    this.#pendingFull ||= full;
    if (this.#running) return;
    clearTimeout(this.#hintTimer);
    this.#hintTimer = undefined;
    this.#running = this.#drain().finally(() => {
      this.#running = undefined;
    });
  }

  async #drain(): Promise<void> {
    while (!this.#stopped && (this.#pendingFull || this.#pendingHints > 0)) {
      const full = this.#pendingFull;
      const hints = this.#pendingHints;
      this.#pendingFull = false;
      this.#pendingHints = 0;
      this.passes.push(await this.#pass(full, hints));
    }
  }

  async #pass(full: boolean, hints: number): Promise<LoopPass> {
    try {
      const snapshot = await this.#o.snapshot();
      const result = await this.#o.dataplane.apply(snapshot, { full });
      if (this.#lastError !== undefined) this.#o.log.info("dataplane converged again");
      this.#lastError = undefined;
      return { full, hints, result };
    } catch (err) {
      const error = err instanceof Error ? `${err.name}: ${err.message}` : String(err);
      if (error !== this.#lastError) {
        this.#o.log.error("dataplane pass failed (last applied state kept)", { error });
      }
      this.#lastError = error;
      return { full, hints, error };
    }
  }
}

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
 *   is logged when the error changes, and is retried by the next hint or scan
 *   (the scan backs off while passes keep failing; see `agent/loop.ts`).
 */

import type { ServiceSnapshot } from "./service_snapshot.ts";
import type { Logger } from "../../core/kit/log.ts";
import { silentLogger } from "../../core/kit/log.ts";
import type { ApplyResult } from "./dataplane.ts";
import { Loop } from "../loop.ts";

/** What the loop drives (a `Dataplane`). */
export interface DataplaneTarget {
  apply(snapshot: ServiceSnapshot, options?: { full?: boolean }): Promise<ApplyResult>;
}

/** Options of `DataplaneLoop`. */
export interface DataplaneLoopOptions {
  dataplane: DataplaneTarget;
  /**
   * The current Service snapshot (validated by the dataplane); undefined when there is nothing to
   * apply yet (the pass is skipped: nothing changes, nothing is reported as failed).
   */
  snapshot: () => ServiceSnapshot | undefined | Promise<ServiceSnapshot | undefined>;
  /** Called after every pass (for status files). */
  onPass?: (pass: LoopPass) => void;
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
  /** No snapshot to apply yet. */
  skipped?: boolean;
}

/** Runs dataplane passes on hints and on a timer (through `Loop`). `start()`, then `stop()`. */
export class DataplaneLoop {
  readonly #dataplane: DataplaneTarget;
  readonly #snapshot: DataplaneLoopOptions["snapshot"];
  readonly #log: Logger;
  readonly #loop: Loop;
  readonly #onPass?: (pass: LoopPass) => void;
  #lastError?: string;
  /** Passes run so far (for status and tests). */
  readonly passes: LoopPass[] = [];

  constructor(options: DataplaneLoopOptions) {
    this.#dataplane = options.dataplane;
    this.#snapshot = options.snapshot;
    this.#log = options.log ?? silentLogger;
    this.#onPass = options.onPass;
    this.#loop = new Loop({
      name: "dataplane",
      intervalMs: options.scanIntervalMs ?? 30_000,
      hintDelayMs: options.hintDelayMs ?? 200,
      log: this.#log,
      pass: async ({ full, hints }) => {
        const pass = await this.#pass(full, hints);
        this.passes.push(pass);
        if (this.passes.length > 100) this.passes.splice(0, this.passes.length - 100);
        this.#onPass?.(pass);
        return { backOff: pass.error !== undefined };
      },
    });
  }

  /** Starts: a full pass now, then one every `scanIntervalMs`. */
  start(): void {
    this.#loop.start();
  }

  /** A refresh hint: something changed (coalesced). */
  hint(): void {
    this.#loop.hint();
  }

  /** The last pass's error, if it failed. */
  get lastError(): string | undefined {
    return this.#lastError;
  }

  /** Stops the timers and waits for a running pass. Does not unload the dataplane. */
  stop(): Promise<void> {
    return this.#loop.stop();
  }

  /** Waits until no pass is running or pending (tests). */
  idle(): Promise<void> {
    return this.#loop.idle();
  }

  async #pass(full: boolean, hints: number): Promise<LoopPass> {
    try {
      const snapshot = await this.#snapshot();
      if (snapshot === undefined) return { full, hints, skipped: true };
      const result = await this.#dataplane.apply(snapshot, { full });
      if (this.#lastError !== undefined) this.#log.info("dataplane converged again");
      this.#lastError = undefined;
      return { full, hints, result };
    } catch (err) {
      const error = err instanceof Error ? `${err.name}: ${err.message}` : String(err);
      if (error !== this.#lastError) {
        this.#log.error("dataplane pass failed (last applied state kept)", { error });
      }
      this.#lastError = error;
      return { full, hints, error };
    }
  }
}

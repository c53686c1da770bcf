/**
 * When a node rewrites its record after its convergence changed (spec §5.5, §7.9): at a random
 * point of the window `convergedRecordSpreadMs(N)` (N from the mesh snapshot), and never sooner
 * than one window after its previous change write, so a cluster of N nodes writes at most about
 * `CONVERGED_RECORDS_PER_S` records per second however often applies come. A change while a write
 * is still pending asks for none: that write reads the node's state when it runs.
 */

import { convergedRecordSpreadMs } from "../../core/bucket/node_record.ts";

/** Options of `RecordPacer`. */
export interface RecordPacerOptions {
  /** The cluster's size, when known (the mesh snapshot's `nodes`). */
  nodes?: () => number | undefined;
  random?: () => number;
}

/** Paces one node's change-triggered record writes. */
export class RecordPacer {
  readonly #o: RecordPacerOptions;
  /** When the last change write was scheduled to run (ms, the caller's clock). */
  #due?: number;

  constructor(options: RecordPacerOptions = {}) {
    this.#o = options;
  }

  /**
   * The delay (ms) of the write a change at `now` asks for, or undefined when the pending write
   * covers it (the caller hints its record loop with the delay).
   */
  delayMs(now: number): number | undefined {
    if (this.#due !== undefined && this.#due > now) return undefined;
    const window = convergedRecordSpreadMs(this.#o.nodes?.());
    const random = this.#o.random ?? Math.random;
    const due = Math.max(now + random() * window, (this.#due ?? -Infinity) + window);
    this.#due = due;
    return due - now;
  }
}

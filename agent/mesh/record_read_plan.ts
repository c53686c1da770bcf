/**
 * When a mesh member reads the coordinator record `dns/coordinator.json` (spec §7.9, bounded
 * election). The record changes only when a lease is won, so while no coordinator answers a
 * member reads it on a plan, never at each reconnect attempt (between reads it retries the
 * endpoint it knows, which costs the bucket nothing):
 *
 * - starting (no stream ever delivered a snapshot): at once, then once per election step;
 * - after losing a stream that delivered snapshots: once when a successor has had time to take
 *   the lease — a step after a handover (the coordinator stopped or lost its lease and said so),
 *   `takeoverMs` after a crash (the lease must run out first) — once more a step after the whole
 *   cluster's first reads (a takeover that came late), then once per `everyMs` (the lease
 *   period, ±20 %) while the cluster stays leaderless;
 * - when this node wrote the record: at once; when a new holder was seen (a lost takeover race,
 *   a newer term in the lease object): a third of a step later.
 *
 * The first two reads after a loss are spread uniformly over `spreadMs(nodes)` — about 100 reads
 * per election step across the cluster, at most one lease period — so a thousand members that
 * lost the same coordinator do not read in one burst. Each member reads at most once per step,
 * and about once per lease period while leaderless.
 */

/** Cluster-wide record reads per election step the first read after a loss is spread to. */
export const RECORD_READS_PER_STEP = 100;

/** Options of `RecordReadPlan`. */
export interface RecordReadPlanOptions {
  /** The election step: the least time between two reads. */
  stepMs: number;
  /** After a crash, when a successor has taken the lease over (lease + margin + a step). */
  takeoverMs: number;
  /** Reads after that, while no coordinator answers (the lease). */
  everyMs: number;
  now?: () => number;
  random?: () => number;
}

/** How a stream that delivered snapshots ended. */
export interface StreamLoss {
  /** When (default now). */
  at?: number;
  /** Members of the last snapshot (spreads the first read). */
  nodes?: number;
  /** The coordinator said it hands over (stopped, or lost its lease): a successor comes soon. */
  handover?: boolean;
}

/** One member's plan of record reads. */
export class RecordReadPlan {
  readonly #o: RecordReadPlanOptions;
  /** When the next read may come. */
  #nextAt = -Infinity;
  /** True after a loss, until the member connects again (`connected`). */
  #leaderless = false;
  /** The loss: when, its first read's wait, its spread; reads since. */
  #loss?: { at: number; wait: number; spread: number; reads: number };
  /** Reads made (tests and status). */
  reads = 0;

  constructor(options: RecordReadPlanOptions) {
    this.#o = options;
  }

  #now(): number {
    return this.#o.now ? this.#o.now() : performance.now();
  }

  #random(): number {
    return this.#o.random ? this.#o.random() : Math.random();
  }

  /** Over how long the first read after a loss is spread, for a cluster of `nodes`. */
  spreadMs(nodes = 0): number {
    const { stepMs, everyMs } = this.#o;
    return Math.min(everyMs, stepMs * nodes / RECORD_READS_PER_STEP);
  }

  /**
   * Until when, after the last loss, a successor is due: the latest second read of the plan (its
   * wait, two spreads, two steps); undefined while connected or starting.
   */
  electionEndsAt(): number | undefined {
    const loss = this.#leaderless ? this.#loss : undefined;
    return loss && loss.at + loss.wait + 2 * loss.spread + 2 * this.#o.stepMs;
  }

  /** When the next read is due (monotonic ms; -Infinity: now). */
  get nextAt(): number {
    return this.#nextAt;
  }

  /** True when an attempt should read the record now. */
  due(): boolean {
    return this.#now() >= this.#nextAt;
  }

  /** An attempt read the record (or tried to): plans the next read. */
  read(): void {
    const now = this.#now();
    this.reads++;
    const { stepMs, everyMs } = this.#o;
    const loss = this.#leaderless ? this.#loss : undefined;
    if (!loss) {
      this.#nextAt = now + stepMs * (0.8 + 0.4 * this.#random());
      return;
    }
    loss.reads++;
    // The second read: a step after the cluster's first reads, spread the same way.
    const planned = loss.reads === 1
      ? loss.at + loss.wait + stepMs + loss.spread * (1 + this.#random())
      : now + everyMs * (0.8 + 0.4 * this.#random());
    this.#nextAt = Math.max(planned, now + stepMs);
  }

  /** A stream that delivered snapshots ended: the plan after a loss. */
  lost(loss: StreamLoss = {}): void {
    const at = loss.at ?? this.#now();
    this.#leaderless = true;
    const wait = loss.handover ? this.#o.stepMs : this.#o.takeoverMs;
    const spread = this.spreadMs(loss.nodes);
    this.#loss = { at, wait, spread, reads: 0 };
    this.#nextAt = at + wait + spread * this.#random();
  }

  /** A stream delivered a snapshot: the member is connected (the plan starts over at a loss). */
  connected(): void {
    this.#leaderless = false;
  }

  /** This node just wrote the record: the next attempt reads it. */
  changed(): void {
    this.#nextAt = -Infinity;
  }

  /** A new lease holder was seen: the record follows within a few requests; read it soon. */
  changing(): void {
    this.#nextAt = Math.min(this.#nextAt, this.#now() + this.#o.stepMs / 3);
  }
}

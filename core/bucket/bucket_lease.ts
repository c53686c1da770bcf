/**
 * A lease on one bucket object, by conditional writes only: it elects one holder among agents
 * that share nothing but the bucket (spec §8.5). Used for the workload CA leader
 * (`identity/ca-leader.json`); generic, so other single-writer jobs can reuse it.
 *
 * Safety (never two holders, whatever the wall clocks say):
 * - A holder counts its lease from the moment it SENT the write that took or renewed it, on its
 *   own monotonic clock, and stops acting `marginMs` before `durationMs` has passed.
 * - A contender never compares wall clocks: it takes over only after it has seen the same lease
 *   ETag, unchanged, for `durationMs + marginMs` on ITS OWN monotonic clock, counted from the
 *   moment it RECEIVED the first read showing that ETag (which is after the write landed, which
 *   is after the holder sent it). Its takeover is a write `If-Match` that ETag, so of several
 *   contenders one wins and a renewal that lands first defeats them all.
 * - Every write carries a random nonce, so its bytes (and S3's MD5 ETag) always change.
 * - `term` is a fencing token: +1 on every takeover. Writers of protected objects record it and
 *   refuse to overwrite a higher one; a new holder first writes its term into the protected object
 *   so a paused former holder's late conditional write fails.
 * - Release (clean shutdown) stops acting first, then writes `released: true` (no delete: the
 *   node role cannot delete under `identity/`); a released lease is taken over at once.
 *
 * Only clock RATE differences between nodes matter (they are bounded by `marginMs`), not offsets.
 */

import { PodminError, PreconditionFailedError } from "../kit/errors.ts";
import { getIfExists, type ObjectStore } from "../store/object_store.ts";
import { API_VERSION } from "../model/resources.ts";
import { checkNodeId } from "../model/names.ts";

/** The lease object. */
export interface LeaseDocument {
  apiVersion: typeof API_VERSION;
  kind: "Lease";
  /** The holder's node id. */
  holder: string;
  /** Fencing token: +1 on every takeover, never lower than a term a protected object records. */
  term: number;
  /** How long the holder may act after sending this write (its promise to contenders). */
  durationMs: number;
  /** The holder's wall clock when it wrote (informational: nobody computes with it). */
  renewedAt: string;
  /** True when the holder gave the lease up (clean shutdown). */
  released: boolean;
  /** Random: every write has new bytes and a new ETag. */
  nonce: string;
}

/** Clocks of the lease: monotonic for every decision, wall only for the informational field. */
export interface LeaseClock {
  monotonicMs(): number;
  wallMs(): number;
}

/** The process's clocks. */
export const systemLeaseClock: LeaseClock = {
  monotonicMs: () => performance.now(),
  wallMs: () => Date.now(),
};

/** Bounds of a lease duration read from the bucket (untrusted input). */
export const LEASE_DURATION_BOUNDS = { minMs: 100, maxMs: 3600_000 } as const;

const MAX_LEASE_BYTES = 4096;

/** Options of `BucketLease`. */
export interface BucketLeaseOptions {
  store: ObjectStore;
  /** The lease object's key (built by `core/bucket/bucket_layout.ts`). */
  key: string;
  /** This contender's node id. */
  holder: string;
  /** The lease duration this contender promises when it holds the lease. */
  durationMs: number;
  /** Safety margin for clock-rate differences and scheduling (default: a tenth, ≤ 5 s). */
  marginMs?: number;
  clock?: LeaseClock;
}

/** What one `step` saw and did. */
export interface LeaseStatus {
  /** True while this contender holds the lease (its deadline has not passed). */
  leader: boolean;
  /** The term this contender holds, when leader. */
  term?: number;
  /** Leadership left, when leader. */
  remainingMs?: number;
  /** What `step` did. */
  action: "created" | "renewed" | "took-over" | "observed" | "lost" | "raced";
  /** The lease object as last read (absent: no lease object yet; `corrupt`: unreadable). */
  seen?: {
    holder?: string;
    term?: number;
    released?: boolean;
    corrupt?: string;
    /** How long this contender has seen this exact version unchanged (its own clock). */
    unchangedMs: number;
  };
}

/** Options of `BucketLease.step`. */
export interface LeaseStepOptions {
  /**
   * The highest term a protected object records. A taken lease gets a term above it; a held
   * lease whose term is below it is renewed with a term above it (after the lease object was
   * recreated, the protected object would otherwise refuse every writer).
   */
  knownTerm?: number;
}

interface Held {
  etag: string;
  term: number;
  /** Monotonic time after which this contender no longer acts as holder. */
  deadline: number;
}

interface Observed {
  etag: string;
  /** Monotonic time the first read showing `etag` came back. */
  since: number;
}

/** One contender's view of, and hold on, a lease object. */
export class BucketLease {
  readonly #o: BucketLeaseOptions;
  readonly #clock: LeaseClock;
  readonly #marginMs: number;
  #held?: Held;
  #observed?: Observed;
  /** The highest term this contender has seen, so a recreated lease object never reuses one. */
  #maxTerm = 0;

  constructor(options: BucketLeaseOptions) {
    checkNodeId(options.holder);
    checkDuration(options.durationMs, "lease duration");
    this.#o = options;
    this.#clock = options.clock ?? systemLeaseClock;
    this.#marginMs = options.marginMs ?? defaultMarginMs(options.durationMs);
    if (!(this.#marginMs >= 0 && this.#marginMs * 2 < options.durationMs)) {
      throw new PodminError(`lease margin ${this.#marginMs} ms must be under half the duration`);
    }
  }

  /** The margin in use. */
  get marginMs(): number {
    return this.#marginMs;
  }

  /** True while the lease is held and its deadline (own monotonic clock) has not passed. */
  holds(): boolean {
    return this.#held !== undefined && this.#clock.monotonicMs() < this.#held.deadline;
  }

  /** The held term, or undefined when not holding. */
  term(): number | undefined {
    return this.holds() ? this.#held!.term : undefined;
  }

  /** Leadership left in ms (0 when not holding). */
  remainingMs(): number {
    return this.holds() ? this.#held!.deadline - this.#clock.monotonicMs() : 0;
  }

  /**
   * One election step: renews a held lease, creates an absent one, takes over a released one or
   * one seen unchanged for its duration plus the margin, else observes. Store errors other than a
   * lost conditional write are thrown; a held lease then stays held until its deadline.
   */
  async step(options: LeaseStepOptions = {}): Promise<LeaseStatus> {
    const knownTerm = options.knownTerm ?? 0;
    if (this.#held && !this.holds()) this.#held = undefined; // expired by our own clock
    if (this.#held) {
      // A holder renews blind (one conditional PUT, no GET): the ETag it wrote last is the one it
      // must still find; a lost condition means someone else wrote the lease.
      const term = this.#held.term < knownTerm ? knownTerm + 1 : this.#held.term;
      return await this.#write({ term, action: "renewed" }, { ifMatch: this.#held.etag });
    }
    const read = await getIfExists(this.#o.store, this.#o.key, { maxBytes: MAX_LEASE_BYTES });
    const received = this.#clock.monotonicMs();

    if (!read) {
      this.#held = undefined;
      this.#observed = undefined;
      const term = Math.max(this.#maxTerm, knownTerm) + 1;
      return await this.#write({ term, action: "created" }, { ifNoneMatch: "*" });
    }

    let doc: LeaseDocument | undefined;
    let corrupt: string | undefined;
    try {
      doc = parseLeaseDocument(read.body);
      this.#maxTerm = Math.max(this.#maxTerm, doc.term);
    } catch (err) {
      corrupt = (err as Error).message;
    }
    const etag = read.info.etag;

    if (this.#observed?.etag !== etag) this.#observed = { etag, since: received };
    const unchangedMs = received - this.#observed.since;
    const seen = { holder: doc?.holder, term: doc?.term, released: doc?.released, corrupt };
    // The holder's promise (bounded), else ours for an unreadable lease, plus our margin.
    const waitMs = (doc?.durationMs ?? this.#o.durationMs) + this.#marginMs;
    if (doc?.released || unchangedMs >= waitMs) {
      const term = Math.max(this.#maxTerm, knownTerm) + 1;
      const result = await this.#write({ term, action: "took-over" }, { ifMatch: etag });
      return { ...result, seen: { ...seen, unchangedMs } };
    }
    return { leader: false, action: "observed", seen: { ...seen, unchangedMs } };
  }

  /**
   * Gives the lease up (clean shutdown): stops acting first, then marks the lease released so a
   * contender takes over at once. False when there was nothing to release or the write failed
   * (the lease then simply expires).
   */
  async release(): Promise<boolean> {
    const held = this.holds() ? this.#held! : undefined;
    this.#held = undefined;
    if (!held) return false;
    try {
      await this.#o.store.put(
        this.#o.key,
        serializeLeaseDocument(this.#document(held.term, true)),
        { ifMatch: held.etag, contentType: "application/json" },
      );
      return true;
    } catch {
      return false;
    }
  }

  async #write(
    next: { term: number; action: LeaseStatus["action"] },
    condition: { ifMatch?: string; ifNoneMatch?: "*" },
  ): Promise<LeaseStatus> {
    const body = serializeLeaseDocument(this.#document(next.term, false));
    const sent = this.#clock.monotonicMs();
    try {
      const { etag } = await this.#o.store.put(this.#o.key, body, {
        ...condition,
        contentType: "application/json",
      });
      this.#held = { etag, term: next.term, deadline: sent + this.#o.durationMs - this.#marginMs };
      this.#observed = undefined;
      this.#maxTerm = Math.max(this.#maxTerm, next.term);
      return {
        leader: this.holds(),
        term: next.term,
        remainingMs: this.remainingMs(),
        action: next.action,
      };
    } catch (err) {
      if (!(err instanceof PreconditionFailedError)) throw err;
      const lost = next.action === "renewed";
      this.#held = undefined;
      return { leader: false, action: lost ? "lost" : "raced" };
    }
  }

  #document(term: number, released: boolean): LeaseDocument {
    return {
      apiVersion: API_VERSION,
      kind: "Lease",
      holder: this.#o.holder,
      term,
      durationMs: this.#o.durationMs,
      renewedAt: new Date(this.#clock.wallMs()).toISOString(),
      released,
      nonce: randomNonce(),
    };
  }
}

/** The default margin of a lease duration: a tenth of it, at most 5 s. */
export function defaultMarginMs(durationMs: number): number {
  return Math.min(5000, Math.floor(durationMs / 10));
}

function checkDuration(ms: number, what: string): void {
  if (
    !Number.isSafeInteger(ms) || ms < LEASE_DURATION_BOUNDS.minMs ||
    ms > LEASE_DURATION_BOUNDS.maxMs
  ) {
    throw new PodminError(
      `${what} ${ms} ms is outside ${LEASE_DURATION_BOUNDS.minMs} ms .. ${LEASE_DURATION_BOUNDS.maxMs} ms`,
    );
  }
}

function randomNonce(): string {
  return Array.from(
    crypto.getRandomValues(new Uint8Array(12)),
    (b) => b.toString(16).padStart(2, "0"),
  )
    .join("");
}

/** Canonical bytes of a lease document. */
export function serializeLeaseDocument(doc: LeaseDocument): Uint8Array {
  return new TextEncoder().encode(JSON.stringify(doc) + "\n");
}

/** Parses a lease object (untrusted input); throws `PodminError` naming the problem. */
export function parseLeaseDocument(bytes: Uint8Array): LeaseDocument {
  let d: Record<string, unknown>;
  try {
    d = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(bytes));
  } catch (err) {
    throw new PodminError(`lease: not JSON: ${(err as Error).message}`);
  }
  const bad = (why: string) => new PodminError(`lease: ${why}`);
  if (!d || typeof d !== "object" || Array.isArray(d)) throw bad("not an object");
  if (d.apiVersion !== API_VERSION || d.kind !== "Lease") {
    throw bad(`expected apiVersion ${API_VERSION}, kind Lease`);
  }
  try {
    checkNodeId(d.holder);
  } catch {
    throw bad("holder is not a node id");
  }
  if (!Number.isSafeInteger(d.term) || (d.term as number) < 1) throw bad("term must be ≥ 1");
  if (typeof d.durationMs !== "number") throw bad("durationMs must be a number");
  try {
    checkDuration(d.durationMs, "durationMs");
  } catch (err) {
    throw bad((err as Error).message);
  }
  if (typeof d.renewedAt !== "string" || Number.isNaN(Date.parse(d.renewedAt))) {
    throw bad("renewedAt: not a time");
  }
  if (typeof d.released !== "boolean") throw bad("released must be a boolean");
  if (typeof d.nonce !== "string" || !/^[0-9a-f]{8,64}$/.test(d.nonce)) throw bad("nonce: not hex");
  return {
    apiVersion: API_VERSION,
    kind: "Lease",
    holder: d.holder as string,
    term: d.term as number,
    durationMs: d.durationMs,
    renewedAt: d.renewedAt,
    released: d.released,
    nonce: d.nonce,
  };
}

/**
 * Change notification over the mesh (spec §7.9, issue 18) of one announced object
 * (`deployments/index.json`, `services/index.json` or the CA state): while the member holds a
 * fresh snapshot, the agent GETs the object only when the coordinator announces an ETag it has not
 * read yet (the cluster's idle reads are the coordinator's alone). Without a fresh snapshot (no
 * coordinator, a partition) it falls back to direct polling with a longer, jittered interval —
 * after the mesh's election window (`hold`), when a new coordinator was due and did not come — and
 * returns to notifications as soon as snapshots arrive again.
 */

import type { AnnouncedObject, ClusterSnapshot } from "../core/model/endpoint_snapshot.ts";

/**
 * Coalescing delay of the hint an announcement gives the loop that reads the object (`Loop`'s
 * `hintDelayMs`, default 200 ms there): an announcement comes once per change, so there is no
 * burst to coalesce and the read starts at once.
 */
export const ANNOUNCED_HINT_DELAY_MS = 10;

/** Options of `IndexNotifier`. */
export interface IndexNotifierOptions {
  /** Which announcement this notifier follows (default `index`). */
  object?: AnnouncedObject;
  /**
   * True while the member's stream to the coordinator is up (snapshots come only on changes, so
   * an idle but healthy stream is fresh). Without it, a snapshot older than `freshMs` is stale.
   */
  connected?: () => boolean;
  /** Without `connected`: a snapshot older than this is not fresh (default 15 s). */
  freshMs?: number;
  /** Direct polling interval while not fresh (default 10 s, ±20 % jitter). */
  fallbackMs?: number;
  /**
   * True while a lost coordinator's successor is due (the mesh's election window, spec §7.9): no
   * fallback poll then, so a leaderless cluster does not poll the bucket while it elects. An
   * agent that never read the object reads it regardless.
   */
  hold?: () => boolean;
  random?: () => number;
  now?: () => number;
}

/** Decides, pass by pass, whether the deployments loop reads the index. */
export class IndexNotifier {
  readonly #o: IndexNotifierOptions;
  #announced?: string;
  #receivedAt = -Infinity;
  #nextFallback = 0;
  /** Reads allowed, and how many of them were fallback polls (for status and tests). */
  readonly counts = { notified: 0, fallback: 0, skipped: 0 };

  constructor(options: IndexNotifierOptions = {}) {
    this.#o = options;
  }

  #now(): number {
    return this.#o.now?.() ?? performance.now();
  }

  /** Records a snapshot; true when it announces an index other than `heldEtag`. */
  onSnapshot(snapshot: ClusterSnapshot, heldEtag?: string): boolean {
    this.#receivedAt = this.#now();
    // No announcement (the coordinator cannot read the index): back to direct polling.
    this.#announced = snapshot[this.#o.object ?? "index"]?.etag;
    if (this.#announced === undefined) return false;
    return this.#announced !== (heldEtag ?? "");
  }

  /** True when there is a fresh announcement (the agent is on notifications). */
  fresh(): boolean {
    if (this.#announced === undefined) return false;
    if (this.#o.connected) return this.#o.connected();
    return this.#now() - this.#receivedAt <= (this.#o.freshMs ?? 15_000);
  }

  /**
   * Whether this pass should GET the index: `hasIndex` (a good index was read before) and the
   * ETag the agent holds ("" or undefined: none). On notifications it reads only while the
   * announced ETag differs from the one it holds, so a failed read is retried on the next pass.
   */
  shouldRead(held: { hasIndex: boolean; etag?: string }): boolean {
    const now = this.#now();
    if (!held.hasIndex) return this.#allow("fallback", now);
    if (this.fresh()) {
      if (this.#announced === (held.etag ?? "")) {
        this.counts.skipped++;
        return false;
      }
      this.counts.notified++;
      return true;
    }
    if (now >= this.#nextFallback && !this.#o.hold?.()) return this.#allow("fallback", now);
    this.counts.skipped++;
    return false;
  }

  #allow(kind: "fallback", now: number): boolean {
    const r = this.#o.random ?? Math.random;
    this.#nextFallback = now + (this.#o.fallbackMs ?? 10_000) * (0.8 + 0.4 * r());
    this.counts[kind]++;
    return true;
  }
}

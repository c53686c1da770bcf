/**
 * The cluster-wide budget on the agent's side (spec §7.1, "Budget"): before this node leaves a
 * running Pod for a new spec it admits itself in the Deployment's rollout object
 * (`core/bucket/rollout_state.ts`) by a conditional write, so at most `maxUnavailable` nodes are
 * in transition at once. The object lives in the bucket: no coordinator, no mesh.
 *
 * An admission is timed like a bucket lease (`core/bucket/bucket_lease.ts`), by monotonic clocks
 * only: its holder starts its new Pod within `ADMISSION_START_MS` of SENDING the admitting write
 * (else it admits itself again with a new nonce), and its transition ends by its progress deadline
 * (handed over, or failed: the rollout halts). Another node presumes an admission dead once it has
 * seen the same nonce for `deadline + ADMISSION_START_MS + RECLAIM_MARGIN_MS` on ITS clock, counted
 * from the moment it first READ it (after the write landed, so after it was sent), and then drops
 * it in its own admitting write: a crashed agent never blocks a rollout for longer than that.
 */

import { NotFoundError, UnavailableError } from "../../core/kit/errors.ts";
import type { Logger } from "../../core/kit/log.ts";
import { type CasObject, casUpdate } from "../../core/store/cas_update.ts";
import type { ObjectStore } from "../../core/store/object_store.ts";
import {
  type AdmissionVerdict,
  emptyRolloutState,
  haltRollout,
  releaseAdmission,
  requestAdmission,
  type RolloutState,
  rolloutStateObject,
} from "../../core/bucket/rollout_state.ts";
import type { RolloutSettings } from "../../core/model/rollout.ts";

/** How long after sending its admitting write a node may still start its new Pod. */
export const ADMISSION_START_MS = 30_000;
/** Added to an admission's lifetime before others reclaim it (clock rates, scheduling). */
export const RECLAIM_MARGIN_MS = 30_000;
/**
 * Longest time between two reads of one rollout object by a node that waits on it. Each read
 * picks the next interval at random between `ROLLOUT_POLL_MIN_SHARE` of this and all of it, so the
 * waiting nodes of one apply do not read in step: with W of them waiting, a slot freed is seen
 * after about 1/W of an interval instead of a whole one.
 */
export const ROLLOUT_POLL_MS = 5_000;
/** The shortest poll interval, as a share of `ROLLOUT_POLL_MS`. */
export const ROLLOUT_POLL_MIN_SHARE = 0.8;
/**
 * How long the rollout object must show nobody in transition, unchanged, before a node on the new
 * spec stops reading it: longer than a waiting node takes to admit itself.
 */
export const FOLLOW_IDLE_MS = 2 * ROLLOUT_POLL_MS;
/** Attempts of one conditional write per pass (then the next pass tries again). */
const CAS_ATTEMPTS = 5;

/** Clocks of the gate: monotonic for every decision, wall only for informational fields. */
export interface GateClock {
  monotonicMs(): number;
  wallMs(): number;
}

/** What the gate says about a Deployment's move to a new spec on this node. */
export interface GateDecision {
  /** This node may start its transition now. */
  go: boolean;
  verdict: AdmissionVerdict | "error";
  /** Why not (for the status and the node record). */
  reason?: string;
  /** The rollout halted and `autoRevert` restores this spec (the one the rollout left). */
  revertTo?: string;
}

interface Memory {
  spec: string;
  state?: RolloutState;
  etag?: string;
  lastRead?: number;
  /** The interval after `lastRead` before the next read (jittered, ≤ ROLLOUT_POLL_MS). */
  pollMs?: number;
  /** Our admission: its nonce, and when the write that took it was sent. */
  nonce?: string;
  sentAt?: number;
  /** When this node first read each admission (`node/nonce`). */
  firstSeen: Map<string, number>;
  /** The last decision (between reads). */
  last?: GateDecision;
  /** No more reads needed for this spec (done and nobody in transition, or halted). */
  finished?: boolean;
  /** Since when (monotonic) the object, unchanged (`etag`), has shown nobody in transition. */
  idleSince?: number;
  idleEtag?: string;
  halted?: boolean;
}

/** A Deployment's rollout, as the pass asks about it. */
export interface GateTarget {
  namespace: string;
  name: string;
  spec: string;
  /** The spec this node runs now. */
  from?: string;
  /** The index generation naming `spec`. */
  generation: number;
  settings: RolloutSettings;
}

/** Options of `RolloutGate`. */
export interface RolloutGateOptions {
  store: ObjectStore;
  /** This node's id (`--node-id`). */
  node: string;
  log: Logger;
  clock?: GateClock;
  /** Random nonces (tests pass a sequence). */
  nonce?: () => string;
  /** A number in [0, 1) for the poll jitter (default Math.random). */
  random?: () => number;
}

const systemClock: GateClock = { monotonicMs: () => performance.now(), wallMs: () => Date.now() };

function randomNonce(): string {
  return [...crypto.getRandomValues(new Uint8Array(8))]
    .map((b) => b.toString(16).padStart(2, "0")).join("");
}

/** One agent's side of the rollout objects of its Deployments. */
export class RolloutGate {
  readonly #o: RolloutGateOptions;
  readonly #clock: GateClock;
  readonly #mem = new Map<string, Memory>();

  constructor(options: RolloutGateOptions) {
    this.#o = options;
    this.#clock = options.clock ?? systemClock;
  }

  /**
   * May this node leave its running Pod for `t.spec` now? Reads the rollout object (at most once
   * per `ROLLOUT_POLL_MS`, If-None-Match) and writes only to admit itself, register, or drop a
   * dead admission.
   */
  async admit(t: GateTarget): Promise<GateDecision> {
    const m = this.#memory(t);
    const now = this.#clock.monotonicMs();
    if (m.nonce !== undefined && m.sentAt !== undefined) {
      if (now - m.sentAt < ADMISSION_START_MS) return { go: true, verdict: "admitted" };
      m.nonce = m.sentAt = undefined; // too late to start on it: admit again
    }
    if (m.halted) return this.#halted(m, t);
    if (this.#pollWait(m, now) > 0 && m.last) return m.last;
    let state: RolloutState;
    try {
      state = await this.#read(t, m);
    } catch (err) {
      return this.#error(m, err);
    }
    const deadlineMs = t.settings.progressDeadlineSeconds * 1000;
    const expired = new Set<string>();
    for (const [key, seen] of m.firstSeen) {
      if (now - seen >= deadlineMs + ADMISSION_START_MS + RECLAIM_MARGIN_MS) expired.add(key);
    }
    const nonce = (this.#o.nonce ?? randomNonce)();
    const request = {
      node: this.#o.node,
      spec: t.spec,
      from: t.from,
      generation: t.generation,
      maxUnavailable: t.settings.maxUnavailable,
      nonce,
      expired,
      at: new Date(this.#clock.wallMs()).toISOString(),
    };
    let verdict = requestAdmission(state, request).verdict;
    if (requestAdmission(state, request).state !== undefined) {
      const sentAt = this.#clock.monotonicMs();
      try {
        const result = await casUpdate({
          store: this.#o.store,
          object: this.#lenient(t),
          attempts: CAS_ATTEMPTS,
          mutate: (current) => {
            const r = requestAdmission(current, request);
            verdict = r.verdict;
            return r.state;
          },
        });
        m.state = result.value;
        m.etag = undefined; // the next read fetches the body again
        if (verdict === "admitted") {
          m.nonce = nonce;
          m.sentAt = sentAt;
          for (const key of expired) {
            this.#o.log.warn("rollout admission reclaimed", {
              deployment: `${t.namespace}/${t.name}`,
              admission: key,
            });
          }
        }
      } catch (err) {
        return this.#error(m, err);
      }
    }
    const decision = this.#decision(m, t, verdict);
    m.last = decision;
    return decision;
  }

  /**
   * For a Deployment this node runs (or moves to) `t.spec` on: whether the rollout halted with
   * `autoRevert` (then the spec to go back to). Reads while a rollout of `t.spec` may still halt:
   * once after the agent starts, then while nodes are in transition (at most once per
   * `ROLLOUT_POLL_MS`); never once it finished.
   */
  async follow(t: GateTarget): Promise<string | undefined> {
    const m = this.#memory(t);
    if (m.halted) return this.#halted(m, t).revertTo;
    if (m.finished) return undefined;
    const now = this.#clock.monotonicMs();
    if (this.#pollWait(m, now) > 0) return undefined;
    try {
      const state = await this.#read(t, m);
      if (state.spec === t.spec && state.halted) {
        m.halted = true;
        return this.#halted(m, t).revertTo;
      }
      if (state.spec !== t.spec) m.finished = true;
      else if (state.admitted.length > 0 || m.etag === undefined) m.idleEtag = undefined;
      else if (m.idleEtag !== m.etag) {
        m.idleEtag = m.etag;
        m.idleSince = now;
      } else if (now - m.idleSince! >= FOLLOW_IDLE_MS) {
        // Nobody in transition across two reads further apart than a waiter's poll: a waiter
        // would have admitted itself meanwhile, so this rollout has ended.
        m.finished = true;
      }
    } catch {
      // Read again next pass.
    }
    return undefined;
  }

  /** This node's transition to `t.spec` ended (handed over): its admission goes back. */
  async release(t: GateTarget): Promise<void> {
    const m = this.#memory(t);
    m.nonce = m.sentAt = undefined;
    try {
      await casUpdate({
        store: this.#o.store,
        object: this.#lenient(t),
        attempts: CAS_ATTEMPTS,
        mutate: (current) => releaseAdmission(current, { node: this.#o.node, spec: t.spec }),
      });
    } catch (err) {
      // Others reclaim it after its lifetime.
      this.#o.log.warn("rollout admission not released", {
        deployment: `${t.namespace}/${t.name}`,
        error: (err as Error).message,
      });
    }
  }

  /** This node's new Pod failed its progress deadline: the rollout of `t.spec` halts. */
  async halt(t: GateTarget, reason: string): Promise<void> {
    const m = this.#memory(t);
    if (m.halted) return;
    try {
      const result = await casUpdate({
        store: this.#o.store,
        object: this.#lenient(t),
        attempts: CAS_ATTEMPTS,
        mutate: (current) =>
          haltRollout(current, {
            node: this.#o.node,
            spec: t.spec,
            reason,
            at: new Date(this.#clock.wallMs()).toISOString(),
          }),
      });
      m.halted = true;
      m.state = result.value;
      m.etag = undefined;
      this.#o.log.warn("rollout halted", { deployment: `${t.namespace}/${t.name}`, reason });
    } catch (err) {
      this.#o.log.warn("rollout halt not written", {
        deployment: `${t.namespace}/${t.name}`,
        error: (err as Error).message,
      });
    }
  }

  /** Forgets Deployments no longer on this node. */
  prune(live: Set<string>): void {
    for (const ref of this.#mem.keys()) if (!live.has(ref)) this.#mem.delete(ref);
  }

  #memory(t: GateTarget): Memory {
    const ref = `${t.namespace}/${t.name}`;
    let m = this.#mem.get(ref);
    if (!m || m.spec !== t.spec) {
      m = { spec: t.spec, firstSeen: new Map() };
      this.#mem.set(ref, m);
    }
    return m;
  }

  /** Reads the object (If-None-Match); an invalid one reads as empty (the next write repairs it). */
  /**
   * Milliseconds until this node's next read of `t`'s rollout object is due (0: due now): the
   * pass schedules its recheck of a waiting Deployment from the gate's last read, not from the
   * pass's own start.
   */
  readDelayMs(t: GateTarget): number {
    return this.#pollWait(this.#memory(t), this.#clock.monotonicMs());
  }

  #pollWait(m: Memory, now: number): number {
    if (m.lastRead === undefined) return 0;
    return Math.max(0, m.lastRead + (m.pollMs ?? ROLLOUT_POLL_MS) - now);
  }

  async #read(t: GateTarget, m: Memory): Promise<RolloutState> {
    const object = this.#lenient(t);
    let state: RolloutState;
    try {
      const got = await this.#o.store.get(object.key, {
        ifNoneMatch: m.state ? m.etag : undefined,
        maxBytes: object.maxBytes,
      });
      if (got.notModified) state = m.state!;
      else {
        state = object.parse(got.body);
        m.etag = got.info.etag;
      }
    } catch (err) {
      if (!(err instanceof NotFoundError)) throw err;
      state = emptyRolloutState(t);
      m.etag = undefined;
    }
    m.state = state;
    m.lastRead = this.#clock.monotonicMs();
    const share = ROLLOUT_POLL_MIN_SHARE +
      (1 - ROLLOUT_POLL_MIN_SHARE) * Math.min(Math.max((this.#o.random ?? Math.random)(), 0), 1);
    m.pollMs = Math.round(ROLLOUT_POLL_MS * share);
    // Time each admission from the first moment this node read it.
    const live = new Set(state.admitted.map((a) => `${a.node}/${a.nonce}`));
    for (const key of live) if (!m.firstSeen.has(key)) m.firstSeen.set(key, m.lastRead);
    for (const key of m.firstSeen.keys()) if (!live.has(key)) m.firstSeen.delete(key);
    if (state.spec === t.spec && state.halted) m.halted = true;
    return state;
  }

  #lenient(t: GateTarget): CasObject<RolloutState> {
    const object = rolloutStateObject(t);
    return {
      ...object,
      parse: (bytes) => {
        try {
          return object.parse(bytes);
        } catch (err) {
          this.#o.log.warn("rollout object invalid; rewriting it", {
            key: object.key,
            error: (err as Error).message,
          });
          return emptyRolloutState(t);
        }
      },
    };
  }

  #decision(m: Memory, t: GateTarget, verdict: AdmissionVerdict): GateDecision {
    if (verdict === "admitted") return { go: true, verdict };
    if (verdict === "halted") return this.#halted(m, t);
    const s = m.state;
    const reason = verdict === "paused"
      ? "rollout paused ('podmin rollout resume' continues it)"
      : verdict === "stale"
      ? "the rollout object names a newer index; reading it first"
      : `waiting for admission: ${s?.admitted.length ?? 0} node(s) in transition, the budget ` +
        `(maxUnavailable ${t.settings.maxUnavailable} of ${s?.nodes.length ?? 0} node(s))`;
    return { go: false, verdict, reason };
  }

  #halted(m: Memory, t: GateTarget): GateDecision {
    const s = m.state;
    const by = s?.halted ? ` on ${s.halted.node}: ${s.halted.reason}` : "";
    const revertTo = t.settings.autoRevert && s?.from && s.from !== t.spec ? s.from : undefined;
    return {
      go: false,
      verdict: "halted",
      reason: `rollout halted${by}`.slice(0, 512),
      ...(revertTo ? { revertTo } : {}),
    };
  }

  #error(m: Memory, err: unknown): GateDecision {
    m.lastRead = undefined;
    const what = err instanceof UnavailableError ? "unreachable" : "failed";
    const d: GateDecision = {
      go: false,
      verdict: "error",
      reason: `rollout object ${what}: ${(err as Error).message}`.slice(0, 512),
    };
    m.last = d;
    return d;
  }
}

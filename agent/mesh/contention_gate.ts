/**
 * Who steps a lease while the mesh is down (spec §7.9, "Bounded election"). A connected member
 * never contends. A member that lost its stream contends only in its own round, and only a few
 * members are in each round, so a cluster of 1,000 leaderless agents steps the lease a few times
 * per election step instead of 1,000 times:
 *
 * - Its rank comes from its last snapshot, of the term that just ended: the coordinator lists its
 *   `successors` there — the members with the lowest `electionHash(nodeId, term)`, two rounds of
 *   them — so round 0 holds exactly `contenders` live candidates (round 1 the next ones, a backup
 *   if those died with the coordinator). A member not listed (or a snapshot without the list)
 *   places itself among the rest by its own hash: rank ≈ hash × N, without knowing the others.
 * - Round 0 contends from the loss on, round 1 one election step later, every later round one
 *   `roundMs` (a full takeover: lease + margin + step) after the one before. A round contends for
 *   two `roundMs` and then rests until the whole cycle of rounds came round again, so at most about
 *   three rounds (3 × `contenders` agents) step the lease at any time, however long the cluster
 *   stays leaderless.
 * - Without a snapshot (a new cluster, a fresh agent) it contends at once.
 *
 * The loss time is the member's own (when its snapshot-delivering stream ended), not the first
 * call that saw it disconnected: a member that reconnected and lost its stream again between two
 * steps is timed from its new loss.
 */

import { sha256Hex } from "../../core/kit/digest.ts";

/** Contenders per round, unless configured. */
export const DEFAULT_CONTENDERS = 3;

/** How many rounds of successors a coordinator lists in its snapshots. */
export const LISTED_ROUNDS = 2;

/** A uniform number in [0, 1) from a node id and a term: the same on every node. */
export function electionHash(nodeId: string, term: number): number {
  // 48 bits: exact in a double.
  return parseInt(sha256Hex(`${term}\n${nodeId}`).slice(0, 12), 16) / 2 ** 48;
}

/**
 * The `count` node ids of `nodeIds` with the lowest `electionHash` for `term`, lowest first (the
 * coordinator's `successors`; ties broken by node id).
 */
export function successorsOf(nodeIds: Iterable<string>, term: number, count: number): string[] {
  return [...nodeIds]
    .map((id) => ({ id, h: electionHash(id, term) }))
    .sort((a, b) => a.h - b.h || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0))
    .slice(0, Math.max(0, count))
    .map((x) => x.id);
}

/** What a member knows of the term that ended: its last snapshot's fields. */
export interface GateSnapshot {
  term: number;
  /** The members the coordinator merged (itself included). */
  nodes: number;
  successors?: readonly string[];
}

/** Options of `ContentionGate`. */
export interface ContentionGateOptions {
  /** This agent's node id (its rank). */
  nodeId: string;
  /** Agents per round (default `DEFAULT_CONTENDERS`). */
  contenders?: number;
  /** The election step (round 1 starts one step after the loss). */
  stepMs: number;
  /** A round's length: long enough for a takeover (lease + margin + step). */
  roundMs: number;
  now?: () => number;
}

/** Decides whether a disconnected agent contends for a lease now. */
export class ContentionGate {
  readonly #o: ContentionGateOptions;
  /** Loss time of the current wait (the member's, else the first disconnected call's). */
  #since?: number;
  /** The member's loss time the current wait was started for. */
  #lossSeen?: number;

  constructor(options: ContentionGateOptions) {
    this.#o = options;
  }

  /**
   * This agent's round and the number of rounds in the cycle, for a snapshot of the term that
   * ended (round 0 of 1 without one).
   */
  round(snapshot: GateSnapshot | undefined): { round: number; rounds: number } {
    if (!snapshot) return { round: 0, rounds: 1 };
    const k = Math.max(1, this.#o.contenders ?? DEFAULT_CONTENDERS);
    const listed = snapshot.successors ?? [];
    const listedRounds = Math.ceil(listed.length / k);
    const position = listed.indexOf(this.#o.nodeId);
    // The rest: every member but the listed ones and the coordinator that is gone.
    const rest = Math.max(1, snapshot.nodes - listed.length - 1);
    const restRounds = Math.ceil(rest / k);
    const rounds = listedRounds + restRounds;
    if (position >= 0) return { round: Math.floor(position / k), rounds };
    const h = electionHash(this.#o.nodeId, snapshot.term);
    return { round: listedRounds + Math.min(restRounds - 1, Math.floor(h * restRounds)), rounds };
  }

  /** When round `j` starts, after the loss. */
  #startOf(j: number): number {
    return j === 0 ? 0 : this.#o.stepMs + (j - 1) * this.#o.roundMs;
  }

  /**
   * Whether to contend now: never while `connected`; after a loss, while this agent's round
   * contends. `snapshot` is the last one received (undefined without one: contend at once);
   * `lostAt` is when the member's last snapshot-delivering stream ended, on this gate's clock
   * (undefined if it never had one: then the first disconnected call starts the wait).
   */
  contend(connected: boolean, snapshot: GateSnapshot | undefined, lostAt?: number): boolean {
    const now = this.#o.now ? this.#o.now() : performance.now();
    if (connected) {
      this.#since = undefined;
      this.#lossSeen = undefined;
      return false;
    }
    if (this.#since === undefined || (lostAt !== undefined && lostAt !== this.#lossSeen)) {
      this.#since = lostAt ?? now;
      this.#lossSeen = lostAt;
    }
    const { round, rounds } = this.round(snapshot);
    const elapsed = now - this.#since - this.#startOf(round);
    if (elapsed < 0) return false;
    const span = 2 * this.#o.roundMs;
    const cycle = Math.max(span, this.#startOf(rounds));
    return elapsed % cycle < span;
  }
}

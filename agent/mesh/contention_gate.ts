/**
 * Who steps a lease while the mesh is down (spec §7.9). A connected member never contends. A
 * member that loses its stream draws a slot once, uniformly among ⌈N / contenders⌉ slots (N: the
 * node count of its last snapshot), and contends from `slot × slotMs` after the loss on. So about
 * `contenders` agents step the lease in the first slot, as many more join each slot after, and a
 * cluster of 1,000 disconnected agents reads the lease a few times per step, not 1,000 times —
 * while the next contenders still come forward if the first ones are gone too. Without a snapshot
 * (a new cluster, a fresh agent) it contends at once.
 *
 * The loss time is the member's own (when its snapshot-delivering stream ended), not the first
 * step that saw it disconnected: steps run once per slot, so a member that reconnected and lost
 * its stream again between two steps would otherwise keep its old loss time and slot and contend
 * at once after a coordinator crash.
 */

/** Options of `ContentionGate`. */
export interface ContentionGateOptions {
  /** How many agents contend per slot (default 3). */
  contenders?: number;
  /** A slot's length: the lease step interval. */
  slotMs: number;
  random?: () => number;
  now?: () => number;
}

/** Decides whether a disconnected agent contends for a lease now. */
export class ContentionGate {
  readonly #o: ContentionGateOptions;
  #since?: number;
  /** The member's loss time the current slot was drawn for. */
  #lossSeen?: number;
  #slot = 0;

  constructor(options: ContentionGateOptions) {
    this.#o = options;
  }

  /**
   * Whether to contend now: never while `connected`; after a loss, once this agent's slot came.
   * `nodes` is the node count of the last snapshot (undefined without one); `lostAt` is when the
   * member's last snapshot-delivering stream ended, on this gate's clock (undefined if it never had
   * one: then the first disconnected call starts the wait).
   */
  contend(connected: boolean, nodes: number | undefined, lostAt?: number): boolean {
    const now = this.#o.now ? this.#o.now() : performance.now();
    if (connected) {
      this.#since = undefined;
      this.#lossSeen = undefined;
      return false;
    }
    const newLoss = lostAt !== undefined && lostAt !== this.#lossSeen;
    if (this.#since === undefined || newLoss) {
      this.#since = lostAt ?? now;
      this.#lossSeen = lostAt;
      const slots = Math.max(1, Math.ceil((nodes ?? 0) / (this.#o.contenders ?? 3)));
      const random = this.#o.random ? this.#o.random() : Math.random();
      this.#slot = Math.min(slots - 1, Math.floor(random * slots));
    }
    return now - this.#since >= this.#slot * this.#o.slotMs;
  }
}

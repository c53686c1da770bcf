/**
 * Who steps a lease while the mesh is down (spec §7.9). A connected member never contends. A
 * member that loses its stream draws a slot once, uniformly among ⌈N / contenders⌉ slots (N: the
 * node count of its last snapshot), and contends from `slot × slotMs` after the loss on. So about
 * `contenders` agents step the lease in the first slot, as many more join each slot after, and a
 * cluster of 1,000 disconnected agents reads the lease a few times per step, not 1,000 times —
 * while the next contenders still come forward if the first ones are gone too. Without a snapshot
 * (a new cluster, a fresh agent) it contends at once.
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
  #slot = 0;

  constructor(options: ContentionGateOptions) {
    this.#o = options;
  }

  /**
   * Whether to contend now: never while `connected`; after a loss, once this agent's slot came.
   * `nodes` is the node count of the last snapshot (undefined without one).
   */
  contend(connected: boolean, nodes: number | undefined): boolean {
    const now = this.#o.now ? this.#o.now() : performance.now();
    if (connected) {
      this.#since = undefined;
      return false;
    }
    if (this.#since === undefined) {
      this.#since = now;
      const slots = Math.max(1, Math.ceil((nodes ?? 0) / (this.#o.contenders ?? 3)));
      const random = this.#o.random ? this.#o.random() : Math.random();
      this.#slot = Math.min(slots - 1, Math.floor(random * slots));
    }
    return now - this.#since >= this.#slot * this.#o.slotMs;
  }
}

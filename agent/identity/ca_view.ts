/**
 * One agent's view of its workload CA: the fixed key (in memory) and the last good checked
 * `identity/workload-ca.json` (polled, verified against the key). Pod certificates and the Fluent
 * Bit identity both issue through it.
 */

import { WORKLOAD_CA_STATE } from "../../core/bucket/bucket_layout.ts";
import type { KeyPair } from "../../core/crypto/certificates.ts";
import type { ObjectStore } from "../../core/store/object_store.ts";
import {
  checkCaState,
  type CheckedCaState,
  emptyWorkloadCaState,
  parseWorkloadCaState,
  trustBundlePem,
  WORKLOAD_CA_STATE_MAX_BYTES,
  type WorkloadCaState,
} from "../../core/bucket/workload_ca_state.ts";
import { PolledObject, type PolledObjectOptions } from "../polled_object.ts";
import type { CaKeySource } from "./ca_key.ts";

/** What an issuer has this pass. */
export type Issuer =
  | {
    key: KeyPair;
    checked: CheckedCaState;
    /** PEM of every retained certificate (the trust bundle). */
    bundlePem: string;
    /** Why the state was not refreshed (the last good one is in use). */
    warning?: string;
  }
  | { error: string };

/** The key and the checked CA state. */
export class CaView {
  readonly #key: CaKeySource;
  readonly #state: PolledObject<WorkloadCaState>;
  #checked?: { checked: CheckedCaState; bundlePem: string };
  #stateError?: string;

  constructor(options: {
    store: ObjectStore;
    caKey: CaKeySource;
    refreshMs: number;
    /** Change notification: decides when the state is read instead of the interval. */
    gate?: PolledObjectOptions<WorkloadCaState>["gate"];
  }) {
    this.#key = options.caKey;
    this.#state = new PolledObject({
      store: options.store,
      key: WORKLOAD_CA_STATE,
      parse: parseWorkloadCaState,
      absent: emptyWorkloadCaState,
      intervalMs: options.refreshMs,
      maxBytes: WORKLOAD_CA_STATE_MAX_BYTES,
      gate: options.gate,
    });
  }

  /** The ETag of the CA state held (undefined: none read, or absent). */
  get stateEtag(): string | undefined {
    return this.#state.etag;
  }

  /** The key and the checked state (re-read when due), or why there is none. */
  async issuer(now: Date): Promise<Issuer> {
    let key: KeyPair;
    try {
      key = await this.#key.load();
    } catch (err) {
      return {
        error: `cannot read the workload CA key (${this.#key.description}): ${
          (err as Error).message
        }`,
      };
    }
    // While there is no active certificate (a new cluster), read on every pass, not every interval.
    const read = await this.#state.read({
      now: now.getTime(),
      force: !this.#checked?.checked.active,
    });
    if (read.changed && read.value) {
      try {
        const checked = await checkCaState(read.value, key.publicKey);
        this.#checked = { checked, bundlePem: trustBundlePem(checked) };
        this.#stateError = undefined;
      } catch (err) {
        // A tampered or foreign state is not trusted; the last good one stays in use.
        this.#stateError = (err as Error).message;
      }
    }
    const error = read.error ?? this.#stateError;
    if (!this.#checked) return { error: error ?? `${WORKLOAD_CA_STATE} has no certificate yet` };
    if (!this.#checked.checked.active) {
      return {
        error: `${WORKLOAD_CA_STATE} has no active certificate yet (the elected agent promotes ` +
          "one after publication)",
      };
    }
    return { key, ...this.#checked, warning: error };
  }
}

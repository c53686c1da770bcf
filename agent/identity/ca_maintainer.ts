/**
 * One pass of the workload CA maintenance (spec §8.5): load the fixed key, take or renew the
 * leader lease, and — only while holding it — publish the trust bundle and apply the rotation
 * planner to `identity/workload-ca.json` by CAS. Non-leaders only read. Every state write:
 * - re-checks the lease deadline immediately before the conditional write;
 * - refuses a state whose leaderTerm is higher than its own term (a newer leader wrote it);
 * - records its term, so a new leader's first write fences every former leader out.
 * The pass returns a status (written to `<state-dir>/identity.json` by the agent loop).
 */

import { BucketLease, type LeaseClock, type LeaseStatus } from "../../core/bucket/bucket_lease.ts";
import { WORKLOAD_CA_LEASE, WORKLOAD_CA_STATE } from "../../core/bucket/bucket_layout.ts";
import { casUpdate } from "../../core/store/cas_update.ts";
import type { KeyPair } from "../../core/crypto/certificates.ts";
import { PodminError } from "../../core/kit/errors.ts";
import type { Logger } from "../../core/kit/log.ts";
import { getIfExists, type ObjectStore } from "../../core/store/object_store.ts";
import {
  type CaPublication,
  type CaRole,
  checkCaState,
  emptyWorkloadCaState,
  trustBundlePem,
  WORKLOAD_CA_STATE_MAX_BYTES,
  type WorkloadCaState,
  workloadCaStateObject,
} from "../../core/bucket/workload_ca_state.ts";
import type { CaKeySource } from "./ca_key.ts";
import {
  bundleSha256,
  publicationRecorded,
  type PublicationTarget,
  publishBundle,
  recordPublication,
} from "./ca_publication.ts";
import { applyRotation, planRotation, type RotationPolicy } from "./ca_rotation.ts";

/** The agent's view of the workload CA, written to `<state-dir>/identity.json`. */
export interface IdentityStatus {
  nodeId: string;
  /** Where the key comes from (never the key). */
  keySource: string;
  /** True while this agent holds the CA leader lease. */
  leader: boolean;
  /** Why this pass read nothing (another agent contends, spec §7.9). */
  idle?: string;
  /** This agent's term, when leader. */
  term?: number;
  /** The lease as last seen. */
  lease?: LeaseStatus["seen"] & { action: LeaseStatus["action"]; remainingMs?: number };
  /** The state object as last read. */
  state?: {
    generation: number;
    leaderTerm: number;
    writtenBy?: string;
    updatedAt: string;
    certificates: {
      role: CaRole;
      fingerprint: string;
      notBefore: string;
      notAfter: string;
      promoteAfter?: string;
      retiredAt?: string;
    }[];
  };
  publication?: CaPublication;
  /** Why a due promotion waits (publication), when it does. */
  waiting?: string;
  /** State writes this pass. */
  writes: number;
  lastError?: string;
  lastPass: string;
}

/** Options of `CaMaintainer`. */
export interface CaMaintainerOptions {
  /** The cluster bucket. */
  store: ObjectStore;
  cluster: string;
  nodeId: string;
  keySource: CaKeySource;
  policy: RotationPolicy;
  /** The external object and its bucket's store, when `--workload-ca-publish` is set. */
  publication?: { target: PublicationTarget; store: ObjectStore };
  leaseDurationMs: number;
  /** Lease clocks (default the process's); `wallMs` is also the planner's "now". */
  clock?: LeaseClock;
  /**
   * Whether this agent contends for the lease now (default always). With the endpoint mesh only
   * the mesh coordinator and disconnected agents contend (spec §7.9): a pass of an agent that
   * neither holds the lease nor contends reads nothing.
   */
  contend?: () => boolean;
  log: Logger;
}

/** The lease was lost (or a newer leader wrote the state) during a pass. */
export class NotLeaderError extends PodminError {}

/** At most this many state writes per pass (a rotation step each; normally 0 or 1). */
const MAX_WRITES_PER_PASS = 8;

/** Maintains the workload CA state while elected. */
export class CaMaintainer {
  readonly #o: CaMaintainerOptions;
  readonly #lease: BucketLease;
  readonly #now: () => Date;

  constructor(options: CaMaintainerOptions) {
    if (
      options.publication && options.policy.publicationTarget !== options.publication.target.url
    ) {
      throw new PodminError("the policy's publication target must be the publication's target");
    }
    this.#o = options;
    this.#lease = new BucketLease({
      store: options.store,
      key: WORKLOAD_CA_LEASE,
      holder: options.nodeId,
      durationMs: options.leaseDurationMs,
      clock: options.clock,
    });
    const clock = options.clock;
    this.#now = clock ? () => new Date(clock.wallMs()) : () => new Date();
  }

  /** One pass. Never throws: failures are in the status (`backOff` when the pass failed). */
  async pass(): Promise<{ status: IdentityStatus; backOff: boolean }> {
    const status: IdentityStatus = {
      nodeId: this.#o.nodeId,
      keySource: this.#o.keySource.description,
      leader: false,
      writes: 0,
      lastPass: this.#now().toISOString(),
    };
    try {
      await this.#pass(status);
      return { status, backOff: false };
    } catch (err) {
      status.lastError = (err as Error).message;
      status.leader = this.#lease.holds();
      status.term = this.#lease.term();
      this.#o.log.warn("workload CA pass failed", { error: status.lastError });
      return { status, backOff: !(err instanceof NotLeaderError) };
    }
  }

  /** Gives the lease up (clean shutdown). */
  async release(): Promise<boolean> {
    return await this.#lease.release();
  }

  async #pass(status: IdentityStatus): Promise<void> {
    if (this.#o.contend && !this.#lease.holds() && !this.#o.contend()) {
      status.idle = "the mesh coordinator contends for the CA lease; this agent reads nothing";
      return;
    }
    const keys = await this.#o.keySource.load();
    let state = await this.#readState();
    // Checked before contending: a state not made for our key is never overwritten.
    await this.#check(state, keys, status);

    const wasLeader = this.#lease.holds();
    const lease = await this.#lease.step({ knownTerm: state.leaderTerm });
    status.lease = {
      ...(lease.leader
        ? { holder: this.#o.nodeId, term: lease.term, released: false, unchangedMs: 0 }
        : lease.seen!),
      action: lease.action,
      remainingMs: lease.remainingMs === undefined ? undefined : Math.round(lease.remainingMs),
    };
    status.leader = lease.leader;
    status.term = lease.term;
    if (lease.leader !== wasLeader || lease.action === "took-over" || lease.action === "lost") {
      this.#o.log.info(lease.leader ? "CA leader lease held" : "CA leader lease not held", {
        action: lease.action,
        term: lease.term,
        holder: lease.seen?.holder,
      });
    }
    if (!lease.leader) {
      this.#describe(state, status);
      return;
    }

    const term = lease.term!;
    for (let i = 0; i < MAX_WRITES_PER_PASS; i++) {
      const next = await this.#nextState(state, keys, term, status);
      if (!next) break;
      state = await this.#write(state, next, term);
      status.writes++;
    }
    this.#describe(state, status);
  }

  /** The next state to write, or undefined when the state is as it should be. */
  async #nextState(
    state: WorkloadCaState,
    keys: KeyPair,
    term: number,
    status: IdentityStatus,
  ): Promise<WorkloadCaState | undefined> {
    const checked = await checkCaState(state, keys.publicKey);
    const pem = trustBundlePem(checked);
    const now = this.#now();
    const pub = this.#o.publication;
    if (pub && checked.retained.length) {
      const outcome = await publishBundle({
        store: pub.store,
        target: pub.target,
        pem,
        mayWrite: () => this.#lease.holds(),
      });
      if (!outcome.ok) {
        this.#o.log.error("workload CA publication failed", {
          target: pub.target.url,
          error: outcome.error,
        });
      } else if (outcome.wrote) {
        this.#o.log.info("workload CA bundle published", {
          target: pub.target.url,
          sha256: outcome.sha256,
        });
      }
      if (!publicationRecorded(state, pub.target, outcome)) {
        return recordPublication({ state, target: pub.target, outcome, now });
      }
    }
    const plan = planRotation({
      state,
      now,
      policy: this.#o.policy,
      bundleSha256: await bundleSha256(pem),
    });
    status.waiting = plan.waiting;
    if (plan.step) {
      this.#o.log.info("workload CA rotation", { step: plan.step.kind, reason: plan.step.reason });
      return await applyRotation({
        state,
        step: plan.step,
        now,
        policy: this.#o.policy,
        keys,
        cluster: this.#o.cluster,
      });
    }
    // A new leader's first write records its term: a former leader's late write then fails.
    return state.leaderTerm < term ? state : undefined;
  }

  /** Writes `next` (read as `from`) by CAS; returns what the object now holds. */
  async #write(
    from: WorkloadCaState,
    next: WorkloadCaState,
    term: number,
  ): Promise<WorkloadCaState> {
    const stamped: WorkloadCaState = {
      ...next,
      generation: from.generation + 1,
      leaderTerm: term,
      writtenBy: this.#o.nodeId,
      updatedAt: this.#now().toISOString(),
    };
    const result = await casUpdate({
      store: this.#o.store,
      object: workloadCaStateObject,
      attempts: 3,
      mutate: (current) => {
        // Immediately before the conditional write: still the leader, still the newest term.
        if (!this.#lease.holds()) {
          throw new NotLeaderError("the CA leader lease expired before the write: not written");
        }
        if (current.leaderTerm > term) {
          throw new NotLeaderError(
            `${WORKLOAD_CA_STATE} has leaderTerm ${current.leaderTerm} > this agent's ${term}: ` +
              "a newer leader wrote it; not written",
          );
        }
        return current.generation === from.generation ? stamped : undefined;
      },
    });
    return result.value; // unchanged under us: the written state; else the newer one, re-planned
  }

  async #readState(): Promise<WorkloadCaState> {
    const read = await getIfExists(this.#o.store, WORKLOAD_CA_STATE, {
      maxBytes: WORKLOAD_CA_STATE_MAX_BYTES,
    });
    return read ? workloadCaStateObject.parse(read.body) : emptyWorkloadCaState();
  }

  async #check(state: WorkloadCaState, keys: KeyPair, status: IdentityStatus): Promise<void> {
    try {
      await checkCaState(state, keys.publicKey);
    } catch (err) {
      this.#describe(state, status);
      this.#o.keySource.forget(); // the key may have been replaced: read it again next pass
      throw err;
    }
  }

  #describe(state: WorkloadCaState, status: IdentityStatus): void {
    status.state = {
      generation: state.generation,
      leaderTerm: state.leaderTerm,
      writtenBy: state.writtenBy,
      updatedAt: state.updatedAt,
      certificates: state.certificates.map((c) => ({
        role: c.role,
        fingerprint: c.fingerprint,
        notBefore: c.notBefore,
        notAfter: c.notAfter,
        promoteAfter: c.promoteAfter,
        retiredAt: c.retiredAt,
      })),
    };
    if (state.publication) status.publication = state.publication;
  }
}

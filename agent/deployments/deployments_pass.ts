/**
 * The deployments pass: each `pass()` converges the static Pod directory once to this
 * NodeGroup's Deployments in `deployments/index.json` (`deploymentsPart` runs it in a `Loop`).
 *
 * Input: the index (polled with If-None-Match) and the specs it references
 * (fetched once per digest, verified). Effect: owned manifest files, value
 * directories (through `SecretsSync`), and the status file.
 *
 * Failure rules: a failed or invalid read never removes or rewrites anything
 * it concerns; a Deployment whose spec cannot be read keeps its current file;
 * a Deployment whose declared values were never fetched is not written.
 */

import { DEPLOYMENT_INDEX } from "../../core/bucket/bucket_layout.ts";
import {
  type DeploymentEntry,
  type DeploymentIndex,
  pollDeploymentIndex,
} from "../../core/bucket/deployment_index.ts";
import { PodminError, UnavailableError } from "../../core/kit/errors.ts";
import type { Logger } from "../../core/kit/log.ts";
import type { NodeDeployment } from "../../core/bucket/node_record.ts";
import type { ObjectStore } from "../../core/store/object_store.ts";
import type { Deployment } from "../../core/model/resources.ts";
import { decodeSpec, readSpec } from "../../core/bucket/spec_objects.ts";
import { applyIndexChange, type IndexChange } from "../../core/bucket/index_change.ts";
import {
  type IndexPublicKey,
  readIndexPublicKey,
  verifyIndexSignature,
} from "../../core/bucket/index_signing.ts";
import { ErrorLog } from "../error_log.ts";
import { ManifestDir } from "./manifest_dir.ts";
import type { SecretsSync } from "../secrets/secrets_sync.ts";
import type { PodCertificates } from "../identity/pod_certificates.ts";
import {
  manifestBytes,
  manifestFileName,
  manifestSpec,
  parseManifestFileName,
  renderStaticPod,
  type Slot,
  slotOf,
  slotPodName,
  SPEC_ANNOTATION,
} from "./static_pod.ts";
import type { EndpointSet } from "../../core/model/endpoint_snapshot.ts";
import { formatIpv6, parseIpv6 } from "../../core/model/ipv6.ts";
import type { AgentStatus } from "./status.ts";
import { type NodeRollout, planSurge, type SlotOnDisk } from "./surge_plan.ts";
import { rolloutSettings } from "../../core/model/rollout.ts";
import type { PodInfo } from "../discovery/pod_proto.ts";
import { type GateTarget, ROLLOUT_POLL_MS, type RolloutGate } from "./rollout_gate.ts";

/** kubelet's Pods as the Pods API watch sees them (`PodsWatch.view`). */
export interface PodsView {
  /** False until the watch holds a whole view (and while it re-syncs after a break). */
  synced: boolean;
  pods: PodInfo[];
}

/** Options of `DeploymentsPass`. */
export interface DeploymentsPassOptions {
  store: ObjectStore;
  nodeGroup: string;
  manifestDir: string;
  secretsDir: string;
  tlsDir: string;
  secrets: SecretsSync;
  /**
   * Consulted before each index GET (change notification over the mesh, §7.9); false skips the
   * read as if the index had not changed. Absent: every pass reads (If-None-Match).
   */
  shouldReadIndex?: (held: { hasIndex: boolean; etag?: string }) => boolean;
  /** Pod certificates; without it (`--workload-ca-key off`) Pods get no certificate. */
  identity?: PodCertificates;
  log: Logger;
  /**
   * Longest time between full convergence scans of the manifest directory while the index is
   * not modified (default `FULL_SCAN_MS`); in between, an idle pass skips specs, rendering and
   * the directory (spec §7.1).
   */
  fullScanMs?: number;
  /**
   * kubelet's view of the node's Pods, which a surge needs to see the new Pod Ready (spec §7.1,
   * "Surge"). Absent (`--once`, no Pods API): every new spec replaces its Pod in place.
   */
  pods?: () => PodsView;
  /**
   * With the endpoint mesh: the newest cluster snapshot's endpoints (undefined until one arrived).
   * A handover then first withdraws the old Pod from this node's endpoints and waits until the
   * snapshot no longer holds its addresses (spec §7.1, "Surge"). Absent: no mesh, no wait.
   */
  clusterEndpoints?: () => EndpointSet | undefined;
  /** Called when the set of withdrawn Pods changes (the mesh part reports endpoints again). */
  onWithdrawnChange?: () => void;
  /**
   * The cluster-wide budget (spec §7.1, "Budget"): a node leaves a running Pod for a new spec only
   * once admitted in the Deployment's rollout object. Absent: every node moves at once.
   */
  gate?: RolloutGate;
  /** Clock in milliseconds (tests). */
  now?: () => number;
}

/** Default longest time between full scans on an unchanged index: 60 s. */
export const FULL_SCAN_MS = 60_000;

/** What a converged full pass leaves for the idle passes that follow it. */
interface IdleState {
  /** The Deployments written, for the values and certificate gates. */
  deployments: Deployment[];
  secretsReady: Set<string>;
  identityReady?: Set<string>;
  status: AgentStatus;
  /** When the next full scan is due, whatever the index says. */
  nextFullScan: number;
}

/** The outcome of one pass. */
export interface PassResult {
  status: AgentStatus;
  /** True when the bucket could not be reached (the caller backs off). */
  unavailable: boolean;
  /** When (ms) a rollout on this node wants a pass at the latest (a Ready streak's end). */
  recheckAt?: number;
}

/** What one Deployment's rollout carries from pass to pass (in memory; see surge_plan.ts). */
interface SurgeMemory {
  spec: string;
  readySince?: number;
  reverted?: boolean;
  drainedSince?: number;
}

/** An index entry whose spec was read and verified. */
interface Ready {
  entry: DeploymentEntry;
  deployment: Deployment;
}

/** What the index changes offered by the mesh did (spec §7.9; status and tests). */
export interface MeshChangeCounts {
  /** Changes applied without a bucket read of the index. */
  applied: number;
  /** Changes not applied: this agent did not hold their base (it reads the bucket instead). */
  skipped: number;
  /** Inline specs verified and taken. */
  specsTaken: number;
  /** Inline specs refused (digest mismatch, bad content): read from the bucket instead. */
  specsRefused: number;
  /**
   * Changes refused: the index they rebuild has no valid signature by the cluster's index key
   * (unsigned, forged, or the key unknown): the pass reads the bucket instead.
   */
  unverified: number;
}

/** Shortest time between two reads of the index signing key when a change names an unknown one. */
const INDEX_KEY_REREAD_MS = 60_000;

/** One agent's deployments passes: each `pass()` call is one; the caller repeats it. */
export class DeploymentsPass {
  readonly #options: DeploymentsPassOptions;
  readonly #dir: ManifestDir;
  #etag?: string;
  #index?: DeploymentIndex;
  #indexError?: string;
  #lastSync?: string;
  readonly #specs = new Map<string, Deployment>();
  readonly #problems: ErrorLog;
  #converged?: boolean;
  #summary: NodeDeployment[] = [];
  #idle?: IdleState;
  readonly #surges = new Map<string, SurgeMemory>();
  /** The rollout phase last logged per Deployment (`namespace/name`). */
  readonly #phases = new Map<string, string>();
  /** Deployments (`namespace/name`) a halted rollout's autoRevert put back on an earlier spec. */
  #reverts = new Map<string, string>();
  /** Specs whose Pods are withdrawn from this node's endpoints (a handover drains them). */
  #withdrawn = new Set<string>();
  /** The newest index change a snapshot offered, not yet applied (`offer`). */
  #offered?: IndexChange;
  /** What the offered changes did. */
  readonly meshChanges: MeshChangeCounts = {
    applied: 0,
    skipped: 0,
    specsTaken: 0,
    specsRefused: 0,
    unverified: 0,
  };
  /** The cluster's index signing key (identity/index-signing-key.json), once read. */
  #indexKey?: IndexPublicKey;
  #indexKeyReadAt?: number;

  constructor(options: DeploymentsPassOptions) {
    this.#options = options;
    this.#dir = new ManifestDir(options.manifestDir);
    this.#problems = new ErrorLog({ log: options.log });
  }

  /**
   * True for a Pod a handover withdrew from this node's endpoints: the old Pod of a rollout, from
   * the moment the new one has been Ready for `minReadySeconds` until kubelet no longer lists it.
   */
  isWithdrawn(pod: PodInfo): boolean {
    const spec = pod.annotations?.[SPEC_ANNOTATION];
    return spec !== undefined && this.#withdrawn.has(spec);
  }

  /**
   * A snapshot arrived (spec §7.9, changes over the mesh): its index change, if any, is applied by
   * the next pass when this agent holds the change's base; a snapshot announcing another index
   * without a change withdraws an older offer (the pass then reads the bucket).
   */
  offer(snapshot: { index?: { etag: string }; indexChange?: IndexChange }): void {
    if (snapshot.indexChange) this.#offered = snapshot.indexChange;
    else if (snapshot.index?.etag !== this.#offered?.etag) this.#offered = undefined;
  }

  /**
   * Applies the offered change when this agent holds its base (the same index ETag and
   * generation): the new index without a bucket read, and the inline specs of this NodeGroup's
   * entries that match their digests (`decodeSpec`). A spec that does not is refused, logged, and
   * read from the bucket by `#spec` like any other. True when it applied a change.
   */
  async #applyOffered(): Promise<boolean> {
    const change = this.#offered;
    this.#offered = undefined;
    if (!change || !this.#index || this.#indexError) return false;
    if (
      (this.#etag ?? "") !== change.base.etag || this.#index.generation !== change.base.generation
    ) {
      this.meshChanges.skipped++;
      return false;
    }
    // The entries are the coordinator's word: the rebuilt index is taken only with the CLI's
    // signature (a peer can withhold a change, not make one up).
    const next = applyIndexChange(this.#index, change);
    const key = await this.#signingKey(change.signature?.keyId);
    if (!key || !verifyIndexSignature(next, key)) {
      this.meshChanges.unverified++;
      this.#options.log.warn(
        "index change from the mesh not signed by the cluster's key; reading the bucket",
        {
          generation: change.generation,
          signed: change.signature !== undefined,
        },
      );
      return false;
    }
    this.#index = next;
    this.#etag = change.etag || undefined;
    this.meshChanges.applied++;
    for (const entry of change.upsert) {
      const text = change.specs[entry.spec];
      if (entry.nodeGroup !== this.#options.nodeGroup || text === undefined) continue;
      if (this.#specs.has(entry.spec)) continue;
      try {
        const bytes = new TextEncoder().encode(text);
        this.#specs.set(entry.spec, decodeSpec({ kind: "Deployment", ref: entry.spec, bytes }));
        this.meshChanges.specsTaken++;
      } catch (err) {
        this.meshChanges.specsRefused++;
        this.#options.log.warn("spec from the mesh refused; reading it from the bucket", {
          spec: entry.spec,
          error: (err as Error).message,
        });
      }
    }
    return true;
  }

  /**
   * The cluster's index signing key, read from the bucket once, and again (at most once per
   * `INDEX_KEY_REREAD_MS`) when a change names another key or none was found. A failed read keeps
   * what was known: the change is then not taken, the bucket is.
   */
  async #signingKey(keyId: string | undefined): Promise<IndexPublicKey | undefined> {
    if (this.#indexKey && (keyId === undefined || this.#indexKey.keyId === keyId)) {
      return this.#indexKey;
    }
    const now = performance.now();
    if (this.#indexKeyReadAt !== undefined && now - this.#indexKeyReadAt < INDEX_KEY_REREAD_MS) {
      return this.#indexKey;
    }
    this.#indexKeyReadAt = now;
    try {
      this.#indexKey = await readIndexPublicKey(this.#options.store) ?? this.#indexKey;
    } catch (err) {
      this.#options.log.warn("cannot read the index signing key", {
        error: (err as Error).message,
      });
    }
    return this.#indexKey;
  }

  /** The ETag of the index held (undefined: none, or the index is absent). */
  get indexEtag(): string | undefined {
    return this.#etag;
  }

  /** This node's Deployments after the last pass that read the index: written (spec) or pending. */
  summary(): { indexGeneration?: number; deployments: NodeDeployment[] } {
    return { indexGeneration: this.#index?.generation, deployments: this.#summary };
  }

  /** One full reconciliation pass. Never throws for bucket or provider failures. */
  async pass(): Promise<PassResult> {
    const errors: string[] = [];
    const pending: AgentStatus["pending"] = [];

    // 1. The index: a not-modified GET when nothing changed.
    const read = await this.#readIndex();
    const now = this.#options.now?.() ?? Date.now();
    if (read.notModified && this.#idle && now < this.#idle.nextFullScan && !this.#indexError) {
      const status = await this.#idlePass(this.#idle);
      if (status) return { status, unavailable: false };
    }
    this.#idle = undefined;
    const readFailed = read.error !== undefined;
    if (read.error) errors.push(read.error);
    if (this.#indexError) errors.push(this.#indexError);
    if (!this.#index || readFailed) {
      // No trustworthy desired state this pass: leave the node as it is.
      return { status: await this.#finish(errors, pending, []), unavailable: read.unavailable };
    }
    if (!this.#indexError) this.#lastSync = new Date().toISOString();

    // 2. This NodeGroup's entries and their specs (fetched once per digest).
    const mine = this.#index.deployments.filter((e) => e.nodeGroup === this.#options.nodeGroup);
    const specs = await this.#readSpecs(mine, { errors, pending });
    if (read.changed) this.#pruneSpecCache(this.#index);
    const { ready } = specs;

    // 3. Provider values; a Deployment is written only once its values exist.
    const secrets = await this.#options.secrets.sync(ready.map((r) => r.deployment));
    errors.push(...secrets.errors);
    // 3b. Workload certificates; a Deployment is written only once its certificate is valid.
    const identity = await this.#options.identity?.sync(ready.map((r) => r.deployment));
    if (identity) errors.push(...identity.errors);

    // 4. Render and converge the directory (each Deployment's slots planned: surge, §7.1).
    let onDisk: Map<string, { bytes: Uint8Array; writtenMs: number }>;
    try {
      onDisk = await this.#dir.readOwnedTimes();
    } catch (err) {
      errors.push(`reading ${this.#options.manifestDir}: ${(err as Error).message}`);
      return { status: await this.#finish(errors, pending, mine.map(refOf)), unavailable: false };
    }
    // A Deployment whose spec cannot be read keeps every file it has.
    const keep = new Set<string>();
    for (const ref of specs.keepRefs) keepFiles(keep, onDisk, ref);
    const rollouts: NodeRollout[] = [];
    const { desired, recheckAt } = await this.#render({
      ready,
      keep,
      pending,
      secrets,
      identity,
      onDisk,
      mine,
      rollouts,
      now,
    });
    const written = await this.#writeManifests({
      desired,
      keep,
      // Values of Pods that left this node go only after their manifests did.
      keepValues: new Set([...specs.keepRefs, ...ready.map((r) => refOf(r.entry))]),
    });
    errors.push(...written.errors);
    this.#summary = summarize(mine, pending, rollouts, this.#reverts);
    const status = await this.#finish(errors, pending, mine.map(refOf), written.onDisk, rollouts);
    if (status.converged) {
      this.#idle = {
        deployments: ready.map((r) => r.deployment),
        secretsReady: secrets.ready,
        identityReady: identity?.ready,
        status,
        nextFullScan: now + (this.#options.fullScanMs ?? FULL_SCAN_MS),
      };
    }
    return { status, unavailable: read.unavailable || specs.unavailable, recheckAt };
  }

  /**
   * Reads the spec of each entry; an entry whose spec cannot be read keeps its manifest files and
   * its values (`keepRefs`) and is pending, with its error.
   */
  async #readSpecs(
    mine: DeploymentEntry[],
    into: { errors: string[]; pending: AgentStatus["pending"] },
  ): Promise<{ ready: Ready[]; keepRefs: Set<string>; unavailable: boolean }> {
    const keepRefs = new Set<string>();
    const ready: Ready[] = [];
    let unavailable = false;
    for (const entry of mine) {
      const ref = refOf(entry);
      try {
        ready.push({ entry, deployment: await this.#spec(entry) });
      } catch (err) {
        if (err instanceof UnavailableError) unavailable = true;
        keepRefs.add(ref);
        into.pending.push({ deployment: ref, reason: (err as Error).message });
        into.errors.push(`${ref}: ${(err as Error).message}`);
      }
    }
    return { ready, keepRefs, unavailable };
  }

  /** Keeps the spec cache to the digests the index references (once per new index). */
  #pruneSpecCache(index: DeploymentIndex): void {
    const live = new Set(index.deployments.map((e) => e.spec));
    for (const k of this.#specs.keys()) if (!live.has(k)) this.#specs.delete(k);
  }

  /**
   * The manifest bytes of each ready Deployment whose values and certificate exist, by slot as
   * `planSurge` decides; the others keep their current files (`keep`) and are pending.
   */
  async #render(options: {
    ready: Ready[];
    keep: Set<string>;
    pending: AgentStatus["pending"];
    secrets: { ready: Set<string> };
    identity?: { ready: Set<string> };
    onDisk: Map<string, { bytes: Uint8Array; writtenMs: number }>;
    mine: DeploymentEntry[];
    rollouts: NodeRollout[];
    now: number;
  }): Promise<{ desired: Map<string, Uint8Array>; recheckAt?: number }> {
    const { keep, pending, secrets, identity, onDisk, now } = options;
    const desired = new Map<string, Uint8Array>();
    const view = this.#options.pods?.();
    const names = new Set(options.mine.map(refOf));
    let recheckAt: number | undefined;
    const live = new Set<string>();
    const withdraw = new Set<string>();
    const desiredSpecs = new Set(options.ready.map((r) => r.entry.spec));
    this.#reverts = new Map();
    for (const { entry, deployment } of options.ready) {
      const ref = refOf(entry);
      if (deployment.spec.secrets?.length && !secrets.ready.has(ref)) {
        keepFiles(keep, onDisk, ref);
        pending.push({ deployment: ref, reason: "declared values not fetched yet" });
        continue;
      }
      if (identity && !identity.ready.has(ref)) {
        // A running Pod keeps its manifest (and its last certificate); a new one waits.
        keepFiles(keep, onDisk, ref);
        pending.push({ deployment: ref, reason: "no valid workload certificate yet" });
        continue;
      }
      live.add(ref);
      const slotsFor = (specRef: string, d: Deployment) => {
        const render = (slot: Slot) =>
          manifestBytes(renderStaticPod({
            deployment: d,
            specRef,
            secretsDir: this.#options.secretsDir,
            tlsDir: this.#options.tlsDir,
            slot,
          }));
        const disk = new Map<Slot, SlotOnDisk>();
        for (const [file, found] of onDisk) {
          const parsed = parseManifestFileName(file);
          if (parsed?.ref !== ref) continue;
          const spec = manifestSpec(found.bytes);
          const equivalent = spec !== undefined && spec !== specRef &&
            rendersSamePod({
              onDisk: found.bytes,
              rendered: render(parsed.slot),
              spec,
              desired: specRef,
            });
          disk.set(parsed.slot, { ...found, spec, ...(equivalent ? { equivalent } : {}) });
        }
        const oldSpec = [...disk.values()].find((x) => x.spec !== specRef && !x.equivalent)?.spec;
        return { render, disk, oldSpec };
      };
      let target = { spec: entry.spec, deployment };
      let { render, disk, oldSpec } = slotsFor(entry.spec, deployment);
      const memory = this.#surges.get(ref);
      // The cluster-wide budget: a node leaves its running Pod only once admitted (§7.1 "Budget").
      const settings = rolloutSettings(deployment.spec.rollout);
      const gateTarget: GateTarget | undefined = this.#options.gate && {
        namespace: entry.namespace,
        name: entry.name,
        spec: entry.spec,
        from: oldSpec,
        generation: this.#index?.generation ?? 0,
        settings,
      };
      if (gateTarget && disk.size > 0) {
        const gate = this.#options.gate!;
        const onNew = [...disk.values()].some((x) => x.spec === entry.spec || x.equivalent);
        const reverted = memory?.spec === entry.spec && memory.reverted;
        let revertTo: string | undefined;
        if (!onNew && !reverted) {
          const decision = await gate.admit(gateTarget);
          if (!decision.go && decision.revertTo === undefined) {
            keepFiles(keep, onDisk, ref);
            const rollout: NodeRollout = {
              deployment: ref,
              phase: "waiting",
              ...(oldSpec ? { from: oldSpec } : {}),
              to: entry.spec,
              since: new Date(now).toISOString(),
              reason: decision.reason,
            };
            options.rollouts.push(rollout);
            this.#logPhase(ref, rollout);
            // Again when the gate's next read is due (its last read plus its jittered interval);
            // a whole interval when none is (the read failed: no faster retries).
            const due = gate.readDelayMs(gateTarget);
            recheckAt = Math.min(recheckAt ?? Infinity, now + (due > 0 ? due : ROLLOUT_POLL_MS));
            continue;
          }
          revertTo = decision.revertTo;
        } else revertTo = await gate.follow(gateTarget);
        if (revertTo !== undefined) {
          // The rollout halted and autoRevert restores the spec it left, on every node.
          try {
            target = { spec: revertTo, deployment: await this.#spec({ ...entry, spec: revertTo }) };
            this.#reverts.set(ref, revertTo);
            desiredSpecs.add(revertTo);
            ({ render, disk, oldSpec } = slotsFor(target.spec, target.deployment));
          } catch (err) {
            keepFiles(keep, onDisk, ref);
            pending.push({ deployment: ref, reason: `reverting: ${(err as Error).message}` });
            continue;
          }
        }
      }
      const same = memory?.spec === target.spec;
      // A Pod that counts as the desired spec's is never withdrawn.
      for (const d of disk.values()) if (d.equivalent && d.spec) desiredSpecs.add(d.spec);
      const plan = planSurge({
        deployment: ref,
        spec: target.spec,
        render,
        onDisk: disk,
        settings: rolloutSettings(target.deployment.spec.rollout),
        pods: view?.synced ? view.pods.filter((p) => isPodOf(p, entry)) : undefined,
        inPlace: inPlaceReason({ deployment: target.deployment, spec: target.spec, names }),
        watching: !!view,
        readySince: same ? memory.readySince : undefined,
        reverted: same ? memory.reverted : undefined,
        oldAddressesGone: this.#addressesGone(oldSpec, view),
        drainedSince: same ? memory.drainedSince : undefined,
        now,
      });
      if (plan.withdraw !== undefined) withdraw.add(plan.withdraw);
      for (const [slot, bytes] of plan.write) {
        desired.set(manifestFileName(entry.namespace, entry.name, slot), bytes);
      }
      for (const slot of plan.keep) keep.add(manifestFileName(entry.namespace, entry.name, slot));
      if (plan.rollout) options.rollouts.push(plan.rollout);
      if (plan.handedOver) this.#options.log.info("rollout handed over", { deployment: ref });
      this.#logPhase(ref, plan.rollout);
      if (gateTarget && target.spec === entry.spec) {
        if (plan.rollout?.phase === "failed") {
          await this.#options.gate!.halt(gateTarget, plan.rollout.reason ?? "failed");
        } else if (same && !plan.rollout && !plan.reverted) {
          // The transition ended on the new spec: the admission goes back.
          await this.#options.gate!.release(gateTarget);
        }
      }
      if (plan.rollout || plan.reverted) {
        this.#surges.set(ref, {
          spec: target.spec,
          readySince: plan.readySince,
          reverted: plan.reverted,
          drainedSince: plan.drainedSince,
        });
      } else this.#surges.delete(ref);
      if (plan.recheckAt !== undefined) recheckAt = Math.min(recheckAt ?? Infinity, plan.recheckAt);
    }
    for (const ref of this.#surges.keys()) if (!live.has(ref)) this.#surges.delete(ref);
    this.#options.gate?.prune(names);
    for (const ref of this.#phases.keys()) if (!names.has(ref)) this.#phases.delete(ref);
    this.#updateWithdrawn({ withdraw, desiredSpecs, view });
    return { desired, recheckAt };
  }

  /** Logs a Deployment's rollout phase when it changes (with the reason), and when it settles. */
  #logPhase(ref: string, rollout: NodeRollout | undefined): void {
    const phase = rollout ? `${rollout.phase} ${rollout.to}` : undefined;
    if (phase === this.#phases.get(ref)) return;
    if (rollout) {
      this.#phases.set(ref, phase!);
      const fields = {
        deployment: ref,
        phase: rollout.phase,
        to: rollout.to,
        reason: rollout.reason,
      };
      if (rollout.phase === "failed") this.#options.log.warn("rollout", fields);
      else this.#options.log.info("rollout", fields);
    } else if (this.#phases.delete(ref)) {
      this.#options.log.info("rollout settled", { deployment: ref });
    }
  }

  /**
   * Whether the Pods of `oldSpec` are withdrawn and their addresses gone from the cluster's
   * endpoints; undefined without the mesh (or without an old spec).
   */
  #addressesGone(oldSpec: string | undefined, view: PodsView | undefined): boolean | undefined {
    if (!this.#options.clusterEndpoints || oldSpec === undefined) return undefined;
    const endpoints = this.#options.clusterEndpoints();
    if (!endpoints || !view?.synced || !this.#withdrawn.has(oldSpec)) return false;
    const listed = new Set(Object.values(endpoints).flat());
    const ips = view.pods.filter((p) => p.annotations?.[SPEC_ANNOTATION] === oldSpec)
      .flatMap((p) => p.ips).map(canonicalIp);
    return !ips.some((ip) => ip !== undefined && listed.has(ip));
  }

  /**
   * The withdrawn set: this pass's handovers, and earlier ones whose Pods kubelet still lists
   * (a stopping Pod must not come back into the endpoints); never a desired spec.
   */
  #updateWithdrawn(o: { withdraw: Set<string>; desiredSpecs: Set<string>; view?: PodsView }) {
    const next = new Set(o.withdraw);
    for (const spec of this.#withdrawn) {
      const listed = !o.view?.synced ||
        o.view.pods.some((p) => p.annotations?.[SPEC_ANNOTATION] === spec);
      if (listed) next.add(spec);
    }
    for (const spec of o.desiredSpecs) next.delete(spec);
    const changed = next.size !== this.#withdrawn.size ||
      [...next].some((x) => !this.#withdrawn.has(x));
    this.#withdrawn = next;
    if (changed) this.#options.onWithdrawnChange?.();
  }

  /**
   * A pass on an unchanged index after a converged one: no spec, no rendering, no directory
   * scan. The values and certificate gates still run on their own schedules; when either
   * answers differently from the last full pass, undefined (the caller does a full pass).
   */
  async #idlePass(idle: IdleState): Promise<AgentStatus | undefined> {
    const secrets = await this.#options.secrets.sync(idle.deployments);
    if (secrets.errors.length || !sameSet(secrets.ready, idle.secretsReady)) return undefined;
    if (this.#options.identity) {
      const identity = await this.#options.identity.sync(idle.deployments);
      if (identity.errors.length || !sameSet(identity.ready, idle.identityReady)) return undefined;
    }
    this.#problems.update([]);
    const at = new Date().toISOString();
    this.#lastSync = at;
    return {
      ...idle.status,
      lastSync: at,
      lastAttempt: at,
      ...(this.#options.identity ? { certificates: this.#options.identity.status() } : {}),
    };
  }

  /** Polls the index and updates the last good one; a failed read returns why. */
  async #readIndex(): Promise<
    { error?: string; unavailable: boolean; notModified?: boolean; changed?: boolean }
  > {
    // Changes over the mesh (§7.9): the announced change applied, no bucket read.
    if (await this.#applyOffered()) return { unavailable: false, changed: true };
    // Change notification (§7.9): a skipped read is a not-modified one.
    const held = { hasIndex: !!this.#index, etag: this.#etag };
    if (this.#options.shouldReadIndex && !this.#options.shouldReadIndex(held)) {
      return { unavailable: false, notModified: true };
    }
    try {
      const poll = await pollDeploymentIndex(this.#options.store, this.#etag);
      if (poll.state === "absent") {
        this.#etag = undefined;
        this.#index = poll.index;
        this.#indexError = undefined;
      } else if (poll.state === "changed") {
        this.#etag = poll.etag;
        this.#index = poll.index;
        this.#indexError = undefined;
        // Ready for the changes the mesh will carry (one read per agent start).
        if (poll.index.signature && !this.#indexKey) {
          await this.#signingKey(poll.index.signature.keyId);
        }
      } else if (poll.state === "rejected") {
        this.#etag = poll.etag;
        this.#indexError =
          `rejected ${DEPLOYMENT_INDEX} (keeping the last good state): ${poll.error.message}`;
      }
      return {
        unavailable: false,
        notModified: poll.state === "unchanged",
        changed: poll.state === "changed" || poll.state === "absent",
      };
    } catch (err) {
      return {
        error: `reading ${DEPLOYMENT_INDEX}: ${(err as Error).message}`,
        unavailable: err instanceof UnavailableError,
      };
    }
  }

  /**
   * Converges the manifest directory, then prunes value directories; returns the errors and the
   * owned manifests on disk afterwards (undefined when the directory could not be converged).
   */
  async #writeManifests(options: {
    desired: Map<string, Uint8Array>;
    keep: Set<string>;
    keepValues: Set<string>;
  }): Promise<{ errors: string[]; onDisk?: string[] }> {
    const { manifestDir, log } = this.#options;
    const errors: string[] = [];
    let onDisk: string[] | undefined;
    try {
      const changes = await this.#dir.converge(options.desired, options.keep);
      onDisk = changes.owned;
      for (const f of changes.written) log.info("manifest written", { file: f });
      for (const f of changes.removed) log.info("manifest removed", { file: f });
      for (const f of changes.refused) {
        errors.push(
          `${manifestDir}/${f} exists and is not Podmin's; remove it to let the agent write it`,
        );
      }
      await this.#options.secrets.prune(options.keepValues);
      await this.#options.identity?.prune(options.keepValues);
    } catch (err) {
      errors.push(`writing ${manifestDir}: ${(err as Error).message}`);
    }
    return { errors, onDisk };
  }

  async #spec(entry: DeploymentEntry): Promise<Deployment> {
    const d = this.#specs.get(entry.spec) ??
      await readSpec(this.#options.store, { kind: "Deployment", ref: entry.spec });
    // Checked on every use, cached or not: an index entry may reuse another entry's digest.
    if (
      d.metadata.namespace !== entry.namespace || d.metadata.name !== entry.name ||
      d.spec.nodeGroup !== entry.nodeGroup
    ) {
      throw new PodminError(
        `spec ${entry.spec} does not describe ${entry.namespace}/${entry.name}`,
      );
    }
    this.#specs.set(entry.spec, d);
    return d;
  }

  /** The pass's status; `onDisk`: the owned manifests when the pass just converged them. */
  async #finish(
    errors: string[],
    pending: AgentStatus["pending"],
    desired: string[],
    onDisk?: string[],
    rollouts: NodeRollout[] = [],
  ): Promise<AgentStatus> {
    // One line per kind of problem, a summary while it persists, and its recovery.
    this.#problems.update(errors);
    const clean = errors.length === 0;
    if (clean && this.#converged !== true) {
      this.#options.log.info("converged", { generation: this.#index?.generation });
    }
    this.#converged = clean;
    const written = onDisk ??
      [...(await this.#dir.readOwned().catch(() => new Map())).keys()].sort();
    return {
      nodeGroup: this.#options.nodeGroup,
      bucket: this.#options.store.url,
      lastSync: this.#lastSync,
      lastAttempt: new Date().toISOString(),
      indexGeneration: this.#index?.generation,
      indexEtag: this.#etag,
      desired,
      written,
      pending,
      rollouts,
      errors,
      // A replacement in place is done once its manifest is written (kubelet does the rest); a
      // surge waits for its Pod, a halted rollout is not on the desired spec.
      converged: errors.length === 0 && pending.length === 0 &&
        rollouts.every((r) => r.phase === "replacing"),
      ...(this.#options.identity ? { certificates: this.#options.identity.status() } : {}),
    };
  }
}

function sameSet(a: Set<string>, b: Set<string> | undefined): boolean {
  return b !== undefined && a.size === b.size && [...a].every((x) => b.has(x));
}

/** `namespace/name` of an index entry. */
function refOf(e: DeploymentEntry): string {
  return `${e.namespace}/${e.name}`;
}

/**
 * This node's Deployments for the node record: written (with their spec, and their rollout while
 * it is not settled) or pending (why).
 */
function summarize(
  mine: DeploymentEntry[],
  pending: AgentStatus["pending"],
  rollouts: NodeRollout[],
  reverts: Map<string, string>,
): NodeDeployment[] {
  const pendingBy = new Map(pending.map((p) => [p.deployment, p.reason]));
  const rolloutBy = new Map(rollouts.map((r) => [r.deployment, r]));
  return mine.map((e) => {
    const reason = pendingBy.get(refOf(e));
    if (reason !== undefined) return { namespace: e.namespace, name: e.name, pending: reason };
    const r = rolloutBy.get(refOf(e));
    return {
      namespace: e.namespace,
      name: e.name,
      // The spec this node runs: autoRevert's after a halted rollout.
      spec: reverts.get(refOf(e)) ?? e.spec,
      ...(r
        ? {
          rollout: {
            phase: r.phase,
            ...(r.from ? { from: r.from } : {}),
            ...(r.reason ? { reason: r.reason } : {}),
          },
        }
        : {}),
    };
  });
}

/** Keeps every manifest of Deployment `ref` as it is (its spec or values are not ready). */
function keepFiles(keep: Set<string>, onDisk: Map<string, unknown>, ref: string): void {
  for (const file of onDisk.keys()) if (parseManifestFileName(file)?.ref === ref) keep.add(file);
}

/** True when kubelet's Pod is one of this Deployment's static Pods (by Podmin's labels). */
function isPodOf(p: PodInfo, e: DeploymentEntry): boolean {
  return p.namespace === e.namespace && p.labels["podmin.dev/namespace"] === e.namespace &&
    p.labels["podmin.dev/deployment"] === e.name;
}

/**
 * Why a Deployment's new spec must replace its Pod in place on this node instead of surging, or
 * undefined when it can surge.
 */
export function inPlaceReason(
  o: { deployment: Deployment; spec: string; names: Set<string> },
): string | undefined {
  const { spec, metadata } = o.deployment;
  if (rolloutSettings(spec.rollout).surge === false) return "spec.rollout.surge is false";
  const pod = spec.template.spec;
  if (pod.hostNetwork) return "a hostNetwork Pod cannot run twice on a node";
  const all = [...pod.containers, ...(pod.initContainers ?? [])];
  if (all.some((c) => c.ports?.some((p) => p.hostPort !== undefined))) {
    return "a Pod with a hostPort cannot run twice on a node";
  }
  const surgeName = slotPodName(metadata.name, slotOf(o.spec));
  if (o.names.has(`${metadata.namespace}/${surgeName}`)) {
    return `Deployment ${metadata.namespace}/${surgeName} holds the surge Pod's name`;
  }
  return undefined;
}

/** An IPv6 address as the endpoint snapshot writes it, or undefined for anything else. */
function canonicalIp(ip: string): string | undefined {
  if (!ip.includes(":")) return undefined;
  try {
    return formatIpv6(parseIpv6(ip));
  } catch {
    return undefined;
  }
}

/**
 * True when manifest bytes on disk are the rendering of the desired spec but for the spec digest in
 * their annotation: the change renders the same Pod (e.g. only `spec.rollout` changed).
 */
function rendersSamePod(
  o: { onDisk: Uint8Array; rendered: Uint8Array; spec: string; desired: string },
): boolean {
  const dec = new TextDecoder();
  return dec.decode(o.rendered).replaceAll(o.desired, o.spec) === dec.decode(o.onDisk);
}

/**
 * Surge on the node (spec §7.1, "Surge"): given a Deployment's manifest slots on disk, its desired
 * spec and kubelet's view of its Pods, which slots the deployments pass writes, keeps and removes.
 *
 * A new spec starts in the free slot beside the running Pod; the old slot is removed only once
 * kubelet has reported the new Pod Ready for `minReadySeconds`, continuously, in a view that is
 * whole, and (with the endpoint mesh) once the old Pod's addresses were withdrawn from the
 * cluster's endpoints and `DRAIN_GRACE_MS` passed: no node sends a new connection to a Pod that is
 * about to stop. Everything the plan needs survives an agent restart: the specs and write times of the
 * slots are on disk and readiness is kubelet's; only the Ready streak restarts (it is observed
 * again, so a restart delays a handover, never hastens it). Pure: no I/O, a clock passed in.
 */

import type { RolloutSettings } from "../../core/model/rollout.ts";
import type { PodInfo } from "../discovery/pod_proto.ts";
import { type Slot, slotOf, SPEC_ANNOTATION } from "./static_pod.ts";

/** A Deployment's rollout on this node while it is not settled on its desired spec. */
export interface NodeRollout {
  /** `namespace/name`. */
  deployment: string;
  /**
   * `surging`: the new Pod runs beside the old one until it is Ready; `replacing`: the new spec
   * replaces the old Pod in place; `failed`: the new Pod missed its progress deadline and the old
   * one keeps serving (the node halted); `waiting`: the old Pod runs on, this node is not admitted
   * into the cluster-wide budget yet (paused, halted elsewhere, or the budget is used up).
   */
  phase: "surging" | "replacing" | "failed" | "waiting";
  /** The spec the old Pod runs (absent when unknown). */
  from?: string;
  /** The desired spec. */
  to: string;
  /** When the new spec's manifest was written (ISO). */
  since: string;
  /** Why, in kubelet's words when it said (or why the node replaces in place). */
  reason?: string;
}

/** One slot's manifest on disk. */
export interface SlotOnDisk {
  /** The spec digest it was rendered from (absent: none readable). */
  spec?: string;
  bytes: Uint8Array;
  /** Its mtime, ms: when it was (re)written. */
  writtenMs: number;
  /**
   * It renders the desired spec's Pod already and differs only in its spec annotation (e.g. only
   * `spec.rollout` changed): it counts as the desired spec and is left as it is, since rewriting
   * it would make kubelet restart its Pod.
   */
  equivalent?: boolean;
}

/** Input of `planSurge`. */
export interface SurgeInput {
  /** `namespace/name`. */
  deployment: string;
  /** The desired spec digest. */
  spec: string;
  /** The manifest bytes of the desired spec in a slot. */
  render(slot: Slot): Uint8Array;
  /** This Deployment's manifests on disk, by slot. */
  onDisk: Map<Slot, SlotOnDisk>;
  settings: RolloutSettings;
  /** This Deployment's Pods in kubelet's view; undefined while the view is not whole. */
  pods?: PodInfo[];
  /** Why this Deployment must replace its Pod in place (no surge), when it must. */
  inPlace?: string;
  /**
   * False when the agent has no Pods API view at all (`--once`): a new transition replaces in
   * place, but a surge already on disk is left as it is (its old Pod is never removed unseen).
   */
  watching: boolean;
  /** Since when (ms) the desired spec's Pod has been seen Ready without a break (last plan's). */
  readySince?: number;
  /** The desired spec was reverted on this node after it failed (autoRevert; last plan's). */
  reverted?: boolean;
  /**
   * Whether the old Pod's addresses are gone from the cluster's endpoints (the newest mesh
   * snapshot); undefined without the endpoint mesh (nothing to withdraw from).
   */
  oldAddressesGone?: boolean;
  /** Since when (ms) they have been gone (last plan's). */
  drainedSince?: number;
  /** Now, ms. */
  now: number;
}

/** What to do with one Deployment's slots; a slot neither written nor kept is removed. */
export interface SurgePlan {
  write: Map<Slot, Uint8Array>;
  keep: Set<Slot>;
  /** Undefined: settled on the desired spec. */
  rollout?: NodeRollout;
  /** Carry to the next plan. */
  readySince?: number;
  /** Carry to the next plan. */
  reverted?: boolean;
  /** When (ms) a pass should look again: the end of the Ready streak or the deadline. */
  recheckAt?: number;
  /** The old Pod's slot was removed because the new one was Ready: the handover. */
  handedOver?: boolean;
  /** The old Pod's spec, whose Pods are to be withdrawn from this node's endpoints. */
  withdraw?: string;
  /** Carry to the next plan. */
  drainedSince?: number;
}

/**
 * After the cluster snapshot this node received no longer holds the old Pod's addresses, how long
 * the old Pod still runs: the other nodes apply the same snapshot to their dataplanes meanwhile.
 */
export const DRAIN_GRACE_MS = 2_000;

/**
 * kubelet's reasons for refusing a Pod at admission for want of resources: `OutOf<resource>`, and
 * for a static Pod (critical to kubelet) `UnexpectedAdmissionError` when it found no Pod to preempt
 * (measured on kubelet 1.36.3: "preemption: … no set of running pods found to reclaim resources").
 * A refused Pod stays `Failed`: kubelet does not admit it again.
 */
const ADMISSION_REFUSED = /^(OutOf[a-z.\/-]+|UnexpectedAdmissionError)\b/i;

/** Plans one Deployment's slots (see the module's comment). */
export function planSurge(input: SurgeInput): SurgePlan {
  const { onDisk, spec } = input;
  const slots = [...onDisk.keys()].sort();
  const isCurrent = (s: Slot) => onDisk.get(s)!.spec === spec || !!onDisk.get(s)!.equivalent;
  const current = slots.filter(isCurrent);
  const others = slots.filter((s) => !isCurrent(s));
  if (slots.length === 0) return settled(input, "");
  if (current.length >= 1 && others.length === 0) return settled(input, current[0]);
  if (current.length >= 1) return surging(input, current[0], servingSlot(input, others));
  // Nothing on disk runs the desired spec yet.
  if (input.reverted) {
    return {
      write: new Map(),
      keep: new Set(slots),
      reverted: true,
      rollout: {
        deployment: input.deployment,
        phase: "failed",
        from: onDisk.get(servingSlot(input, others))!.spec,
        to: spec,
        since: new Date(input.now).toISOString(),
        reason: "halted: the new Pod was removed (autoRevert) and the old one keeps serving",
      },
    };
  }
  // The serving Pod stays; an earlier surge that never took over goes.
  const serving = servingSlot(input, others);
  const from = onDisk.get(serving)!.spec;
  const inPlace = input.inPlace ??
    (input.watching ? undefined : "the agent has no view of kubelet's Pods to see a new Pod Ready");
  if (inPlace) {
    return {
      write: new Map([[serving, input.render(serving)]]),
      keep: new Set(),
      rollout: {
        deployment: input.deployment,
        phase: "replacing",
        from,
        to: spec,
        since: new Date(input.now).toISOString(),
        reason: `replaced in place: ${inPlace}`,
      },
    };
  }
  const fresh = slotOf(spec);
  return {
    write: new Map([[fresh, input.render(fresh)]]),
    keep: new Set([serving]),
    rollout: {
      deployment: input.deployment,
      phase: "surging",
      from,
      to: spec,
      since: new Date(input.now).toISOString(),
      reason: "new Pod started beside the old one",
    },
    recheckAt: input.now + input.settings.progressDeadlineSeconds * 1000,
  };
}

/** Only the desired spec on disk (or nothing): that slot, rewritten when its bytes differ. */
function settled(input: SurgeInput, slot: Slot): SurgePlan {
  if (input.onDisk.get(slot)?.equivalent) return { write: new Map(), keep: new Set([slot]) };
  return { write: new Map([[slot, input.render(slot)]]), keep: new Set() };
}

/** Of slots none of which runs the desired spec: the one serving (Ready, else the oldest). */
function servingSlot(input: SurgeInput, slots: Slot[]): Slot {
  const ready = (s: Slot) => !!podOf(input, input.onDisk.get(s)!.spec)?.ready;
  const age = (s: Slot) => input.onDisk.get(s)!.writtenMs;
  return [...slots].sort((x, y) => Number(ready(y)) - Number(ready(x)) || age(x) - age(y))[0];
}

function podOf(input: SurgeInput, spec: string | undefined): PodInfo | undefined {
  if (spec === undefined) return undefined;
  return input.pods?.find((p) => p.annotations?.[SPEC_ANNOTATION] === spec);
}

/** The desired spec in `next` beside the old Pod in `old`. */
function surging(input: SurgeInput, next: Slot, old: Slot): SurgePlan {
  const { settings, now, deployment, spec } = input;
  const disk = input.onDisk.get(next)!;
  const bytes = input.render(next);
  const writtenMs = disk.equivalent || equalBytes(disk.bytes, bytes) ? disk.writtenMs : now;
  const base = {
    deployment,
    from: input.onDisk.get(old)!.spec,
    to: spec,
    since: new Date(writtenMs).toISOString(),
  };
  // An equivalent slot stays as it is (kept, not rewritten).
  const write = disk.equivalent ? new Map<Slot, Uint8Array>() : new Map([[next, bytes]]);
  const stays = disk.equivalent ? [next] : [];
  if (input.inPlace) return { write, keep: new Set(stays) };
  const pod = podOf(input, disk.spec);
  if (input.pods && pod?.phase === "Failed" && ADMISSION_REFUSED.test(pod.reason ?? "")) {
    // kubelet's admission refused the second Pod: the node cannot hold both.
    return {
      write: new Map([[old, input.render(old)]]),
      keep: new Set(),
      rollout: {
        ...base,
        phase: "replacing",
        reason: `replaced in place: kubelet cannot run both Pods (${pod.reason})`.slice(0, 512),
      },
    };
  }
  const readySince = input.pods && pod?.ready ? input.readySince ?? now : undefined;
  const minReadyMs = settings.minReadySeconds * 1000;
  if (readySince !== undefined && now - readySince >= minReadyMs) {
    const oldSpec = input.onDisk.get(old)!.spec;
    if (input.oldAddressesGone === undefined) {
      return { write, keep: new Set(stays), handedOver: true };
    }
    const drainedSince = input.oldAddressesGone ? input.drainedSince ?? now : undefined;
    if (drainedSince !== undefined && now - drainedSince >= DRAIN_GRACE_MS) {
      return { write, keep: new Set(stays), handedOver: true, withdraw: oldSpec };
    }
    return {
      write,
      keep: new Set([...stays, old]),
      readySince,
      drainedSince,
      withdraw: oldSpec,
      rollout: {
        ...base,
        phase: "surging",
        reason: drainedSince === undefined
          ? "new Pod Ready; withdrawing the old Pod's endpoints"
          : "new Pod Ready; old Pod's endpoints withdrawn, draining",
      },
      recheckAt: drainedSince !== undefined ? drainedSince + DRAIN_GRACE_MS : undefined,
    };
  }
  const deadline = writtenMs + settings.progressDeadlineSeconds * 1000;
  if (now >= deadline) {
    const why = !input.pods
      ? "kubelet's Pods API gave no whole view of the node's Pods"
      : pod?.reason ?? (pod ? "the new Pod is not Ready" : "kubelet runs no Pod for the new spec");
    const failed: NodeRollout = {
      ...base,
      phase: "failed",
      reason: `not Ready for ${settings.minReadySeconds} s within ` +
        `${settings.progressDeadlineSeconds} s: ${why}`,
    };
    if (settings.autoRevert && input.pods) {
      return { write: new Map(), keep: new Set([old]), reverted: true, rollout: failed };
    }
    return { write, keep: new Set([...stays, old]), readySince, rollout: failed };
  }
  const reason = !input.pods
    ? "waiting for a whole view of kubelet's Pods API"
    : readySince !== undefined
    ? "new Pod Ready; waiting minReadySeconds"
    : pod?.reason ?? "waiting for the new Pod to be Ready";
  return {
    write,
    keep: new Set([...stays, old]),
    readySince,
    rollout: { ...base, phase: "surging", reason },
    recheckAt: readySince !== undefined ? Math.min(readySince + minReadyMs, deadline) : deadline,
  };
}

function equalBytes(a: Uint8Array, b: Uint8Array): boolean {
  return a.byteLength === b.byteLength && a.every((x, i) => x === b[i]);
}

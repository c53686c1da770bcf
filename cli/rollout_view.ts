/**
 * A Deployment's rollout as its nodes report it (`podmin rollout status`, the UP-TO-DATE and
 * AVAILABLE columns of `podmin get deployments`): each live node record of its NodeGroup says
 * which spec its agent wrote and, while that is not settled, the rollout's phase and kubelet's
 * reason (spec §7.1, "Surge"). Pure: the records and the index entry are passed in.
 */

import { isStale, type NodeRecord } from "../core/bucket/node_record.ts";
import type { DeploymentEntry } from "../core/bucket/deployment_index.ts";

/** One node's state of a Deployment's rollout. */
export interface NodeRolloutState {
  nodeId: string;
  /**
   * `new`: its agent runs the desired spec alone; `surging` / `replacing`: moving to it; `failed`:
   * halted, the old Pod serving; `old`: its agent has not taken the desired spec yet; `pending`:
   * its agent cannot write it (values, certificate, spec unreadable).
   */
  state: "new" | "surging" | "replacing" | "failed" | "waiting" | "old" | "pending";
  /** kubelet reports the Deployment's Pod Ready (undefined: not known). */
  ready?: boolean;
  reason?: string;
}

/** The rollout across a Deployment's NodeGroup. */
export interface RolloutView {
  nodes: NodeRolloutState[];
  /** Nodes on the desired spec alone (`new`). */
  upToDate: number;
  /** Nodes whose Pod kubelet reports Ready, whichever spec. */
  available: number;
  /** Every node `new` and Ready. */
  complete: boolean;
  /** Some node halted. */
  failed: boolean;
}

/** The rollout of `entry` from the node records (stale ones are left out). */
export function rolloutView(
  entry: DeploymentEntry,
  records: NodeRecord[],
  now = Date.now(),
): RolloutView {
  const nodes: NodeRolloutState[] = [];
  for (const r of records) {
    if (r.nodeGroup !== entry.nodeGroup || isStale(r, now)) continue;
    const d = r.deployments.find((x) => x.namespace === entry.namespace && x.name === entry.name);
    const ready = d?.ready;
    if (!d || (d.spec !== entry.spec && d.pending === undefined)) {
      nodes.push({
        nodeId: r.nodeId,
        state: "old",
        ready,
        reason: d ? undefined : "its agent has not listed the Deployment yet",
      });
    } else if (d.pending !== undefined) {
      nodes.push({ nodeId: r.nodeId, state: "pending", ready, reason: d.pending });
    } else if (d.rollout) {
      nodes.push({ nodeId: r.nodeId, state: d.rollout.phase, ready, reason: d.rollout.reason });
    } else nodes.push({ nodeId: r.nodeId, state: "new", ready });
  }
  const upToDate = nodes.filter((n) => n.state === "new").length;
  return {
    nodes,
    upToDate,
    available: nodes.filter((n) => n.ready).length,
    complete: nodes.length > 0 && nodes.every((n) => n.state === "new" && n.ready !== false),
    failed: nodes.some((n) => n.state === "failed"),
  };
}

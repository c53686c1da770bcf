/**
 * The deployments part of `podmin-agent run`: the pass that writes this NodeGroup's Pods as
 * kubelet static Pod manifests (with their values and certificates), run by a loop that follows
 * the index's announcements with the mesh; `<state-dir>/status.json` after each pass.
 */

import type { NodeDeployment } from "../../core/bucket/node_record.ts";
import type { PodCertificates } from "../identity/pod_certificates.ts";
import { Loop } from "../loop.ts";
import { ANNOUNCED_HINT_DELAY_MS, type IndexNotifier } from "../index_notifier.ts";
import type { FlagSpecs, Part, PartContext } from "../part.ts";
import type { SecretsSync } from "../secrets/secrets_sync.ts";
import { PodsWatch } from "../discovery/pods_api.ts";
import type { PodInfo } from "../discovery/pod_proto.ts";
import type { EndpointSet } from "../../core/model/endpoint_snapshot.ts";
import { DeploymentsPass } from "./deployments_pass.ts";
import { RolloutGate } from "./rollout_gate.ts";
import { type AgentStatus, writeStatus } from "./status.ts";

/** The deployments part's flags. */
export const DEPLOYMENTS_FLAGS = {
  "manifest-dir": {
    type: "string",
    default: "/etc/podmin/manifests",
    arg: "DIR",
    help: "kubelet static Pod directory (default {default})",
  },
} as const satisfies FlagSpecs;

const MAX_BACKOFF_MS = 30_000;

/** Options of `deploymentsPart`. */
export interface DeploymentsPartOptions {
  context: PartContext;
  nodeGroup: string;
  /** `--interval`. */
  intervalMs: number;
  manifestDir: string;
  secretsDir: string;
  tlsDir: string;
  secrets: SecretsSync;
  /** Pod certificates; without them (`--workload-ca-key off`) Pods get none. */
  certificates?: PodCertificates;
  /** The index's announcements, when reads follow them (spec §7.9). */
  notifier?: IndexNotifier;
  /**
   * kubelet's Pods API socket: the part watches it to hand a rollout over from the old Pod to the
   * new one when kubelet reports the new one Ready (spec §7.1, "Surge"). Absent (`--once`): new
   * specs replace their Pods in place.
   */
  podsApiSocket?: string;
  /**
   * With the endpoint mesh: the newest cluster snapshot's endpoints, so a handover waits until the
   * old Pod's addresses left them (spec §7.1, "Surge").
   */
  clusterEndpoints?: () => EndpointSet | undefined;
  /**
   * This node's id: with it, a new spec waits for this node's admission into the cluster-wide
   * budget (spec §7.1, "Budget"). Absent (`--once`): every node moves when it reads the spec.
   */
  nodeId?: string;
}

/** The deployments part. */
export interface DeploymentsPart extends Part {
  /** The node's convergence, for its record. */
  summary(): { indexGeneration?: number; converged: boolean; deployments: NodeDeployment[] };
  /** True for a Ready Pod a rollout's handover withdrew from this node's endpoints. */
  isWithdrawn(pod: PodInfo): boolean;
  /** `--once`: one pass, its status written; 0 when converged, 1 with the reasons on `err`. */
  runOnce(io: { out(line: string): void; err(line: string): void }): Promise<number>;
}

/** The deployments part. */
export function deploymentsPart(o: DeploymentsPartOptions): DeploymentsPart {
  const { store, hub, stateDir, log } = o.context;
  const { notifier } = o;
  let rolling = false;
  // Pod events matter only while a rollout waits on them.
  const watch = o.podsApiSocket === undefined ? undefined : new PodsWatch({
    socket: o.podsApiSocket,
    onChange: () => {
      if (rolling) loop.hint();
    },
    log,
  });
  let recheck: ReturnType<typeof setTimeout> | undefined;
  const deployments = new DeploymentsPass({
    store,
    nodeGroup: o.nodeGroup,
    shouldReadIndex: notifier && ((held) => notifier.shouldRead(held)),
    manifestDir: o.manifestDir,
    secretsDir: o.secretsDir,
    tlsDir: o.tlsDir,
    secrets: o.secrets,
    identity: o.certificates,
    pods: watch && (() => watch.view()),
    clusterEndpoints: o.clusterEndpoints,
    onWithdrawnChange: () => hub.emit("podsWithdrawn"),
    gate: o.nodeId === undefined ? undefined : new RolloutGate({ store, node: o.nodeId, log }),
    log,
  });
  let converged = false;
  let lastGeneration: number | undefined;
  let lastPhases = "";
  const loop: Loop<AgentStatus> = new Loop<AgentStatus>({
    name: "deployments",
    intervalMs: o.intervalMs,
    maxBackoffMs: MAX_BACKOFF_MS,
    // Its only hint is an index announcement (§7.9).
    hintDelayMs: ANNOUNCED_HINT_DELAY_MS,
    log,
    pass: async () => {
      const { status, unavailable, recheckAt } = await deployments.pass();
      rolling = (status.rollouts?.length ?? 0) > 0;
      clearTimeout(recheck);
      if (recheckAt !== undefined) {
        // The end of a new Pod's Ready streak (or its deadline) comes before the next interval.
        recheck = setTimeout(() => loop.hint(), Math.max(0, recheckAt - Date.now()));
      }
      return { status, backOff: unavailable };
    },
    status: (status) => {
      // A rollout's phase on this node is part of its record (surging → failed, kubelet's reason).
      const phases = (status.rollouts ?? []).map((r) => `${r.deployment} ${r.phase} ${r.to}`)
        .join();
      const changed = status.converged !== converged ||
        status.indexGeneration !== lastGeneration || phases !== lastPhases;
      converged = status.converged;
      lastGeneration = status.indexGeneration;
      lastPhases = phases;
      if (changed) hub.emit("convergenceChanged");
      return writeStatus(stateDir, status);
    },
  });
  if (notifier) {
    hub.on("meshSnapshot", (snapshot) => {
      // The change it carries is applied by the pass it hints, without a bucket read (§7.9).
      deployments.offer(snapshot);
      if (notifier.onSnapshot(snapshot, deployments.indexEtag)) loop.hint();
    });
  }
  if (o.clusterEndpoints) {
    // A handover waits for the snapshot without the old Pod's addresses.
    hub.on("meshSnapshot", () => {
      if (rolling) loop.hint();
    });
  }
  return {
    name: "deployments",
    statusFile: "status.json",
    start: () => {
      watch?.start();
      loop.start();
    },
    stop: async () => {
      await loop.stop();
      clearTimeout(recheck);
      watch?.stop();
    },
    summary: () => ({ ...deployments.summary(), converged }),
    isWithdrawn: (pod) => deployments.isWithdrawn(pod),
    async runOnce(io) {
      const { status } = await deployments.pass();
      await writeStatus(stateDir, status);
      if (status.converged) {
        io.out(
          `converged: ${status.desired.length} deployment(s) for NodeGroup ${status.nodeGroup}`,
        );
        return 0;
      }
      for (const e of status.errors) io.err(`not converged: ${e}`);
      for (const p of status.pending) io.err(`pending: ${p.deployment}: ${p.reason}`);
      return 1;
    },
  };
}

/** The agent's status file: what `podmin-agent status` prints. */

import * as path from "node:path";
import { readJsonStatus, writeJsonStatus } from "../status_file.ts";
import type { NodeRollout } from "./surge_plan.ts";

/** A snapshot of the deployments loop after a pass. */
export interface AgentStatus {
  nodeGroup: string;
  bucket: string;
  /** ISO time of the last pass that read a valid index. */
  lastSync?: string;
  lastAttempt: string;
  /** Index generation and ETag last read. */
  indexGeneration?: number;
  indexEtag?: string;
  /** `namespace/name` of Deployments of this NodeGroup in the index. */
  desired: string[];
  /** Manifest files on disk owned by the agent. */
  written: string[];
  /** Deployments not (re)written this pass, with the reason. */
  pending: { deployment: string; reason: string }[];
  /**
   * Deployments whose rollout on this node is not settled: surging, replacing in place or failed
   * (spec §7.1, "Surge"); absent or empty when every one runs its desired spec alone.
   */
  rollouts?: NodeRollout[];
  /** Errors of the last pass; empty when converged. */
  errors: string[];
  converged: boolean;
  /** The Pods' current workload certificates (absent with `--workload-ca-key off`). */
  certificates?: { deployment: string; notAfter: string; renewAt: string; issuer: string }[];
}

/** The status file path under a state directory. */
export function statusPath(stateDir: string): string {
  return path.join(stateDir, "status.json");
}

/** Writes the status atomically. */
export function writeStatus(stateDir: string, status: AgentStatus): Promise<void> {
  return writeJsonStatus(statusPath(stateDir), status);
}

/** Reads the status, or undefined when the agent has not written one. */
export function readStatus(stateDir: string): Promise<AgentStatus | undefined> {
  return readJsonStatus<AgentStatus>(statusPath(stateDir));
}

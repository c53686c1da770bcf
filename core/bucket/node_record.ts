/**
 * `dns/nodes/<nodegroup>/<node-id>.json`: a node's record, written by its agent on every heartbeat
 * and removed on clean shutdown; read by the CLI (`podmin get nodes`, `podmin status`) and, with
 * Service discovery, by peers. Readers treat it as untrusted input and a record whose heartbeat is
 * older than `STALE_AFTER_MS` as a node that is gone.
 */

import { dnsNodeKey } from "./bucket_layout.ts";
import { ValidationError } from "../kit/errors.ts";
import { checkNodeGroup, checkNodeId, isDnsLabel } from "../model/names.ts";
import { API_VERSION } from "../model/resources.ts";
import { type EndpointSet, parseEndpointSet } from "../model/endpoint_snapshot.ts";

/** Largest accepted record. */
export const NODE_RECORD_MAX_BYTES = 1024 * 1024;

/**
 * Heartbeat interval of the agents: a record is rewritten when the node's convergence changes
 * (within `CONVERGED_RECORD_SPREAD_MS`), and otherwise only this often (a PUT costs 12.5 GETs: spec
 * §7.9, cost model).
 */
export const HEARTBEAT_MS = 10 * 60_000;

/**
 * A record rewritten because the node's convergence changed is written after a random delay up to
 * this long: after an apply every node of a NodeGroup converges within about a second, and S3
 * accepts at least 3,500 PUTs per second per prefix (`dns/nodes/`), so 10,000 nodes writing at once
 * would be throttled (503 SlowDown); spread over 5 s they stay within it. `podmin get nodes` shows a
 * convergence at most this much later.
 */
export const CONVERGED_RECORD_SPREAD_MS = 5_000;

/**
 * The cluster-wide rate of the records rewritten after changes (spec §5.5, §7.9): a node of a
 * cluster of N writes at a random point of `convergedRecordSpreadMs(N)` and at most once per such
 * window (agent/node/record_pacer.ts), so the cluster writes about this many records per second
 * whatever N and however often applies come (at most twice as many while the mesh's `nodes` lags
 * the cluster by its factor of two). Low enough for the slowest S3-compatible store Podmin is
 * tested on (moto takes about 50 PUTs/s beside the cluster's other requests); S3 takes 3,500 per
 * second per prefix.
 */
export const CONVERGED_RECORDS_PER_S = 20;

/**
 * The window over which a node rewrites its record after its convergence changed: at least
 * `CONVERGED_RECORD_SPREAD_MS`, and N / `CONVERGED_RECORDS_PER_S` seconds for a cluster of N
 * nodes (known from the mesh's snapshot; unknown, the minimum): 50 s at 1,000 nodes.
 */
export function convergedRecordSpreadMs(nodes?: number): number {
  const n = nodes !== undefined && Number.isFinite(nodes) && nodes > 0 ? nodes : 0;
  return Math.max(CONVERGED_RECORD_SPREAD_MS, (n / CONVERGED_RECORDS_PER_S) * 1000);
}

/** A record whose heartbeat is older than this is stale (three missed heartbeats). */
export const STALE_AFTER_MS = 3 * HEARTBEAT_MS;

/** One Deployment as the node runs it. */
export interface NodeDeployment {
  namespace: string;
  name: string;
  /** `sha256:<hex>` of the spec the manifest was written from; absent while pending. */
  spec?: string;
  /** Why it is not written (values, certificate, spec unreadable …). */
  pending?: string;
  /** kubelet reports its Pod Ready (known once discovery watches the Pods API). */
  ready?: boolean;
  /**
   * Its rollout on this node while not settled on `spec` (spec §7.1, "Surge"): `surging` (old and
   * new Pods run), `replacing` (in place), `failed` (halted: the old Pod keeps serving); `from` the
   * old Pod's spec, `reason` kubelet's words when it said.
   */
  rollout?: {
    phase: "surging" | "replacing" | "failed" | "waiting";
    from?: string;
    reason?: string;
  };
}

/** The record. */
export interface NodeRecord {
  apiVersion: typeof API_VERSION;
  kind: "NodeRecord";
  nodeGroup: string;
  nodeId: string;
  /** The node's IPv6 address (empty when unknown, e.g. a local node). */
  address: string;
  /** The delegated Pod prefix (empty when unknown). */
  podPrefix: string;
  /** `[address]:port` of the agent's gRPC endpoint, when it serves one. */
  grpcEndpoint?: string;
  /** Hex SHA-256 of the node certificate, when it has one. */
  certificateFingerprint?: string;
  agentVersion: string;
  startedAt: string;
  heartbeat: string;
  /** Index generation the node last converged from. */
  indexGeneration?: number;
  converged: boolean;
  deployments: NodeDeployment[];
  /**
   * With the endpoint mesh: this node's Ready endpoints per Service (`namespace/name` → IPv6
   * addresses), as it reports them to the coordinator (§7.9).
   */
  endpoints?: EndpointSet;
  /**
   * Why the node cannot do part of its job, one line (e.g. a kubelet without the local Pods API:
   * no endpoints from this node); absent when nothing is wrong.
   */
  problem?: string;
}

const ISO = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$/;
const SPEC = /^sha256:[0-9a-f]{64}$/;

/** The record's key. */
export function nodeRecordKey(record: Pick<NodeRecord, "nodeGroup" | "nodeId">): string {
  return dnsNodeKey(record.nodeGroup, record.nodeId);
}

/** Canonical bytes. */
export function serializeNodeRecord(record: NodeRecord): Uint8Array {
  return new TextEncoder().encode(JSON.stringify(record, null, 2) + "\n");
}

/** Parses and validates a record read from `key`; throws `ValidationError`. */
export function parseNodeRecord(bytes: Uint8Array, key: string): NodeRecord {
  const bad = (why: string) => new ValidationError(`${key}: ${why}`);
  let d: Record<string, unknown>;
  try {
    d = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(bytes));
  } catch (err) {
    throw bad(`not JSON: ${(err as Error).message}`);
  }
  if (!d || typeof d !== "object" || Array.isArray(d)) throw bad("not an object");
  if (d.apiVersion !== API_VERSION || d.kind !== "NodeRecord") throw bad("not a NodeRecord");
  const nodeGroup = checkNodeGroup(d.nodeGroup);
  const nodeId = checkNodeId(d.nodeId);
  if (nodeRecordKey({ nodeGroup, nodeId }) !== key) throw bad("names another node");
  for (const k of ["address", "podPrefix", "agentVersion"]) {
    if (typeof d[k] !== "string" || (d[k] as string).length > 256) {
      throw bad(`${k} must be a string`);
    }
  }
  for (const k of ["startedAt", "heartbeat"]) {
    if (typeof d[k] !== "string" || !ISO.test(d[k] as string)) throw bad(`${k}: not ISO`);
  }
  for (const k of ["grpcEndpoint", "certificateFingerprint"]) {
    if (d[k] !== undefined && (typeof d[k] !== "string" || (d[k] as string).length > 256)) {
      throw bad(`${k} must be a string`);
    }
  }
  if (
    d.indexGeneration !== undefined &&
    (!Number.isSafeInteger(d.indexGeneration) || (d.indexGeneration as number) < 0)
  ) throw bad("indexGeneration must be an integer ≥ 0");
  if (typeof d.converged !== "boolean") throw bad("converged must be a boolean");
  if (!Array.isArray(d.deployments) || d.deployments.length > 10_000) {
    throw bad("deployments must be a list");
  }
  const deployments = d.deployments.map((e: Record<string, unknown>, i: number) => {
    if (!e || typeof e !== "object" || !isDnsLabel(e.namespace) || !isDnsLabel(e.name)) {
      throw bad(`deployments[${i}] has an invalid name`);
    }
    const out: NodeDeployment = { namespace: e.namespace as string, name: e.name as string };
    if (e.spec !== undefined) {
      if (typeof e.spec !== "string" || !SPEC.test(e.spec)) throw bad(`deployments[${i}].spec`);
      out.spec = e.spec;
    }
    if (e.pending !== undefined) out.pending = String(e.pending).slice(0, 512);
    if (e.ready !== undefined) out.ready = e.ready === true;
    if (e.rollout !== undefined) out.rollout = parseRollout(e.rollout, bad, `deployments[${i}]`);
    return out;
  });
  return {
    apiVersion: API_VERSION,
    kind: "NodeRecord",
    nodeGroup,
    nodeId,
    address: d.address as string,
    podPrefix: d.podPrefix as string,
    ...(d.grpcEndpoint !== undefined ? { grpcEndpoint: d.grpcEndpoint as string } : {}),
    ...(d.certificateFingerprint !== undefined
      ? { certificateFingerprint: d.certificateFingerprint as string }
      : {}),
    agentVersion: d.agentVersion as string,
    startedAt: d.startedAt as string,
    heartbeat: d.heartbeat as string,
    ...(d.indexGeneration !== undefined ? { indexGeneration: d.indexGeneration as number } : {}),
    converged: d.converged,
    deployments,
    ...(d.endpoints !== undefined
      ? { endpoints: parseEndpointSet(d.endpoints, `${key} endpoints`) }
      : {}),
    // Untrusted text shown on a terminal: one line, printable, bounded.
    ...(d.problem !== undefined ? { problem: oneLine(String(d.problem)).slice(0, 512) } : {}),
  };
}

/** `text` with every run of control characters (newlines, escapes) replaced by one space. */
function oneLine(text: string): string {
  return [...text].map((c) => (c.charCodeAt(0) < 0x20 || c.charCodeAt(0) === 0x7f ? " " : c))
    .join("").replace(/ {2,}/g, " ");
}

/** True when the record's heartbeat is older than `STALE_AFTER_MS` at `now`. */
export function isStale(record: NodeRecord, now = Date.now()): boolean {
  return now - Date.parse(record.heartbeat) > STALE_AFTER_MS;
}

/** A record's `deployments[].rollout`, validated as untrusted input. */
function parseRollout(
  v: unknown,
  bad: (why: string) => Error,
  at: string,
): NonNullable<NodeDeployment["rollout"]> {
  const r = v as Record<string, unknown>;
  if (!r || typeof r !== "object" || Array.isArray(r)) throw bad(`${at}.rollout is not an object`);
  if (
    r.phase !== "surging" && r.phase !== "replacing" && r.phase !== "failed" &&
    r.phase !== "waiting"
  ) {
    throw bad(`${at}.rollout.phase must be surging, replacing, failed or waiting`);
  }
  if (r.from !== undefined && (typeof r.from !== "string" || !SPEC.test(r.from))) {
    throw bad(`${at}.rollout.from must be sha256:<64 hex>`);
  }
  return {
    phase: r.phase,
    ...(r.from !== undefined ? { from: r.from as string } : {}),
    // Shown to operators: control characters replaced, 512 characters kept.
    ...(r.reason !== undefined ? { reason: oneLine(String(r.reason)).slice(0, 512) } : {}),
  };
}

/**
 * The messages of the endpoint mesh (spec §7.9): a node's complete report of its ready local
 * endpoints per Service, and the coordinator's complete, versioned cluster snapshot. Both travel
 * as JSON over mutual-TLS gRPC and are validated as untrusted input on receipt.
 */

import { ValidationError } from "../kit/errors.ts";
import { formatIpv6, parseIpv6 } from "./ipv6.ts";
import { checkNodeGroup, checkNodeId, isDnsLabel } from "./names.ts";
import { type IndexChange, parseIndexChange } from "./index_change.ts";

/** Ready backend addresses per Service (`namespace/name`), each list sorted and unique. */
export type EndpointSet = Record<string, string[]>;

/** A node's report: every ready endpoint it hosts, complete (not a delta). */
export interface NodeReport {
  nodeId: string;
  nodeGroup: string;
  /** +1 per change on the reporting node; the coordinator keeps the highest. */
  seq: number;
  endpoints: EndpointSet;
}

/** The coordinator's cluster snapshot: complete, versioned by (term, version). */
export interface ClusterSnapshot {
  /** The coordinator's lease term: a new coordinator's snapshots supersede an old one's. */
  term: number;
  /** +1 per snapshot within a term. */
  version: number;
  /** Nodes whose reports it merges. */
  nodes: number;
  endpoints: EndpointSet;
  /**
   * The coordinator's announcement of `deployments/index.json` (spec §7.9, change notification):
   * its ETag as last read (absent: no index), so members GET the index only when it changed.
   */
  index?: IndexAnnouncement;
  /**
   * What changed in `deployments/index.json` since the coordinator's previous read of it (spec
   * §7.9, changes over the mesh): only in the first snapshot announcing a new index, its result
   * always that `index`. A member holding the change's base applies it without a bucket read.
   */
  indexChange?: IndexChange;
  /** The same for `services/index.json` (Service VIPs: DNS, the dataplane, certificate names). */
  services?: IndexAnnouncement;
  /** The same for `identity/workload-ca.json` (the workload CA state). */
  caState?: IndexAnnouncement;
  /**
   * Who contends for the lease first if this coordinator goes (spec §7.9, bounded election): the
   * members with the lowest election hash of node id and term, lowest first, at most
   * `MESH_LIMITS.successors`.
   */
  successors?: string[];
}

/** The bucket objects a coordinator announces, by their snapshot field. */
export const ANNOUNCED_OBJECTS = ["index", "services", "caState"] as const;
/** One of `ANNOUNCED_OBJECTS`. */
export type AnnouncedObject = typeof ANNOUNCED_OBJECTS[number];

/** What the coordinator last read of `deployments/index.json`. */
export interface IndexAnnouncement {
  /** The object's ETag, or "" when the index is absent. */
  etag: string;
  generation?: number;
}

/** Bounds of untrusted messages. */
export const MESH_LIMITS = {
  services: 10_000,
  endpointsPerService: 10_000,
  successors: 16,
} as const;

function bad(what: string, why: string): ValidationError {
  return new ValidationError(`${what}: ${why}`);
}

/** Validates an endpoint set (Service names, canonical IPv6, limits); sorted copy. */
export function parseEndpointSet(value: unknown, what: string): EndpointSet {
  if (!value || typeof value !== "object" || Array.isArray(value)) throw bad(what, "not an object");
  const entries = Object.entries(value as Record<string, unknown>);
  if (entries.length > MESH_LIMITS.services) throw bad(what, "too many Services");
  const out: EndpointSet = {};
  entries.sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  for (const [service, ips] of entries) {
    const [ns, name, ...rest] = service.split("/");
    if (rest.length || !isDnsLabel(ns) || !isDnsLabel(name)) {
      throw bad(what, `${JSON.stringify(service)} is not namespace/name`);
    }
    if (!Array.isArray(ips) || ips.length > MESH_LIMITS.endpointsPerService) {
      throw bad(what, `${service}: endpoints must be a list`);
    }
    out[service] = [...new Set(ips.map((ip) => formatIpv6(parseIpv6(String(ip)))))].sort();
  }
  return out;
}

/** Validates a report. */
export function parseNodeReport(value: unknown): NodeReport {
  const v = value as Record<string, unknown>;
  if (!v || typeof v !== "object") throw bad("report", "not an object");
  if (!Number.isSafeInteger(v.seq) || (v.seq as number) < 0) throw bad("report", "seq");
  return {
    nodeId: checkNodeId(v.nodeId),
    nodeGroup: checkNodeGroup(v.nodeGroup),
    seq: v.seq as number,
    endpoints: parseEndpointSet(v.endpoints, "report endpoints"),
  };
}

/** Validates a snapshot. */
export function parseClusterSnapshot(value: unknown): ClusterSnapshot {
  const v = value as Record<string, unknown>;
  if (!v || typeof v !== "object") throw bad("snapshot", "not an object");
  for (const k of ["term", "version", "nodes"]) {
    if (!Number.isSafeInteger(v[k]) || (v[k] as number) < 0) throw bad("snapshot", k);
  }
  const snapshot: ClusterSnapshot = {
    term: v.term as number,
    version: v.version as number,
    nodes: v.nodes as number,
    endpoints: parseEndpointSet(v.endpoints, "snapshot endpoints"),
  };
  for (const field of ANNOUNCED_OBJECTS) {
    if (v[field] === undefined) continue;
    const i = v[field] as Record<string, unknown>;
    if (!i || typeof i.etag !== "string" || i.etag.length > 256) throw bad("snapshot", field);
    if (
      i.generation !== undefined &&
      (!Number.isSafeInteger(i.generation) || (i.generation as number) < 0)
    ) throw bad("snapshot", `${field}.generation`);
    snapshot[field] = {
      etag: i.etag,
      ...(i.generation !== undefined ? { generation: i.generation as number } : {}),
    };
  }
  if (v.indexChange !== undefined) {
    const change = parseIndexChange(v.indexChange);
    if (change.etag !== snapshot.index?.etag || change.generation !== snapshot.index.generation) {
      throw bad("snapshot", "indexChange does not result in the announced index");
    }
    snapshot.indexChange = change;
  }
  if (v.successors !== undefined) snapshot.successors = parseSuccessors(v.successors);
  return snapshot;
}

/** Validates a snapshot's `successors`: distinct node ids, at most `MESH_LIMITS.successors`. */
function parseSuccessors(value: unknown): string[] {
  if (!Array.isArray(value) || value.length > MESH_LIMITS.successors) {
    throw bad("snapshot", `successors must be a list of at most ${MESH_LIMITS.successors}`);
  }
  let ids: string[];
  try {
    ids = value.map((id) => checkNodeId(id));
  } catch (err) {
    throw bad("snapshot", `successors: ${(err as Error).message}`);
  }
  if (new Set(ids).size !== ids.length) throw bad("snapshot", "successors must be distinct");
  return ids;
}

/** The union of the reports' endpoints, sorted (deterministic bytes for equal inputs). */
export function mergeReports(reports: Iterable<NodeReport>): EndpointSet {
  const merged = new Map<string, Set<string>>();
  for (const r of reports) {
    for (const [service, ips] of Object.entries(r.endpoints)) {
      let set = merged.get(service);
      if (!set) merged.set(service, set = new Set());
      for (const ip of ips) set.add(ip);
    }
  }
  const out: EndpointSet = {};
  for (const service of [...merged.keys()].sort()) out[service] = [...merged.get(service)!].sort();
  return out;
}

/** Positive when `a` is newer than `b` (term first, then version). */
export function compareSnapshots(
  a: Pick<ClusterSnapshot, "term" | "version">,
  b: Pick<ClusterSnapshot, "term" | "version">,
): number {
  return a.term !== b.term ? a.term - b.term : a.version - b.version;
}

/** True when two endpoint sets are equal. */
export function sameEndpoints(a: EndpointSet, b: EndpointSet): boolean {
  return JSON.stringify(a) === JSON.stringify(b);
}

/**
 * `dns/coordinator.json`: where the current mesh coordinator listens, written by the agent that
 * holds the coordinator lease (`dns/coordinator-lease.json`) right after it took it; members read
 * it to connect. Validated as untrusted input; a record with a lower term than one already seen
 * is ignored by members.
 */

import { MESH_COORDINATOR } from "../../core/bucket/bucket_layout.ts";
import { ValidationError } from "../../core/kit/errors.ts";
import { checkNodeId } from "../../core/model/names.ts";
import { getIfExists, type ObjectStore } from "../../core/store/object_store.ts";

/** The record. */
export interface CoordinatorRecord {
  nodeId: string;
  term: number;
  /** `host:port` (IPv6 in brackets) of its mesh server. */
  endpoint: string;
  /** The DNS name its certificate carries (clients verify it). */
  serverName: string;
}

/** Parses and validates a record. */
export function parseCoordinatorRecord(bytes: Uint8Array): CoordinatorRecord {
  let v: Record<string, unknown>;
  try {
    v = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(bytes));
  } catch (err) {
    throw new ValidationError(`${MESH_COORDINATOR}: not JSON: ${(err as Error).message}`);
  }
  const bad = (k: string) => new ValidationError(`${MESH_COORDINATOR}: invalid ${k}`);
  if (!v || typeof v !== "object") throw bad("document");
  if (!Number.isSafeInteger(v.term) || (v.term as number) < 1) throw bad("term");
  if (
    typeof v.endpoint !== "string" ||
    !/^(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9.-]+):[0-9]{1,5}$/.test(v.endpoint)
  ) throw bad("endpoint");
  if (typeof v.serverName !== "string" || !/^[a-z0-9.-]{1,253}$/.test(v.serverName)) {
    throw bad("serverName");
  }
  return {
    nodeId: checkNodeId(v.nodeId),
    term: v.term as number,
    endpoint: v.endpoint,
    serverName: v.serverName,
  };
}

/** Writes the record (the lease holder only). */
export async function writeCoordinatorRecord(
  store: ObjectStore,
  record: CoordinatorRecord,
): Promise<void> {
  await store.put(MESH_COORDINATOR, new TextEncoder().encode(JSON.stringify(record) + "\n"), {
    contentType: "application/json",
  });
}

/** Reads the record, or undefined when there is none. */
export async function readCoordinatorRecord(
  store: ObjectStore,
): Promise<CoordinatorRecord | undefined> {
  const got = await getIfExists(store, MESH_COORDINATOR, { maxBytes: 4096 });
  return got && parseCoordinatorRecord(got.body);
}

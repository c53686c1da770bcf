/**
 * The node's record under `dns/nodes/` (core/bucket/node_record.ts): written on every heartbeat with the
 * deployments loop's summary, removed on clean shutdown. A failed write is reported and retried on
 * the next heartbeat; nothing else depends on it.
 */

import {
  type NodeDeployment,
  type NodeRecord,
  nodeRecordKey,
  serializeNodeRecord,
} from "../../core/bucket/node_record.ts";
import type { ObjectStore } from "../../core/store/object_store.ts";
import type { EndpointSet } from "../../core/model/endpoint_snapshot.ts";
import { API_VERSION } from "../../core/model/resources.ts";
import { VERSION } from "../../core/kit/version.ts";

/** Options of `NodeRecordWriter`. */
export interface NodeRecordWriterOptions {
  store: ObjectStore;
  nodeGroup: string;
  nodeId: string;
  /** `--node-address`. */
  address?: string;
  /** `--ipv6-prefix`. */
  podPrefix?: string;
  /** The node's current convergence (the deployments part's summary and status). */
  summary(): { indexGeneration?: number; converged: boolean; deployments: NodeDeployment[] };
  /** With discovery: the node's endpoints and its Ready Deployments (`namespace/name`). */
  discovery?(): { endpoints: EndpointSet; ready: Set<string> } | undefined;
  /** Why the node cannot do part of its job (one line), or undefined. */
  problem?(): string | undefined;
}

/** Writes and removes one node's record. */
export class NodeRecordWriter {
  readonly #o: NodeRecordWriterOptions;
  readonly #startedAt = new Date().toISOString();

  constructor(options: NodeRecordWriterOptions) {
    this.#o = options;
  }

  /** The record's key. */
  get key(): string {
    return nodeRecordKey({ nodeGroup: this.#o.nodeGroup, nodeId: this.#o.nodeId });
  }

  /** Writes the record now; returns it. Throws the store's typed errors. */
  async write(now = new Date()): Promise<NodeRecord> {
    const s = this.#o.summary();
    const found = this.#o.discovery?.();
    const problem = this.#o.problem?.();
    const deployments = found
      ? s.deployments.map((d) => ({ ...d, ready: found.ready.has(`${d.namespace}/${d.name}`) }))
      : s.deployments;
    const record: NodeRecord = {
      apiVersion: API_VERSION,
      kind: "NodeRecord",
      nodeGroup: this.#o.nodeGroup,
      nodeId: this.#o.nodeId,
      address: this.#o.address ?? "",
      podPrefix: this.#o.podPrefix ?? "",
      agentVersion: VERSION,
      startedAt: this.#startedAt,
      heartbeat: now.toISOString(),
      ...(s.indexGeneration !== undefined ? { indexGeneration: s.indexGeneration } : {}),
      converged: s.converged,
      deployments,
      ...(found ? { endpoints: found.endpoints } : {}),
      ...(problem ? { problem } : {}),
    };
    await this.#o.store.put(this.key, serializeNodeRecord(record), {
      contentType: "application/json",
    });
    return record;
  }

  /** Removes the record (clean shutdown). */
  async remove(): Promise<void> {
    await this.#o.store.delete(this.key);
  }
}

/**
 * `deployments/index.json`: every Deployment of the cluster with its NodeGroup
 * and content address. Written by the CLI (CAS loop over `DEPLOYMENT_INDEX_OBJECT`),
 * polled by every agent (`pollDeploymentIndex`); agents treat it as untrusted input.
 */

import { DEPLOYMENT_INDEX } from "./bucket_layout.ts";
import type { CasObject } from "../store/cas_update.ts";
import { API_VERSION } from "../model/resources.ts";
import {
  type DeploymentEntry,
  type IndexSignature,
  parseDeploymentEntry,
  parseIndexSignature,
} from "../model/deployment_entry.ts";
export type { DeploymentEntry, IndexSignature } from "../model/deployment_entry.ts";
export { parseDeploymentEntry, parseIndexSignature } from "../model/deployment_entry.ts";
import { NotFoundError, ValidationError } from "../kit/errors.ts";
import { compareCodeUnits } from "../kit/canonical_json.ts";
import { LIMITS } from "../kit/limits.ts";
import { getIfExists, type ObjectStore } from "../store/object_store.ts";

/** The index document. */
export interface DeploymentIndex {
  apiVersion: typeof API_VERSION;
  kind: "DeploymentIndex";
  /** Incremented by every write. */
  generation: number;
  deployments: DeploymentEntry[];
  /** The CLI's signature (absent: written unsigned, e.g. by setup's empty index). */
  signature?: IndexSignature;
}

/** An empty index (what an absent object means). */
export function emptyDeploymentIndex(): DeploymentIndex {
  return { apiVersion: API_VERSION, kind: "DeploymentIndex", generation: 0, deployments: [] };
}

/** Parses and validates index bytes. Throws `ValidationError` on anything unexpected. */
export function parseDeploymentIndex(bytes: Uint8Array): DeploymentIndex {
  let doc: unknown;
  try {
    doc = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(bytes));
  } catch (err) {
    throw new ValidationError(
      `${DEPLOYMENT_INDEX} is not valid JSON: ${(err as Error).message}`,
    );
  }
  const d = doc as Partial<DeploymentIndex>;
  const bad = (why: string) => new ValidationError(`${DEPLOYMENT_INDEX}: ${why}`);
  if (d === null || typeof d !== "object") throw bad("not an object");
  if (d.apiVersion !== API_VERSION) {
    throw bad(`unsupported apiVersion ${JSON.stringify(d.apiVersion)}`);
  }
  if (d.kind !== "DeploymentIndex") throw bad(`kind must be DeploymentIndex`);
  if (!Number.isSafeInteger(d.generation) || d.generation! < 0) {
    throw bad("generation must be a non-negative integer");
  }
  if (!Array.isArray(d.deployments)) throw bad("deployments must be a list");
  const seen = new Set<string>();
  const deployments = d.deployments.map((e, i) => {
    const entry = parseDeploymentEntry(e, `${DEPLOYMENT_INDEX}: deployments[${i}]`);
    const ref = `${entry.namespace}/${entry.name}`;
    if (seen.has(ref)) throw bad(`duplicate deployment ${ref}`);
    seen.add(ref);
    return entry;
  });
  return {
    apiVersion: API_VERSION,
    kind: "DeploymentIndex",
    generation: d.generation!,
    deployments,
    ...(d.signature !== undefined
      ? { signature: parseIndexSignature(d.signature, `${DEPLOYMENT_INDEX}: signature`) }
      : {}),
  };
}

/**
 * Serialises an index: entries sorted by namespace/name, each and the document in a fixed key
 * order (the signed bytes are this without the signature: `indexSignedBytes`).
 */
export function serializeDeploymentIndex(index: DeploymentIndex): Uint8Array {
  const deployments = [...index.deployments].sort((a, b) =>
    compareCodeUnits(a.namespace, b.namespace) || compareCodeUnits(a.name, b.name)
  ).map((e) => ({ namespace: e.namespace, name: e.name, nodeGroup: e.nodeGroup, spec: e.spec }));
  const doc = {
    apiVersion: index.apiVersion,
    kind: index.kind,
    generation: index.generation,
    deployments,
    ...(index.signature ? { signature: index.signature } : {}),
  };
  return new TextEncoder().encode(JSON.stringify(doc, null, 1) + "\n");
}

/**
 * `deployments/index.json` as a CAS object (absent means empty), written unsigned; the CLI writes
 * through `signedDeploymentIndexObject` (core/bucket/index_signing.ts).
 */
export const DEPLOYMENT_INDEX_OBJECT: CasObject<DeploymentIndex> = {
  key: DEPLOYMENT_INDEX,
  parse: parseDeploymentIndex,
  // A writer without the signing key drops an earlier signature: it would not match any more.
  serialize: ({ signature: _, ...unsigned }) => serializeDeploymentIndex(unsigned),
  empty: emptyDeploymentIndex,
  contentType: "application/json",
  maxBytes: LIMITS.indexBytes,
};

/** Reads the deployment index (empty when absent). */
export async function readDeploymentIndex(store: ObjectStore): Promise<DeploymentIndex> {
  const got = await getIfExists(store, DEPLOYMENT_INDEX, { maxBytes: LIMITS.indexBytes });
  return got ? parseDeploymentIndex(got.body) : emptyDeploymentIndex();
}

/** What a conditional read of the index found (`pollDeploymentIndex`). */
export type DeploymentIndexPoll =
  /** Same ETag as last time: nothing to parse. */
  | { state: "unchanged" }
  /** No index: no Deployments. */
  | { state: "absent"; index: DeploymentIndex }
  | { state: "changed"; etag: string; index: DeploymentIndex }
  /** New bytes that do not parse: the caller keeps its last good index. */
  | { state: "rejected"; etag: string; error: Error };

/**
 * Reads the index with If-None-Match `etag`. Store failures (unavailable, denied) throw; an
 * absent or invalid index is a result, so the caller decides what it keeps.
 */
export async function pollDeploymentIndex(
  store: ObjectStore,
  etag: string | undefined,
): Promise<DeploymentIndexPoll> {
  try {
    const res = await store.get(DEPLOYMENT_INDEX, {
      ifNoneMatch: etag,
      maxBytes: LIMITS.indexBytes,
    });
    if (res.notModified) return { state: "unchanged" };
    try {
      return { state: "changed", etag: res.info.etag, index: parseDeploymentIndex(res.body) };
    } catch (err) {
      return { state: "rejected", etag: res.info.etag, error: err as Error };
    }
  } catch (err) {
    if (err instanceof NotFoundError) return { state: "absent", index: emptyDeploymentIndex() };
    throw err;
  }
}

/**
 * `deployments/index.json`: every Deployment of the cluster with its NodeGroup
 * and content address. Written by the CLI (CAS loop over `DEPLOYMENT_INDEX_OBJECT`),
 * polled by every agent (`pollDeploymentIndex`); agents treat it as untrusted input.
 */

import { DEPLOYMENT_INDEX } from "./bucket_layout.ts";
import type { CasObject } from "../store/cas_update.ts";
import { API_VERSION } from "../model/resources.ts";
import { NotFoundError, ValidationError } from "../kit/errors.ts";
import { isDnsLabel } from "../model/names.ts";
import { compareCodeUnits } from "../kit/canonical_json.ts";
import { LIMITS } from "../kit/limits.ts";
import { getIfExists, type ObjectStore } from "../store/object_store.ts";

/** One Deployment in the index. */
export interface DeploymentEntry {
  namespace: string;
  name: string;
  nodeGroup: string;
  /** `sha256:<hex>` of the canonical spec object. */
  spec: string;
}

/**
 * An index's signature by the CLI (`core/bucket/index_signing.ts`): which key, and the Ed25519
 * signature (base64) of the index serialised without it.
 */
export interface IndexSignature {
  /** The first 16 hex digits of the SHA-256 of the public key's SPKI DER. */
  keyId: string;
  /** Base64 of the 64-byte Ed25519 signature. */
  ed25519: string;
}

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

const KEY_ID = /^[0-9a-f]{16}$/;
const SIGNATURE = /^[A-Za-z0-9+/]{86}==$/;

/** Validates a `signature` field (untrusted: from the bucket or a peer); `at` names it. */
export function parseIndexSignature(value: unknown, at: string): IndexSignature {
  const v = value as Partial<IndexSignature> | null;
  if (!v || typeof v !== "object") throw new ValidationError(`${at} is not an object`);
  if (typeof v.keyId !== "string" || !KEY_ID.test(v.keyId)) {
    throw new ValidationError(`${at}.keyId must be 16 hex digits`);
  }
  if (typeof v.ed25519 !== "string" || !SIGNATURE.test(v.ed25519)) {
    throw new ValidationError(`${at}.ed25519 must be a base64 Ed25519 signature`);
  }
  return { keyId: v.keyId, ed25519: v.ed25519 };
}

/** An empty index (what an absent object means). */
export function emptyDeploymentIndex(): DeploymentIndex {
  return { apiVersion: API_VERSION, kind: "DeploymentIndex", generation: 0, deployments: [] };
}

const SPEC_REF = /^sha256:[0-9a-f]{64}$/;

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
 * Validates one index entry (untrusted: from the index object or a mesh peer); `at` names it in
 * the error. Throws `ValidationError`.
 */
export function parseDeploymentEntry(value: unknown, at: string): DeploymentEntry {
  const e = value as Partial<DeploymentEntry> | null;
  const bad = (why: string) => new ValidationError(`${at}${why}`);
  if (e === null || typeof e !== "object") throw bad(" is not an object");
  if (!isDnsLabel(e.namespace)) throw bad(".namespace invalid");
  if (!isDnsLabel(e.name)) throw bad(".name invalid");
  if (!isDnsLabel(e.nodeGroup)) throw bad(".nodeGroup invalid");
  if (typeof e.spec !== "string" || !SPEC_REF.test(e.spec)) {
    throw bad(".spec must be sha256:<64 hex>");
  }
  return { namespace: e.namespace!, name: e.name!, nodeGroup: e.nodeGroup!, spec: e.spec };
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

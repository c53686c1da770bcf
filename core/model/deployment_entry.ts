/**
 * One entry of the deployments index and the index's signature, as data: their types and their
 * validation as untrusted input (from the index object, or a mesh peer's change). The index object
 * itself is `core/bucket/deployment_index.ts`; the change the mesh carries, `./index_change.ts`.
 */

import { ValidationError } from "../kit/errors.ts";
import { isDnsLabel } from "./names.ts";

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

const SPEC_REF = /^sha256:[0-9a-f]{64}$/;
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

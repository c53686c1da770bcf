/**
 * Content-addressed spec objects (Deployments, Services): their digests, writing them once
 * (the CLI, before the index that references them) and reading them back as untrusted input
 * (the agent and the CLI). A digest mismatch or a bad schema is a `ValidationError`.
 */

import { deploymentSpecKey, serviceSpecKey } from "./bucket_layout.ts";
import { contentAddress } from "../kit/canonical_json.ts";
import { sha256Hex } from "../kit/digest.ts";
import {
  NotFoundError,
  PodminError,
  PreconditionFailedError,
  ValidationError,
} from "../kit/errors.ts";
import { LIMITS } from "../kit/limits.ts";
import { getIfExists, type ObjectStore, putIfAbsent } from "../store/object_store.ts";
import { type Deployment, parseResource, type Service } from "../model/resources.ts";
import { sleep } from "../kit/retry.ts";

/** The hex digest of a `sha256:<hex>` reference. */
export function specHex(ref: string): string {
  return ref.slice("sha256:".length);
}

/** A spec ready to store: its reference `sha256:<hex>` and canonical bytes. */
export interface EncodedSpec {
  kind: "Deployment" | "Service";
  ref: string;
  bytes: Uint8Array;
}

/** The canonical bytes of a Deployment or Service and their reference `sha256:<hex>`. */
export function encodeSpec(resource: Deployment | Service): EncodedSpec {
  const { bytes, sha256 } = contentAddress(resource);
  return { kind: resource.kind, ref: `sha256:${sha256}`, bytes };
}

/**
 * Stores a spec unless it is already there (content-addressed, so never overwritten). A write
 * lost to a concurrent writer of the same bytes counts only once HEAD confirms that write landed.
 */
export async function writeSpec(store: ObjectStore, spec: EncodedSpec): Promise<void> {
  const key = specKey(spec.kind, spec.ref);
  for (let attempt = 0; attempt < 5; attempt++) {
    try {
      await putIfAbsent(store, { key, body: spec.bytes, contentType: "application/json" });
      return;
    } catch (err) {
      if (!(err instanceof PreconditionFailedError)) throw err;
    }
    try {
      await store.head(key);
      return;
    } catch (err) {
      if (!(err instanceof NotFoundError)) throw err;
      await sleep(50 * (attempt + 1));
    }
  }
  throw new PodminError(`${key} could not be stored (concurrent writers kept conflicting)`, {
    hint: "retry the command",
  });
}

/** The bucket key of a spec reference `sha256:<hex>`. */
export function specKey(kind: "Deployment" | "Service", ref: string): string {
  const hex = specHex(ref);
  return kind === "Deployment" ? deploymentSpecKey(hex) : serviceSpecKey(hex);
}

/**
 * Verifies spec bytes against their reference and validates them.
 * Throws `ValidationError` on a digest mismatch, bad JSON or a bad schema.
 */
export function decodeSpec<K extends "Deployment" | "Service">(
  { kind, ref, bytes }: { kind: K; ref: string; bytes: Uint8Array },
): K extends "Deployment" ? Deployment : Service {
  const key = specKey(kind, ref);
  const actual = sha256Hex(bytes);
  if (`sha256:${actual}` !== ref) {
    throw new ValidationError(`${key}: content has sha256 ${actual}, not the referenced digest`);
  }
  let doc: unknown;
  try {
    doc = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(bytes));
  } catch (err) {
    throw new ValidationError(`${key}: not valid JSON: ${(err as Error).message}`);
  }
  const resource = parseResource(doc, key);
  if (resource.kind !== kind) throw new ValidationError(`${key}: expected a ${kind}`);
  return resource as K extends "Deployment" ? Deployment : Service;
}

/** Fetches, verifies and validates a spec. Throws `NotFoundError` when it is missing. */
export async function readSpec<K extends "Deployment" | "Service">(
  store: ObjectStore,
  { kind, ref }: { kind: K; ref: string },
): Promise<K extends "Deployment" ? Deployment : Service> {
  const key = specKey(kind, ref);
  const got = await getIfExists(store, key, { maxBytes: LIMITS.specBytes });
  if (!got) throw new NotFoundError(`${key} is missing`, { key });
  return decodeSpec({ kind, ref, bytes: got.body });
}

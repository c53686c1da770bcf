/** Reading content-addressed spec objects (Deployments, Services) as untrusted input. */

import { deploymentSpecKey, serviceSpecKey } from "./bucket_layout.ts";
import { sha256Hex } from "./digest.ts";
import { specHex } from "./deployment_index.ts";
import { NotFoundError, ValidationError } from "./errors.ts";
import { getIfExists, type ObjectStore } from "./object_store.ts";
import { type Deployment, parseResource, type Service } from "./resources.ts";

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
  kind: K,
  ref: string,
  bytes: Uint8Array,
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
  kind: K,
  ref: string,
): Promise<K extends "Deployment" ? Deployment : Service> {
  const key = specKey(kind, ref);
  const got = await getIfExists(store, key);
  if (!got) throw new NotFoundError(`${key} is missing`, { key });
  return decodeSpec(kind, ref, got.body);
}

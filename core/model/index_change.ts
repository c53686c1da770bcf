/**
 * A change of `deployments/index.json` as a snapshot of the endpoint mesh carries it (spec §7.9,
 * "Changes over the mesh"), as data: its type, its bounds and its validation as untrusted input
 * (`parseIndexChange`). Computing and applying one is `core/bucket/index_change.ts`.
 */

import { ValidationError } from "../kit/errors.ts";
import { isDnsLabel } from "./names.ts";
import {
  type DeploymentEntry,
  type IndexSignature,
  parseDeploymentEntry,
  parseIndexSignature,
} from "./deployment_entry.ts";

/**
 * Bounds of a change: a spec travels inline only up to `specBytes` (its canonical bytes), and one
 * change carries at most `inlineBytes` of specs and at most `specs` of them (the rest, and any spec
 * that fails its digest, is read from the bucket by the members that need it); at most `entries`
 * entries and removals.
 */
export const INDEX_CHANGE_LIMITS = {
  specBytes: 16 * 1024,
  inlineBytes: 64 * 1024,
  entries: 10_000,
  specs: 64,
} as const;

/** Which index a change applies to, or results in: the object's ETag ("" absent) and generation. */
export interface IndexVersion {
  etag: string;
  generation: number;
}

/** The change from one index to the next (a snapshot's `indexChange`). */
export interface IndexChange {
  /** The index it applies to: a member holding any other applies nothing. */
  base: IndexVersion;
  /** The index it results in (the snapshot's announced `index`). */
  etag: string;
  generation: number;
  /** Entries new or changed (nodeGroup or spec), in index order. */
  upsert: DeploymentEntry[];
  /** `namespace/name` of entries that left. */
  remove: string[];
  /** Canonical spec bytes (UTF-8 JSON text) by reference `sha256:<hex>`; unverified from a peer. */
  specs: Record<string, string>;
  /**
   * The resulting index's signature by the CLI (`core/bucket/index_signing.ts`): a member takes
   * the change only when the index it rebuilds verifies against the cluster's public key.
   */
  signature?: IndexSignature;
}

const SPEC_REF = /^sha256:[0-9a-f]{64}$/;

const refOf = (e: { namespace: string; name: string }) => `${e.namespace}/${e.name}`;

function bad(why: string): ValidationError {
  return new ValidationError(`snapshot indexChange: ${why}`);
}

function parseVersion(value: unknown, what: string): IndexVersion {
  const v = value as Partial<IndexVersion> | null;
  if (!v || typeof v !== "object") throw bad(`${what} is not an object`);
  return { etag: parseEtag(v.etag, `${what}.etag`), generation: parseGeneration(v.generation) };
}

function parseEtag(value: unknown, what: string): string {
  if (typeof value !== "string" || value.length > 256) throw bad(`${what} must be a string`);
  return value;
}

function parseGeneration(value: unknown): number {
  if (!Number.isSafeInteger(value) || (value as number) < 0) {
    throw bad("generation must be a non-negative integer");
  }
  return value as number;
}

/**
 * Validates a change from a peer: versions, entries as the index's own, removals as
 * `namespace/name`, no name twice, specs only for upserted entries and within the bounds. The
 * specs' content is not judged here: each is verified against its digest where it is used.
 */
export function parseIndexChange(value: unknown): IndexChange {
  const v = value as Record<string, unknown> | null;
  if (!v || typeof v !== "object") throw bad("not an object");
  const base = parseVersion(v.base, "base");
  const etag = parseEtag(v.etag, "etag");
  const generation = parseGeneration(v.generation);
  if (etag === base.etag) throw bad("the base and the result are the same index");
  if (!Array.isArray(v.upsert) || !Array.isArray(v.remove)) {
    throw bad("upsert and remove must be lists");
  }
  if (v.upsert.length + v.remove.length > INDEX_CHANGE_LIMITS.entries) {
    throw bad(`more than ${INDEX_CHANGE_LIMITS.entries} entries`);
  }
  const seen = new Set<string>();
  const once = (ref: string) => {
    if (seen.has(ref)) throw bad(`${ref} appears twice`);
    seen.add(ref);
  };
  const upsert = v.upsert.map((e, i) => {
    let entry: DeploymentEntry;
    try {
      entry = parseDeploymentEntry(e, `upsert[${i}]`);
    } catch (err) {
      throw bad((err as Error).message);
    }
    once(refOf(entry));
    return entry;
  });
  const remove = v.remove.map((ref, i) => {
    const [ns, name, ...rest] = typeof ref === "string" ? ref.split("/") : [];
    if (rest.length || !isDnsLabel(ns) || !isDnsLabel(name)) {
      throw bad(`remove[${i}] is not namespace/name`);
    }
    once(ref as string);
    return ref as string;
  });
  const specs: Record<string, string> = {};
  const s = v.specs as Record<string, unknown> | null;
  if (!s || typeof s !== "object" || Array.isArray(s)) throw bad("specs must be an object");
  const referenced = new Set(upsert.map((e) => e.spec));
  let total = 0;
  for (const [ref, text] of Object.entries(s)) {
    if (!SPEC_REF.test(ref) || !referenced.has(ref)) throw bad(`spec ${ref} is not upserted`);
    if (typeof text !== "string") throw bad(`spec ${ref} must be a string`);
    if (Object.keys(specs).length >= INDEX_CHANGE_LIMITS.specs) throw bad("too many inline specs");
    const bytes = new TextEncoder().encode(text).length;
    if (bytes > INDEX_CHANGE_LIMITS.specBytes) throw bad(`spec ${ref} exceeds the inline bound`);
    total += bytes;
    if (total > INDEX_CHANGE_LIMITS.inlineBytes) throw bad("inline specs exceed the bound");
    specs[ref] = text;
  }
  let signature: IndexSignature | undefined;
  if (v.signature !== undefined) {
    try {
      signature = parseIndexSignature(v.signature, "signature");
    } catch (err) {
      throw bad((err as Error).message);
    }
  }
  return { base, etag, generation, upsert, remove, specs, ...(signature ? { signature } : {}) };
}

/**
 * `deployments/history/<namespace>/<name>.json`: the specs a Deployment was applied with, newest
 * last, at most `HISTORY_LIMIT` (spec §5.5). Each revision names a content-addressed spec, which
 * stays in the bucket (specs are never deleted), so any listed revision can be applied again.
 * Written by the CLI (`recordRevision`, a CAS loop) after the index; read as untrusted input.
 */

import { deploymentHistoryKey } from "./bucket_layout.ts";
import { type CasObject, casUpdate } from "../store/cas_update.ts";
import { API_VERSION } from "../model/resources.ts";
import { ValidationError } from "../kit/errors.ts";
import { isDnsLabel } from "../model/names.ts";
import { getIfExists, type ObjectStore } from "../store/object_store.ts";

/** Revisions kept per Deployment. */
export const HISTORY_LIMIT = 10;

/** Largest history object read back (10 short entries; generous). */
const HISTORY_BYTES = 64 * 1024;

const SPEC_REF = /^sha256:[0-9a-f]{64}$/;

/** One applied spec. */
export interface Revision {
  /** 1 for the first apply; every new spec adds 1 (numbers are never reused). */
  revision: number;
  /** `sha256:<hex>` of the spec. */
  spec: string;
  /** ISO time of the apply. */
  appliedAt: string;
}

/** The history document. */
export interface DeploymentHistory {
  apiVersion: typeof API_VERSION;
  kind: "DeploymentHistory";
  namespace: string;
  name: string;
  /** Oldest first; revisions strictly increasing; at most `HISTORY_LIMIT`. */
  revisions: Revision[];
}

/** Parses and validates history bytes of `namespace/name`; throws `ValidationError`. */
export function parseDeploymentHistory(
  bytes: Uint8Array,
  ref: { namespace: string; name: string },
): DeploymentHistory {
  const key = deploymentHistoryKey(ref.namespace, ref.name);
  const bad = (why: string) => new ValidationError(`${key}: ${why}`);
  let d: Record<string, unknown>;
  try {
    d = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(bytes));
  } catch (err) {
    throw bad(`not valid JSON: ${(err as Error).message}`);
  }
  if (!d || typeof d !== "object" || Array.isArray(d)) throw bad("not an object");
  if (d.apiVersion !== API_VERSION || d.kind !== "DeploymentHistory") {
    throw bad(`expected ${API_VERSION} DeploymentHistory`);
  }
  if (d.namespace !== ref.namespace || d.name !== ref.name || !isDnsLabel(d.name)) {
    throw bad("names another Deployment");
  }
  if (!Array.isArray(d.revisions) || d.revisions.length > HISTORY_LIMIT) {
    throw bad(`revisions must be a list of at most ${HISTORY_LIMIT}`);
  }
  let last = 0;
  const revisions = d.revisions.map((r: Record<string, unknown>, i: number) => {
    const at = `revisions[${i}]`;
    if (!r || typeof r !== "object") throw bad(`${at} is not an object`);
    if (!Number.isSafeInteger(r.revision) || (r.revision as number) <= last) {
      throw bad(`${at}.revision must be an integer above the one before`);
    }
    last = r.revision as number;
    if (typeof r.spec !== "string" || !SPEC_REF.test(r.spec)) {
      throw bad(`${at}.spec must be sha256:<64 hex>`);
    }
    if (typeof r.appliedAt !== "string" || Number.isNaN(Date.parse(r.appliedAt))) {
      throw bad(`${at}.appliedAt must be a time`);
    }
    return { revision: last, spec: r.spec, appliedAt: r.appliedAt };
  });
  return { apiVersion: API_VERSION, kind: "DeploymentHistory", ...ref, revisions };
}

/** The history of `namespace/name` as a CAS object (absent means no revision yet). */
export function deploymentHistoryObject(
  ref: { namespace: string; name: string },
): CasObject<DeploymentHistory> {
  return {
    key: deploymentHistoryKey(ref.namespace, ref.name),
    parse: (bytes) => parseDeploymentHistory(bytes, ref),
    serialize: (h) => new TextEncoder().encode(JSON.stringify(h, null, 1) + "\n"),
    empty: () => ({ apiVersion: API_VERSION, kind: "DeploymentHistory", ...ref, revisions: [] }),
    contentType: "application/json",
    maxBytes: HISTORY_BYTES,
  };
}

/** Reads the history of `namespace/name` (empty when absent). */
export async function readDeploymentHistory(
  store: ObjectStore,
  ref: { namespace: string; name: string },
): Promise<DeploymentHistory> {
  const object = deploymentHistoryObject(ref);
  const got = await getIfExists(store, object.key, { maxBytes: HISTORY_BYTES });
  return got ? object.parse(got.body) : object.empty();
}

/**
 * Records `spec` as the newest revision of `namespace/name` unless it already is; the oldest
 * revisions beyond `HISTORY_LIMIT` are dropped. Returns the revision `spec` is now.
 */
export async function recordRevision(options: {
  store: ObjectStore;
  namespace: string;
  name: string;
  spec: string;
  now?: Date;
}): Promise<number> {
  const { store, spec } = options;
  const ref = { namespace: options.namespace, name: options.name };
  const result = await casUpdate({
    store,
    object: deploymentHistoryObject(ref),
    mutate: (current) => {
      const newest = current.revisions.at(-1);
      if (newest?.spec === spec) return undefined;
      const revision = (newest?.revision ?? 0) + 1;
      const appliedAt = (options.now ?? new Date()).toISOString();
      const revisions = [...current.revisions, { revision, spec, appliedAt }];
      return { ...current, revisions: revisions.slice(-HISTORY_LIMIT) };
    },
  });
  return result.value.revisions.at(-1)!.revision;
}

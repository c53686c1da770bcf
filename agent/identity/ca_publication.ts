/**
 * Publication of the workload CA trust bundle (every retained CA certificate, PEM) to the exact
 * external object `--workload-ca-publish s3://BUCKET/KEY` (spec §8.5). The elected agent reads the
 * object, and writes it only when its bytes differ from the current bundle: created when absent
 * (If-None-Match: *), else replaced If-Match the version it read, so a former leader's late write
 * cannot overwrite a newer bundle. Never deleted. The outcome is recorded in the CA state; the
 * planner promotes `next` only after the bundle holding it was published.
 */

import { TooLargeError } from "../../core/kit/limits.ts";
import { parseS3ObjectUrl } from "../../core/store/object_url.ts";
import { getIfExists, type ObjectStore } from "../../core/store/object_store.ts";
import type { WorkloadCaState } from "../../core/bucket/workload_ca_state.ts";

/** Largest external object read back (it holds a few certificates). */
const MAX_PUBLISHED_BYTES = 256 * 1024;

/** An exact external object. */
export interface PublicationTarget {
  /** `s3://bucket/key`. */
  url: string;
  bucket: string;
  key: string;
}

/** Parses `s3://BUCKET/KEY` (one object, not a prefix; `parseS3ObjectUrl`). */
export function parsePublicationTarget(url: string): PublicationTarget {
  return { url, ...parseS3ObjectUrl(url) };
}

/** `sha256:<hex>` of a PEM bundle's bytes (what the state records as published). */
export async function bundleSha256(pem: string | Uint8Array): Promise<string> {
  const bytes = typeof pem === "string" ? new TextEncoder().encode(pem) : pem;
  const digest = await crypto.subtle.digest("SHA-256", bytes as Uint8Array<ArrayBuffer>);
  return `sha256:${
    Array.from(new Uint8Array(digest), (b) => b.toString(16).padStart(2, "0")).join("")
  }`;
}

/** The outcome of one publication attempt. */
export type PublishOutcome =
  | { ok: true; sha256: string; wrote: boolean }
  | { ok: false; error: string };

/** Options of `publishBundle`. */
export interface PublishOptions {
  /** The store of the external bucket. */
  store: ObjectStore;
  target: PublicationTarget;
  /** The trust bundle (`trustBundlePem`). */
  pem: string;
  /** Called right before the write; false cancels it (the lease was lost meanwhile). */
  mayWrite?: () => boolean;
}

/**
 * Makes the external object hold exactly `pem`. Never throws for store errors: they are the
 * outcome (`ok: false`), to be recorded and reported.
 */
export async function publishBundle(options: PublishOptions): Promise<PublishOutcome> {
  const { store, target, pem } = options;
  const sha256 = await bundleSha256(pem);
  try {
    const current = await getIfExists(store, target.key, { maxBytes: MAX_PUBLISHED_BYTES })
      .catch((err) => {
        // A larger or unreadable object is replaced, not trusted: only its ETag matters.
        if (err instanceof TooLargeError) return null;
        throw err;
      });
    if (current && await bundleSha256(current.body) === sha256) {
      return { ok: true, sha256, wrote: false };
    }
    if (options.mayWrite && !options.mayWrite()) {
      return { ok: false, error: "not written: this agent no longer holds the CA lease" };
    }
    const body = new TextEncoder().encode(pem);
    if (current === null) {
      const info = await store.head(target.key);
      await store.put(target.key, body, { ifMatch: info.etag, contentType: PEM_TYPE });
    } else if (current) {
      await store.put(target.key, body, { ifMatch: current.info.etag, contentType: PEM_TYPE });
    } else {
      await store.put(target.key, body, { ifNoneMatch: "*", contentType: PEM_TYPE });
    }
    return { ok: true, sha256, wrote: true };
  } catch (err) {
    const e = err as Error;
    return { ok: false, error: `${target.url}: ${e.message}`.slice(0, 1000) };
  }
}

const PEM_TYPE = "application/x-pem-file";

/** The state with the outcome of a publication recorded (success clears an earlier error). */
export function recordPublication(options: {
  state: WorkloadCaState;
  target: PublicationTarget;
  outcome: PublishOutcome;
  now: Date;
}): WorkloadCaState {
  const { state, target, outcome } = options;
  const at = options.now.toISOString();
  const prev = state.publication?.target === target.url ? state.publication : undefined;
  const publication = outcome.ok
    ? { target: target.url, publishedSha256: outcome.sha256, publishedAt: at }
    : {
      target: target.url,
      ...(prev?.publishedSha256
        ? { publishedSha256: prev.publishedSha256, publishedAt: prev.publishedAt }
        : {}),
      error: outcome.error,
      failedAt: at,
    };
  return { ...state, publication };
}

/** True when the state already records exactly this outcome (no write needed). */
export function publicationRecorded(
  state: WorkloadCaState,
  target: PublicationTarget,
  outcome: PublishOutcome,
): boolean {
  const p = state.publication;
  if (!p || p.target !== target.url) return false;
  return outcome.ok
    ? p.publishedSha256 === outcome.sha256 && p.error === undefined
    : p.error === outcome.error;
}

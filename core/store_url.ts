/** Opens the object store a `--bucket` URL names: `s3://NAME` or `file:///path`. */

import * as path from "node:path";
import { UsageError } from "./errors.ts";
import { createFsBucket, FsStore } from "./fs_store.ts";
import type { ObjectStore } from "./object_store.ts";
import type { RetryPolicy } from "./retry.ts";
import { S3Store } from "./s3_store.ts";

/** Options of `openStore`. */
export interface OpenStoreOptions {
  /** AWS region for s3:// (default: AWS_REGION, AWS_DEFAULT_REGION, then us-east-1). */
  region?: string;
  /** Retry policy of an S3 store (default `DEFAULT_RETRY`, §2.3). */
  retry?: RetryPolicy;
}

const BUCKET_NAME = /^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/;

/** The region to use when none is given. */
export function defaultRegion(): string {
  return Deno.env.get("AWS_REGION") ?? Deno.env.get("AWS_DEFAULT_REGION") ?? "us-east-1";
}

/**
 * Creates the filesystem bucket a `file://` URL names (idempotent; false when it existed). S3
 * buckets are created by `podmin setup`, so an `s3://` URL is refused with that hint.
 */
export async function createBucket(url: string): Promise<boolean> {
  if (url.startsWith("file://")) return await createFsBucket(filePath(url));
  openStore(url); // a malformed URL fails here with the accepted forms
  throw new UsageError(`create-bucket makes filesystem buckets only, not ${url}`, {
    hint: "S3 buckets are created by `podmin setup`",
  });
}

function filePath(url: string): string {
  const p = decodeURIComponent(url.slice("file://".length));
  if (!path.isAbsolute(p)) {
    throw new UsageError(`file store path must be absolute: ${JSON.stringify(url)}`, {
      hint: "use --bucket s3://BUCKET-NAME or --bucket file:///absolute/path",
    });
  }
  return p;
}

/** Parses a store URL and opens the store. */
export function openStore(url: string, options: OpenStoreOptions = {}): ObjectStore {
  const hint = "use --bucket s3://BUCKET-NAME or --bucket file:///absolute/path";
  if (url.startsWith("s3://")) {
    const bucket = url.slice("s3://".length).replace(/\/$/, "");
    if (!BUCKET_NAME.test(bucket)) {
      throw new UsageError(`invalid S3 bucket name ${JSON.stringify(bucket)}`, { hint });
    }
    return new S3Store({ bucket, region: options.region ?? defaultRegion(), retry: options.retry });
  }
  if (url.startsWith("file://")) return new FsStore({ root: filePath(url), mustExist: true });
  if (BUCKET_NAME.test(url)) {
    throw new UsageError(`bucket URL ${JSON.stringify(url)} has no scheme`, {
      hint: `use --bucket s3://${url} for an S3 bucket, or --bucket file:///absolute/path`,
    });
  }
  throw new UsageError(`unsupported bucket URL ${JSON.stringify(url)}`, { hint });
}

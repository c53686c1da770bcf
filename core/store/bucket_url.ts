/**
 * The `--bucket` URL: `s3://NAME` or `file:///absolute/path`, parsed and validated, and the store
 * at it constructed. Nothing here imports the S3 client: `storeAt` is handed the `S3Store` class, by
 * `openStore` (core/store/store_url.ts, which imports it) or by a caller that imports it only for an
 * `s3://` URL (the CLI's `storeOf`, so a command on a filesystem bucket never loads it).
 */

import * as path from "node:path";
import { UsageError } from "../kit/errors.ts";
import { createFsBucket, FsStore } from "./fs_store.ts";
import type { ObjectStore } from "./object_store.ts";
import type { RetryPolicy } from "../kit/retry.ts";
import type { S3Store } from "./s3_store.ts";

/** Options of opening a store. */
export interface OpenStoreOptions {
  /** AWS region for s3:// (default: AWS_REGION, AWS_DEFAULT_REGION, then us-east-1). */
  region?: string;
  /** Retry policy of an S3 store (default `DEFAULT_RETRY`, §2.3). */
  retry?: RetryPolicy;
}

/** Where a bucket URL points. */
export type StoreLocation = { scheme: "s3"; bucket: string } | { scheme: "file"; root: string };

const BUCKET_NAME = /^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/;
const HINT = "use --bucket s3://BUCKET-NAME or --bucket file:///absolute/path";

/** The region to use when none is given. */
export function defaultRegion(): string {
  return Deno.env.get("AWS_REGION") ?? Deno.env.get("AWS_DEFAULT_REGION") ?? "us-east-1";
}

/** Parses and validates a bucket URL; a usage error names the accepted forms. */
export function parseStoreUrl(url: string): StoreLocation {
  if (url.startsWith("s3://")) {
    const bucket = url.slice("s3://".length).replace(/\/$/, "");
    if (!BUCKET_NAME.test(bucket)) {
      throw new UsageError(`invalid S3 bucket name ${JSON.stringify(bucket)}`, { hint: HINT });
    }
    return { scheme: "s3", bucket };
  }
  if (url.startsWith("file://")) {
    const root = decodeURIComponent(url.slice("file://".length));
    if (!path.isAbsolute(root)) {
      throw new UsageError(`file store path must be absolute: ${JSON.stringify(url)}`, {
        hint: HINT,
      });
    }
    return { scheme: "file", root };
  }
  if (BUCKET_NAME.test(url)) {
    throw new UsageError(`bucket URL ${JSON.stringify(url)} has no scheme`, {
      hint: `use --bucket s3://${url} for an S3 bucket, or --bucket file:///absolute/path`,
    });
  }
  throw new UsageError(`unsupported bucket URL ${JSON.stringify(url)}`, { hint: HINT });
}

/**
 * The store at a parsed location. An S3 location needs the S3 store's class (`S3Store`), passed in
 * so that this module itself never loads the S3 client.
 */
export function storeAt(
  at: StoreLocation,
  options: OpenStoreOptions & { s3Store?: typeof S3Store },
): ObjectStore {
  if (at.scheme === "file") return new FsStore({ root: at.root, mustExist: true });
  if (!options.s3Store) throw new Error(`storeAt(s3://${at.bucket}) needs the S3Store class`);
  return new options.s3Store({
    bucket: at.bucket,
    region: options.region ?? defaultRegion(),
    retry: options.retry,
  });
}

/**
 * Creates the filesystem bucket a `file://` URL names (idempotent; false when it existed). S3
 * buckets are created by `podmin setup`, so an `s3://` URL is refused with that hint.
 */
export async function createBucket(url: string): Promise<boolean> {
  const at = parseStoreUrl(url); // a malformed URL fails here with the accepted forms
  if (at.scheme === "file") return await createFsBucket(at.root);
  throw new UsageError(`create-bucket makes filesystem buckets only, not ${url}`, {
    hint: "S3 buckets are created by `podmin setup`",
  });
}

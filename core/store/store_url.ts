/**
 * Opens the object store a `--bucket` URL names (`s3://NAME` or `file:///path`) synchronously.
 * Importing this module loads the S3 client: a program that may never talk to S3 (the CLI on a
 * filesystem bucket) opens its store with `parseStoreUrl` and `storeAt` of core/store/bucket_url.ts
 * instead (which own the URL's parsing), importing core/store/s3_store.ts for an s3:// URL only.
 */

import { type OpenStoreOptions, parseStoreUrl, storeAt } from "./bucket_url.ts";
import type { ObjectStore } from "./object_store.ts";
import { S3Store } from "./s3_store.ts";

// Defined in bucket_url.ts (no S3 client there); exported here too for the callers of openStore.
export { createBucket, defaultRegion, type OpenStoreOptions } from "./bucket_url.ts";

/** Parses a store URL and opens the store. */
export function openStore(url: string, options: OpenStoreOptions = {}): ObjectStore {
  return storeAt(parseStoreUrl(url), { ...options, s3Store: S3Store });
}

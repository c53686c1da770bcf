/**
 * The object store interface: the one abstraction over the cluster bucket.
 *
 * Two implementations keep the same contract: `S3Store` (AWS S3 and moto) and
 * `FsStore` (a directory, for local clusters and fast tests). The contract is
 * exercised against both by `tests/store/contract_test.ts`.
 */

import { NotFoundError } from "../kit/errors.ts";

/** Metadata of a stored object. */
export interface ObjectInfo {
  key: string;
  /** Opaque, quoted entity tag; changes whenever the content changes. */
  etag: string;
  size: number;
  contentType?: string;
  lastModified?: Date;
}

/** The result of a conditional GET. */
export type GetResult =
  | { notModified: false; body: Uint8Array; info: ObjectInfo }
  | { notModified: true; etag: string };

/** Options of `put`. At most one of `ifMatch` / `ifNoneMatch` may be set. */
export interface PutOptions {
  /** Write only when the current ETag equals this one (else `PreconditionFailedError`). */
  ifMatch?: string;
  /** `"*"`: write only when the key is absent (else `PreconditionFailedError`). */
  ifNoneMatch?: "*";
  contentType?: string;
}

/** Options of streamed uploads. */
export interface PutStreamOptions {
  /** Lower-case hex SHA-256 the content must have; checked before the object becomes visible. */
  sha256?: string;
  /** Exact byte size the content must have. */
  size?: number;
  contentType?: string;
  /** Called with the cumulative number of bytes consumed. */
  onProgress?: (bytes: number) => void;
}

/** The result of a streamed upload. */
export interface PutStreamResult {
  etag: string;
  sha256: string;
  size: number;
}

/** An inclusive byte range, as in HTTP `Range: bytes=start-end`. */
export interface ByteRange {
  start: number;
  /** Inclusive; defaults to the last byte. */
  end?: number;
}

/** A streamed object body. */
export interface StreamResult {
  info: ObjectInfo;
  /** The body, or the requested range of it. */
  body: ReadableStream<Uint8Array>;
}

/** One cluster bucket. Keys are built by `core/bucket/bucket_layout.ts` only. */
export interface ObjectStore {
  /** A printable location, e.g. `s3://bucket` or `file:///var/lib/podmin`. */
  readonly url: string;

  /**
   * Reads a whole object. With `ifNoneMatch` set to the ETag the caller holds,
   * an unchanged object yields `{ notModified: true }` without a body.
   * Throws `NotFoundError` when absent; with `maxBytes`, `TooLargeError` for a larger object,
   * before its body is read.
   */
  get(key: string, options?: { ifNoneMatch?: string; maxBytes?: number }): Promise<GetResult>;

  /** Metadata only. Throws `NotFoundError` when absent. */
  head(key: string): Promise<ObjectInfo>;

  /** Writes a whole object, optionally conditionally; returns the new ETag. */
  put(key: string, body: Uint8Array, options?: PutOptions): Promise<{ etag: string }>;

  /**
   * Streams a (large) object in; multipart on S3. When `sha256` or `size` is
   * given and does not match, nothing becomes visible and `DigestMismatchError`
   * is thrown.
   */
  putStream(
    key: string,
    body: ReadableStream<Uint8Array>,
    options?: PutStreamOptions,
  ): Promise<PutStreamResult>;

  /** Streams an object (or a range of it) out. Throws `NotFoundError` when absent. */
  getStream(key: string, options?: { range?: ByteRange }): Promise<StreamResult>;

  /**
   * Deletes an object. With `ifMatch`, only while the ETag is still that one.
   * Deleting an absent key succeeds (S3 semantics) unless `ifMatch` is set.
   */
  delete(key: string, options?: { ifMatch?: string }): Promise<void>;

  /** Lists keys under a prefix. Never used on hot paths (teardown, destroy, status). */
  list(prefix: string): AsyncIterable<ObjectInfo>;

  /**
   * A URL through which anyone holding it can GET `key` directly from the store for at most
   * `expiresSeconds` (S3: a SigV4 presigned URL). Stores without one (the filesystem) leave it
   * out, and their objects are served by whoever reads them. Does not check that `key` exists.
   */
  presignGet?(key: string, options: { expiresSeconds: number }): Promise<URL>;
}

/** An object to write: its key, bytes and content type. */
export interface ObjectWrite {
  key: string;
  body: Uint8Array;
  contentType?: string;
}

/** Writes only when the key is absent. */
export function putIfAbsent(store: ObjectStore, write: ObjectWrite): Promise<{ etag: string }> {
  return store.put(write.key, write.body, { ifNoneMatch: "*", contentType: write.contentType });
}

/** Writes only when the key still has ETag `etag`. */
export function putIfMatch(
  store: ObjectStore,
  write: ObjectWrite & { etag: string },
): Promise<{ etag: string }> {
  return store.put(write.key, write.body, { ifMatch: write.etag, contentType: write.contentType });
}

/** Reads a whole object (at most `maxBytes` when given), or `undefined` when it is absent. */
export async function getIfExists(
  store: ObjectStore,
  key: string,
  options: { maxBytes?: number } = {},
): Promise<{ body: Uint8Array; info: ObjectInfo } | undefined> {
  try {
    const res = await store.get(key, options);
    if (res.notModified) throw new Error("unreachable: unconditional get returned not-modified");
    return { body: res.body, info: res.info };
  } catch (err) {
    if (err instanceof NotFoundError) return undefined;
    throw err;
  }
}

/**
 * The object store over AWS S3 (and moto, which speaks the same wire protocol).
 *
 * Conditional writes use S3's `If-Match` / `If-None-Match: *`; large objects
 * are uploaded multipart and verified (sha256, size) before the upload is
 * completed, so a mismatching upload never becomes visible.
 */

import { concatBytes } from "./bytes.ts";
import {
  AbortMultipartUploadCommand,
  CompleteMultipartUploadCommand,
  CreateMultipartUploadCommand,
  DeleteObjectCommand,
  GetObjectCommand,
  HeadObjectCommand,
  ListObjectsV2Command,
  PutObjectCommand,
  S3Client,
  UploadPartCommand,
} from "@aws-sdk/client-s3";
import { FetchHttpHandler } from "@smithy/fetch-http-handler";
import { Sha256Counter } from "./digest.ts";
import { checkSize, TooLargeError } from "./limits.ts";
import {
  DigestMismatchError,
  NotFoundError,
  PermanentStoreError,
  PreconditionFailedError,
  StoreError,
  UnavailableError,
  UsageError,
} from "./errors.ts";
import type {
  ByteRange,
  GetResult,
  ObjectInfo,
  ObjectStore,
  PutOptions,
  PutStreamOptions,
  PutStreamResult,
  StreamResult,
} from "./object_store.ts";
import {
  headBoundedFetch,
  idleBounded,
  isTimeout,
  readAllBounded,
  requestTimeoutMs,
  timeoutError,
} from "./request_bounds.ts";
import { DEFAULT_RETRY, type RetryPolicy, withRetry } from "./retry.ts";

/** Multipart part size; S3's minimum for all but the last part is 5 MiB. */
export const PART_BYTES = 8 * 1024 * 1024;
const PARTS_IN_FLIGHT = 3;

/** Options of `S3Store`. */
export interface S3StoreOptions {
  bucket: string;
  region: string;
  /** Custom endpoint; defaults to `AWS_ENDPOINT_URL`, else AWS's dual-stack endpoint. */
  endpoint?: string;
  retry?: RetryPolicy;
  /**
   * Per-attempt bound in milliseconds, also the idle bound of a streamed body
   * (default: `requestTimeoutMs()`, 30 s unless $PODMIN_REQUEST_TIMEOUT says otherwise).
   */
  requestTimeoutMs?: number;
}

/** Object store over one S3 bucket. */
export class S3Store implements ObjectStore {
  readonly url: string;
  readonly bucket: string;
  readonly client: S3Client;
  readonly #retry: RetryPolicy;
  readonly #timeoutMs: number;
  readonly #endpoint: string;

  constructor(options: S3StoreOptions) {
    this.bucket = options.bucket;
    this.url = `s3://${options.bucket}`;
    this.#retry = options.retry ?? DEFAULT_RETRY;
    const endpoint = options.endpoint ?? Deno.env.get("AWS_ENDPOINT_URL") ?? undefined;
    this.#timeoutMs = options.requestTimeoutMs ?? requestTimeoutMs();
    this.#endpoint = endpoint ?? `S3 (${options.region})`;
    this.client = new S3Client({
      region: options.region,
      endpoint,
      forcePathStyle: endpoint !== undefined,
      useDualstackEndpoint: endpoint === undefined,
      maxAttempts: 1, // retries are ours: bounded, jittered, transient errors only
      // Through `fetch`: the SDK's default Node-compat HTTP client costs several times the CPU of
      // Deno's own client on large bodies (issue 15). The head is bounded here, bodies by
      // `idleBounded` (spec §2.3).
      requestHandler: new FetchHttpHandler({ customFetch: headBoundedFetch(this.#timeoutMs) }),
    });
  }

  async get(
    key: string,
    options: { ifNoneMatch?: string; maxBytes?: number } = {},
  ): Promise<GetResult> {
    checkKey(key);
    return await this.#retrying(key, async () => {
      try {
        const out = await this.client.send(
          new GetObjectCommand({ Bucket: this.bucket, Key: key, IfNoneMatch: options.ifNoneMatch }),
        );
        const stream = out.Body!.transformToWebStream() as ReadableStream<Uint8Array>;
        if (options.maxBytes !== undefined) {
          const what = `${this.url}: ${key}`;
          try {
            checkSize({ what, size: out.ContentLength ?? 0, limit: options.maxBytes });
          } catch (err) {
            await stream.cancel().catch(() => {});
            throw err;
          }
        }
        const body = await readAllBounded(stream, {
          idleMs: this.#timeoutMs,
          onIdle: () => this.#stalled(key),
          maxBytes: options.maxBytes,
          what: `${this.url}: ${key}`,
        });
        return {
          notModified: false as const,
          body,
          info: {
            key,
            etag: out.ETag ?? "",
            size: out.ContentLength ?? body.byteLength,
            contentType: out.ContentType,
            lastModified: out.LastModified,
          },
        };
      } catch (err) {
        if (httpStatus(err) === 304) {
          return { notModified: true as const, etag: options.ifNoneMatch! };
        }
        throw err;
      }
    });
  }

  async head(key: string): Promise<ObjectInfo> {
    checkKey(key);
    return await this.#retrying(key, async () => {
      const out = await this.client.send(new HeadObjectCommand({ Bucket: this.bucket, Key: key }));
      return {
        key,
        etag: out.ETag ?? "",
        size: out.ContentLength ?? 0,
        contentType: out.ContentType,
        lastModified: out.LastModified,
      };
    });
  }

  async put(key: string, body: Uint8Array, options: PutOptions = {}): Promise<{ etag: string }> {
    checkKey(key);
    if (options.ifMatch !== undefined && options.ifNoneMatch !== undefined) {
      throw new UsageError("put: ifMatch and ifNoneMatch are mutually exclusive");
    }
    return await this.#retrying(key, async () => {
      const out = await this.client.send(
        new PutObjectCommand({
          Bucket: this.bucket,
          Key: key,
          Body: body,
          ContentType: options.contentType,
          IfMatch: options.ifMatch,
          IfNoneMatch: options.ifNoneMatch,
        }),
      );
      return { etag: out.ETag ?? "" };
    }).catch((err) => lostRaceOnAbsent(err, key, options.ifMatch));
  }

  async putStream(
    key: string,
    body: ReadableStream<Uint8Array>,
    options: PutStreamOptions = {},
  ): Promise<PutStreamResult> {
    checkKey(key);
    const hash = new Sha256Counter();
    const reader = body.getReader();
    // Read the first part; small objects go up in one PUT.
    const first = await readPart(reader, hash, options);
    if (first.done) {
      verify(hash, options, key);
      const { etag } = await this.put(key, first.data, { contentType: options.contentType });
      return { etag, sha256: hash.hex(), size: hash.bytes };
    }
    const { UploadId } = await this.#retrying(key, () =>
      this.client.send(
        new CreateMultipartUploadCommand({
          Bucket: this.bucket,
          Key: key,
          ContentType: options.contentType,
        }),
      ));
    const uploadId = UploadId!;
    try {
      const parts = await this.#uploadParts({ key, uploadId, reader, hash, first, options });
      verify(hash, options, key);
      parts.sort((a, b) => a.PartNumber - b.PartNumber);
      const out = await this.#retrying(key, () =>
        this.client.send(
          new CompleteMultipartUploadCommand({
            Bucket: this.bucket,
            Key: key,
            UploadId: uploadId,
            MultipartUpload: { Parts: parts },
          }),
        ));
      return { etag: out.ETag ?? "", sha256: hash.hex(), size: hash.bytes };
    } catch (err) {
      await reader.cancel().catch(() => {});
      await this.client.send(
        new AbortMultipartUploadCommand({ Bucket: this.bucket, Key: key, UploadId: uploadId }),
      ).catch(() => {});
      throw err instanceof StoreError ? err : this.#classify(err, key);
    }
  }

  /** Uploads the parts of a multipart upload, a few in flight; all of them or a thrown error. */
  async #uploadParts(
    { key, uploadId, reader, hash, first, options }: {
      key: string;
      uploadId: string;
      reader: ReadableStreamDefaultReader<Uint8Array>;
      hash: Sha256Counter;
      first: { data: Uint8Array; done: boolean };
      options: PutStreamOptions;
    },
  ): Promise<{ ETag: string; PartNumber: number }[]> {
    const parts: { ETag: string; PartNumber: number }[] = [];
    const inFlight = new Set<Promise<void>>();
    let failed: unknown;
    const check = () => {
      if (failed !== undefined) throw failed;
    };
    let next: { data: Uint8Array; done: boolean } = first;
    let partNumber = 1;
    for (;;) {
      const n = partNumber++;
      const data = next.data;
      const p: Promise<void> = this.#retrying(key, () =>
        this.client.send(
          new UploadPartCommand({
            Bucket: this.bucket,
            Key: key,
            UploadId: uploadId,
            PartNumber: n,
            Body: data,
          }),
        )).then((out) => {
          parts.push({ ETag: out.ETag!, PartNumber: n });
        }, (err) => {
          failed ??= err; // a failed part fails the upload, whenever it is noticed
        }).finally(() => inFlight.delete(p));
      inFlight.add(p);
      if (inFlight.size >= PARTS_IN_FLIGHT) await Promise.race(inFlight);
      check();
      if (next.done) break;
      next = await readPart(reader, hash, options);
      check();
      if (next.data.byteLength === 0 && next.done) break;
    }
    await Promise.all(inFlight);
    check();
    if (parts.length !== partNumber - 1) {
      throw new PermanentStoreError(
        `${key}: ${parts.length} of ${partNumber - 1} parts uploaded`,
        { key },
      );
    }
    return parts;
  }

  async getStream(key: string, options: { range?: ByteRange } = {}): Promise<StreamResult> {
    checkKey(key);
    const range = options.range ? `bytes=${options.range.start}-${options.range.end ?? ""}` : "";
    return await this.#retrying(key, async () => {
      const out = await this.client.send(
        new GetObjectCommand({ Bucket: this.bucket, Key: key, Range: range || undefined }),
      );
      const total = out.ContentRange ? Number(out.ContentRange.split("/")[1]) : out.ContentLength;
      return {
        info: {
          key,
          etag: out.ETag ?? "",
          size: total ?? 0,
          contentType: out.ContentType,
          lastModified: out.LastModified,
        },
        body: idleBounded(out.Body!.transformToWebStream() as ReadableStream<Uint8Array>, {
          idleMs: this.#timeoutMs,
          onIdle: () => this.#stalled(key),
        }),
      };
    });
  }

  async delete(key: string, options: { ifMatch?: string } = {}): Promise<void> {
    checkKey(key);
    await this.#retrying(key, async () => {
      await this.client.send(
        new DeleteObjectCommand({ Bucket: this.bucket, Key: key, IfMatch: options.ifMatch }),
      );
    }).catch((err) => lostRaceOnAbsent(err, key, options.ifMatch));
  }

  async *list(prefix: string): AsyncIterable<ObjectInfo> {
    let token: string | undefined;
    do {
      const out = await this.#retrying(prefix, () =>
        this.client.send(
          new ListObjectsV2Command({
            Bucket: this.bucket,
            Prefix: prefix,
            ContinuationToken: token,
          }),
        ));
      for (const o of out.Contents ?? []) {
        yield {
          key: o.Key!,
          etag: o.ETag ?? "",
          size: o.Size ?? 0,
          lastModified: o.LastModified,
        };
      }
      token = out.IsTruncated ? out.NextContinuationToken : undefined;
    } while (token);
  }

  #retrying<T>(key: string, op: () => Promise<T>): Promise<T> {
    return withRetry(async () => {
      try {
        return await op();
      } catch (err) {
        if (err instanceof TooLargeError) throw err; // ours, from a size check: not retried
        throw this.#classify(err, key);
      }
    }, { policy: this.#retry });
  }

  #classify(err: unknown, key: string): StoreError {
    if (isTimeout(err)) {
      return timeoutError({
        endpoint: this.#endpoint,
        timeoutMs: this.#timeoutMs,
        what: `${this.url}: ${key}`,
        key,
        cause: err,
      });
    }
    return classify(err, { key, url: this.url });
  }

  /** The error of a body that stopped delivering bytes. */
  #stalled(key: string): StoreError {
    return new UnavailableError(
      `${this.url}: ${key}: the body from ${this.#endpoint} stalled for ${this.#timeoutMs} ms`,
      { key, hint: "the endpoint stopped sending mid-object; check it and the network" },
    );
  }
}

/**
 * Rejects keys with a "." or ".." segment: `fetch` resolves dot segments of a URL path (even
 * percent-encoded ones), so such a key would address another key, or another bucket with
 * path-style endpoints. The filesystem store rejects them too; bucket keys never have them.
 */
function checkKey(key: string): void {
  if (key.split("/").some((s) => s === "." || s === "..")) {
    throw new UsageError(`invalid object key ${JSON.stringify(key)}`, {
      hint: "keys are built by core/bucket_layout.ts; segments must not be . or ..",
    });
  }
}

/** Reads up to one part of data (PART_BYTES) from the reader. */
async function readPart(
  reader: ReadableStreamDefaultReader<Uint8Array>,
  hash: Sha256Counter,
  options: PutStreamOptions,
): Promise<{ data: Uint8Array; done: boolean }> {
  const chunks: Uint8Array[] = [];
  let size = 0;
  while (size < PART_BYTES) {
    const { value, done } = await reader.read();
    if (done) return { data: concatBytes(chunks, size), done: true };
    chunks.push(value);
    size += value.byteLength;
    hash.update(value);
    options.onProgress?.(hash.bytes);
  }
  return { data: concatBytes(chunks, size), done: false };
}

function verify(hash: Sha256Counter, options: PutStreamOptions, key: string): void {
  if (options.size !== undefined && options.size !== hash.bytes) {
    throw new DigestMismatchError(`${key}: ${hash.bytes} bytes, expected ${options.size}`, {
      key,
    });
  }
  if (options.sha256 !== undefined) {
    const actual = hash.hex();
    if (actual !== options.sha256) {
      throw new DigestMismatchError(`${key}: sha256 ${actual}, expected ${options.sha256}`, {
        key,
      });
    }
  }
}

/**
 * S3 answers If-Match on an absent key with 404; to a conditional writer that
 * is a lost race, so it becomes PreconditionFailedError. Always throws.
 */
function lostRaceOnAbsent(err: unknown, key: string, ifMatch: string | undefined): never {
  if (err instanceof NotFoundError && ifMatch !== undefined) {
    throw new PreconditionFailedError(`${key} does not exist (If-Match ${ifMatch})`, {
      key,
      cause: err,
    });
  }
  throw err;
}

function httpStatus(err: unknown): number | undefined {
  return (err as { $metadata?: { httpStatusCode?: number } })?.$metadata?.httpStatusCode;
}

/** Maps an AWS SDK error to Podmin's typed store errors. */
export function classify(
  err: unknown,
  { key, url }: { key: string; url: string },
): StoreError {
  if (err instanceof StoreError) return err;
  const status = httpStatus(err);
  const name = (err as { name?: string })?.name ?? "";
  const message = err instanceof Error ? err.message : String(err);
  if (status === 404 || name === "NoSuchKey" || name === "NotFound") {
    if (name === "NoSuchBucket") {
      return new PermanentStoreError(`bucket of ${url} does not exist`, {
        key,
        cause: err,
        hint: "check --bucket, or create the cluster with `podmin setup`",
      });
    }
    return new NotFoundError(`${key} not found in ${url}`, { key, cause: err });
  }
  if (status === 409 && name === "OperationAborted") {
    return new UnavailableError(`${url}: conflicting operation in progress on ${key}`, {
      key,
      cause: err,
    });
  }
  if (status === 412 || name === "PreconditionFailed" || name === "ConditionalRequestConflict") {
    return new PreconditionFailedError(`${key}: conditional write lost (${name || status})`, {
      key,
      cause: err,
    });
  }
  if (name === "CredentialsProviderError") {
    return new PermanentStoreError(`no AWS credentials for ${url}: ${message}`, {
      key,
      cause: err,
      hint:
        "set AWS_PROFILE or AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, or run with an instance role",
    });
  }
  if (status === undefined || status >= 500 || status === 429 || name === "SlowDown") {
    return new UnavailableError(`${url} unavailable: ${message}`, {
      key,
      cause: err,
      hint: "the bucket endpoint could not be reached; check network and AWS_ENDPOINT_URL",
    });
  }
  if (status === 403) {
    return new PermanentStoreError(`access denied to ${key} in ${url}`, {
      key,
      cause: err,
      hint: "check the credentials and the IAM policy for this prefix",
    });
  }
  return new PermanentStoreError(`${url}: ${name || status}: ${message}`, { key, cause: err });
}

/**
 * The object store over AWS S3 (and moto, which speaks the same wire protocol).
 *
 * Requests are signed here (core/aws/aws_request.ts) and sent with Deno's `fetch`: the AWS SDK's S3
 * client is not loaded, which keeps the agent within its memory budget (issue 15, spec §2.4).
 * Conditional writes use S3's `If-Match` / `If-None-Match: *`; large objects are uploaded
 * multipart and verified (sha256, size) before the upload is completed, so a mismatching upload
 * never becomes visible.
 */

import { concatBytes } from "../kit/bytes.ts";
import { uriEncode } from "../aws/aws_sigv4.ts";
import { type CredentialSource, NoCredentialsError } from "../aws/aws_credentials.ts";
import {
  AwsRequester,
  AwsResponseError,
  configuredEndpoint,
  responseError,
  xmlElements,
  xmlEscape,
  xmlText,
} from "../aws/aws_request.ts";
import { Sha256Counter } from "../kit/digest.ts";
import { checkSize, TooLargeError } from "../kit/limits.ts";
import {
  DigestMismatchError,
  NotFoundError,
  PermanentStoreError,
  PreconditionFailedError,
  StoreError,
  UnavailableError,
  UsageError,
} from "../kit/errors.ts";
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
  idleBounded,
  isTimeout,
  readAllBounded,
  requestTimeoutMs,
  timeoutError,
} from "../kit/request_bounds.ts";
import { DEFAULT_RETRY, type RetryPolicy, withRetry } from "../kit/retry.ts";

/** The header in which S3 names a bucket's region (HeadBucket, and every region redirect). */
const BUCKET_REGION_HEADER = "x-amz-bucket-region";

/** Multipart part size; S3's minimum for all but the last part is 5 MiB. */
export const PART_BYTES = 8 * 1024 * 1024;
const PARTS_IN_FLIGHT = 3;
/** Largest answer of a multipart call or a list page read into memory. */
const CONTROL_BODY_BYTES = 8 * 1024 * 1024;

/** What a request adds to its method and key: headers, a body, S3 sub-resources (`uploadId`). */
interface RequestParts {
  headers?: Record<string, string>;
  body?: Uint8Array;
  query?: Record<string, string>;
}

/** Options of `S3Store`. */
export interface S3StoreOptions {
  bucket: string;
  region: string;
  /**
   * Custom endpoint (path-style); defaults to `AWS_ENDPOINT_URL_S3`, then `AWS_ENDPOINT_URL`
   * (`configuredEndpoint`), else AWS's dual-stack endpoint.
   */
  endpoint?: string;
  retry?: RetryPolicy;
  /**
   * Per-attempt bound in milliseconds, also the idle bound of a streamed body
   * (default: `requestTimeoutMs()`, 30 s unless $PODMIN_REQUEST_TIMEOUT says otherwise).
   */
  requestTimeoutMs?: number;
  /** Default: the process-wide chain of core/aws/aws_credentials.ts. */
  credentials?: CredentialSource;
}

/** Object store over one S3 bucket. */
export class S3Store implements ObjectStore {
  readonly url: string;
  readonly bucket: string;
  /** The custom endpoint, when there is one (else AWS's own). */
  readonly endpoint?: string;
  readonly #retry: RetryPolicy;
  readonly #timeoutMs: number;
  readonly #credentials?: CredentialSource;
  #region: string;
  #endpointName: string;
  #aws: AwsRequester;
  /** Where keys are appended: `https://bucket.s3.dualstack.region.amazonaws.com/`, or path-style. */
  #base: string;

  constructor(options: S3StoreOptions) {
    this.bucket = options.bucket;
    this.url = `s3://${options.bucket}`;
    this.#retry = options.retry ?? DEFAULT_RETRY;
    this.endpoint = options.endpoint ?? configuredEndpoint("S3");
    this.#timeoutMs = options.requestTimeoutMs ?? requestTimeoutMs();
    this.#credentials = options.credentials;
    this.#region = this.#endpointName = this.#base = "";
    this.#aws = this.#aimAt(options.region);
  }

  /**
   * The bucket's region: the one given, until S3 answered a request with the bucket's own
   * (a region redirect), then that one.
   */
  get region(): string {
    return this.#region;
  }

  /** Signs for `region` and addresses its endpoint from now on. */
  #aimAt(region: string): AwsRequester {
    this.#region = region;
    this.#endpointName = this.endpoint ?? `S3 (${region})`;
    const bucket = uriEncode(this.bucket);
    if (this.endpoint) {
      this.#base = `${this.endpoint.replace(/\/+$/, "")}/${bucket}/`;
    } else if (this.bucket.includes(".")) {
      // A dotted name does not match the endpoint's TLS wildcard as a host name: path-style.
      this.#base = `https://s3.dualstack.${region}.amazonaws.com/${bucket}/`;
    } else {
      this.#base = `https://${bucket}.s3.dualstack.${region}.amazonaws.com/`;
    }
    this.#aws = new AwsRequester({
      region,
      timeoutMs: this.#timeoutMs,
      credentials: this.#credentials,
    });
    return this.#aws;
  }

  /**
   * The bucket's region as S3 reports it (HeadBucket's `x-amz-bucket-region`, following a
   * region redirect): for a bucket outside the cluster's region (`--workload-ca-publish`,
   * `--otel-logs ca=`). A missing bucket throws the store's PermanentStoreError ("does not
   * exist"); a bucket that exists but is not ours to read (403) still answers with its region.
   */
  async locate(): Promise<{ region: string; readable: boolean }> {
    return await this.#retrying("", async () => {
      const r = await this.#send("HEAD", "");
      await r.body?.cancel().catch(() => {});
      const region = r.headers.get(BUCKET_REGION_HEADER) ?? this.#region;
      if (r.ok) return { region, readable: true };
      if (r.status === 403) return { region, readable: false };
      throw new AwsResponseError({
        status: r.status,
        code: r.status === 404 ? "NoSuchBucket" : "",
        message: `HeadBucket ${this.bucket}: HTTP ${r.status}`,
      });
    });
  }

  /** The URL of `key` (path-style on a custom endpoint, else AWS's dual-stack endpoint). */
  objectUrl(key: string): URL {
    return new URL(this.#base + uriEncode(key, true));
  }

  /** Sends one signed request for `key` (query: S3 sub-resources such as `uploadId`). */
  async #send(
    method: string,
    key: string,
    o: RequestParts = {},
    redirected = false,
  ): Promise<Response> {
    const url = this.objectUrl(key);
    for (const [k, v] of Object.entries(o.query ?? {})) url.searchParams.set(k, v);
    const headers: Record<string, string> = {};
    for (const [k, v] of Object.entries(o.headers ?? {})) if (v !== undefined) headers[k] = v;
    const r = await this.#aws.send({ method, url, headers, body: o.body, service: "s3", s3: true });
    // S3's region redirect (a bucket of another region: 301 PermanentRedirect, or 400 for a
    // request signed for the wrong region) names the bucket's region: aim there and send again.
    const region = r.headers.get(BUCKET_REGION_HEADER);
    if (
      !redirected && (r.status === 301 || r.status === 400) && region && region !== this.#region
    ) {
      await r.body?.cancel().catch(() => {});
      this.#aimAt(region);
      return await this.#send(method, key, o, true);
    }
    return r;
  }

  /** Sends, and throws the S3 error of a non-2xx answer. */
  async #ok(
    method: string,
    key: string,
    o: RequestParts = {},
  ): Promise<Response> {
    const r = await this.#send(method, key, o);
    if (!r.ok) throw await responseError(r);
    return r;
  }

  /** The whole (small) body of a control answer; S3 may report an error inside a 200. */
  async #controlBody(r: Response, key: string): Promise<string> {
    const bytes = await readAllBounded(r.body ?? new Blob().stream(), {
      idleMs: this.#timeoutMs,
      onIdle: () => this.#stalled(key),
      maxBytes: CONTROL_BODY_BYTES,
      what: `${this.url}: answer about ${key}`,
    });
    const text = new TextDecoder().decode(bytes);
    if (/<Error>/.test(text)) {
      throw new AwsResponseError({
        status: 500,
        code: xmlText(text, "Code") ?? "InternalError",
        message: xmlText(text, "Message") ?? "an error in a 200 answer",
      });
    }
    return text;
  }

  #info(key: string, r: Response, size?: number): ObjectInfo {
    const modified = r.headers.get("last-modified");
    return {
      key,
      etag: r.headers.get("etag") ?? "",
      size: size ?? Number(r.headers.get("content-length") ?? 0),
      contentType: r.headers.get("content-type") ?? undefined,
      lastModified: modified ? new Date(modified) : undefined,
    };
  }

  async get(
    key: string,
    options: { ifNoneMatch?: string; maxBytes?: number } = {},
  ): Promise<GetResult> {
    checkKey(key);
    return await this.#retrying(key, async () => {
      const r = await this.#send("GET", key, {
        headers: options.ifNoneMatch ? { "if-none-match": options.ifNoneMatch } : {},
      });
      if (r.status === 304) {
        await r.body?.cancel().catch(() => {});
        return { notModified: true as const, etag: options.ifNoneMatch! };
      }
      if (!r.ok) throw await responseError(r);
      const info = this.#info(key, r);
      const stream = r.body ?? new Blob().stream();
      if (options.maxBytes !== undefined) {
        try {
          checkSize({ what: `${this.url}: ${key}`, size: info.size, limit: options.maxBytes });
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
      return { notModified: false as const, body, info: { ...info, size: body.byteLength } };
    });
  }

  async head(key: string): Promise<ObjectInfo> {
    checkKey(key);
    return await this.#retrying(key, async () => {
      const r = await this.#ok("HEAD", key);
      await r.body?.cancel().catch(() => {});
      return this.#info(key, r);
    });
  }

  async put(key: string, body: Uint8Array, options: PutOptions = {}): Promise<{ etag: string }> {
    checkKey(key);
    if (options.ifMatch !== undefined && options.ifNoneMatch !== undefined) {
      throw new UsageError("put: ifMatch and ifNoneMatch are mutually exclusive");
    }
    const headers: Record<string, string> = {};
    if (options.contentType) headers["content-type"] = options.contentType;
    if (options.ifMatch !== undefined) headers["if-match"] = options.ifMatch;
    if (options.ifNoneMatch !== undefined) headers["if-none-match"] = options.ifNoneMatch;
    return await this.#retrying(key, async () => {
      const r = await this.#ok("PUT", key, { headers, body });
      await r.body?.cancel().catch(() => {});
      return { etag: r.headers.get("etag") ?? "" };
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
    const uploadId = await this.#retrying(key, async () => {
      const r = await this.#ok("POST", key, {
        query: { uploads: "" },
        headers: options.contentType ? { "content-type": options.contentType } : {},
      });
      const id = xmlText(await this.#controlBody(r, key), "UploadId");
      if (!id) throw new PermanentStoreError(`${key}: S3 answered no UploadId`, { key });
      return id;
    });
    try {
      const parts = await this.#uploadParts({ key, uploadId, reader, hash, first, options });
      verify(hash, options, key);
      parts.sort((a, b) => a.PartNumber - b.PartNumber);
      const xml = "<CompleteMultipartUpload>" +
        parts.map((p) =>
          `<Part><PartNumber>${p.PartNumber}</PartNumber><ETag>${xmlEscape(p.ETag)}</ETag></Part>`
        ).join("") + "</CompleteMultipartUpload>";
      const etag = await this.#retrying(key, async () => {
        const r = await this.#ok("POST", key, {
          query: { uploadId },
          headers: { "content-type": "application/xml" },
          body: new TextEncoder().encode(xml),
        });
        return xmlText(await this.#controlBody(r, key), "ETag") ?? "";
      });
      return { etag, sha256: hash.hex(), size: hash.bytes };
    } catch (err) {
      await reader.cancel().catch(() => {});
      await this.#send("DELETE", key, { query: { uploadId } })
        .then((r) => r.body?.cancel())
        .catch(() => {});
      throw this.#classify(err, key); // Podmin's own errors pass through unchanged
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
      const p: Promise<void> = this.#retrying(key, async () => {
        const r = await this.#ok("PUT", key, {
          query: { partNumber: String(n), uploadId },
          body: data,
        });
        await r.body?.cancel().catch(() => {});
        const etag = r.headers.get("etag");
        if (!etag) throw new PermanentStoreError(`${key}: part ${n} answered no ETag`, { key });
        return etag;
      }).then((etag) => {
        parts.push({ ETag: etag, PartNumber: n });
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
      const r = await this.#ok("GET", key, { headers: range ? { range } : {} });
      const contentRange = r.headers.get("content-range");
      const total = contentRange ? Number(contentRange.split("/")[1]) : undefined;
      return {
        info: this.#info(key, r, total),
        body: idleBounded(r.body ?? new Blob().stream(), {
          idleMs: this.#timeoutMs,
          onIdle: () => this.#stalled(key),
        }),
      };
    });
  }

  /**
   * A presigned GET of `key` at the store's endpoint (the bucket's regional dual-stack endpoint,
   * or the configured one), signed for the bucket's region with the store's credential chain.
   * Missing credentials are the store's PermanentStoreError.
   */
  async presignGet(key: string, options: { expiresSeconds: number }): Promise<URL> {
    checkKey(key);
    try {
      return await this.#aws.presign({
        method: "GET",
        url: this.objectUrl(key),
        service: "s3",
        expiresSeconds: options.expiresSeconds,
      });
    } catch (err) {
      throw this.#classify(err, key);
    }
  }

  async delete(key: string, options: { ifMatch?: string } = {}): Promise<void> {
    checkKey(key);
    await this.#retrying(key, async () => {
      const r = await this.#ok("DELETE", key, {
        headers: options.ifMatch !== undefined ? { "if-match": options.ifMatch } : {},
      });
      await r.body?.cancel().catch(() => {});
    }).catch((err) => lostRaceOnAbsent(err, key, options.ifMatch));
  }

  async *list(prefix: string): AsyncIterable<ObjectInfo> {
    let token: string | undefined;
    do {
      const query: Record<string, string> = { "list-type": "2", prefix };
      if (token) query["continuation-token"] = token;
      const page = await this.#retrying(prefix, async () => {
        const r = await this.#ok("GET", "", { query });
        return await this.#controlBody(r, prefix);
      });
      for (const item of xmlElements(page, "Contents")) {
        const modified = xmlText(item, "LastModified");
        yield {
          key: xmlText(item, "Key") ?? "",
          etag: xmlText(item, "ETag") ?? "",
          size: Number(xmlText(item, "Size") ?? 0),
          lastModified: modified ? new Date(modified) : undefined,
        };
      }
      token = xmlText(page, "IsTruncated") === "true"
        ? xmlText(page, "NextContinuationToken")
        : undefined;
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
        endpoint: this.#endpointName,
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
      `${this.url}: ${key}: the body from ${this.#endpointName} stalled for ${this.#timeoutMs} ms`,
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
      hint: "keys are built by core/bucket/bucket_layout.ts; segments must not be . or ..",
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

/** Maps an S3 error answer (or a network failure) to Podmin's typed store errors. */
export function classify(
  err: unknown,
  { key, url }: { key: string; url: string },
): StoreError {
  if (err instanceof NoCredentialsError) {
    return new PermanentStoreError(`no AWS credentials for ${url}: ${err.message}`, {
      key,
      cause: err,
      hint: err.hint,
    });
  }
  if (err instanceof StoreError) return err;
  const status = err instanceof AwsResponseError ? err.status : undefined;
  const name = err instanceof AwsResponseError ? err.code : "";
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
  if (status === undefined || status >= 500 || status === 429 || name === "SlowDown") {
    return new UnavailableError(`${url} unavailable: ${message}`, {
      key,
      cause: err,
      hint: "the bucket endpoint could not be reached; check network and AWS_ENDPOINT_URL(_S3)",
    });
  }
  if (status === 403 && name === "RequestTimeTooSkewed") {
    return new PermanentStoreError(`${url}: this machine's clock is too far from S3's`, {
      key,
      cause: err,
      hint: "set the clock right (chrony or systemd-timesyncd); requests are signed with the time",
    });
  }
  if (
    status === 403 &&
    /^(ExpiredToken|InvalidAccessKeyId|SignatureDoesNotMatch|InvalidToken)$/.test(name)
  ) {
    return new PermanentStoreError(`${url}: S3 refused the credentials (${name})`, {
      key,
      cause: err,
      hint: "check AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY / AWS_SESSION_TOKEN or the profile",
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

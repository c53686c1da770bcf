/**
 * A filesystem-backed object store with S3's conditional-write semantics.
 *
 * Layout under the root directory:
 *   objects/  one file per object; key segment `s` of a directory is `s.d`,
 *             the last segment is `s.o`, so `a/b` and `a/b/c` never collide.
 *   .tmp/     files being written; renamed into objects/ only when complete.
 *   .locks/   256 lock files (by key hash) serialising conditional writes.
 *
 * An object file is the body followed by a JSON trailer (etag, size, content
 * type, sha256, time) and 8 bytes: "PDM1" + trailer length (u32 BE). Body and
 * metadata therefore change in one rename: a crash leaves the old or the new
 * object, never a torn one.
 */

import * as path from "node:path";
import { Sha256Counter, sha256Hex } from "../kit/digest.ts";
import {
  DigestMismatchError,
  NotFoundError,
  PermanentStoreError,
  PreconditionFailedError,
  StoreError,
  UsageError,
} from "../kit/errors.ts";
import { checkSize } from "../kit/limits.ts";
import { renameIntoPlace, syncDirectory } from "./atomic_write.ts";
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

const MAGIC = new TextEncoder().encode("PDM1");
const FOOTER_BYTES = 8;
const TEMP_MAX_AGE_MS = 60 * 60 * 1000;

interface Trailer {
  etag: string;
  size: number;
  sha256: string;
  contentType?: string;
  lastModified: string;
}

/**
 * Creates the filesystem bucket at `root` (the one explicit way; `podmin create-bucket`, `podmin
 * local up` and the demo use it). Idempotent; returns false when it existed already.
 */
export async function createFsBucket(root: string): Promise<boolean> {
  const objects = path.join(path.resolve(root), "objects");
  let existed = false;
  try {
    existed = (await Deno.stat(objects)).isDirectory;
  } catch (err) {
    if (!(err instanceof Deno.errors.NotFound)) throw fsError(err);
  }
  for (const d of ["objects", ".tmp", ".locks"]) {
    await Deno.mkdir(path.join(root, d), { recursive: true }).catch((err) => {
      throw fsError(err);
    });
  }
  return !existed;
}

/** Options of `FsStore`. */
export interface FsStoreOptions {
  /** Root directory; created on the first write unless `mustExist`. */
  root: string;
  /**
   * The bucket must have been created (`createFsBucket`): every operation on a missing one
   * fails with "bucket … does not exist", as on S3. `openStore` sets it for operator URLs.
   */
  mustExist?: boolean;
  /** fsync files and directories before a write returns (default true). */
  durable?: boolean;
}

/** Object store over a local directory; safe for concurrent processes on one host. */
export class FsStore implements ObjectStore {
  readonly url: string;
  readonly root: string;
  readonly #durable: boolean;
  readonly #mustExist: boolean;
  #exists = false;
  #ready?: Promise<void>;

  constructor(options: FsStoreOptions) {
    this.root = path.resolve(options.root);
    this.url = `file://${this.root}`;
    this.#durable = options.durable ?? true;
    this.#mustExist = options.mustExist ?? false;
  }

  /** With `mustExist`: throws `PermanentStoreError` when the bucket was never created. */
  async #checkExists(): Promise<void> {
    if (!this.#mustExist || this.#exists) return;
    try {
      this.#exists = (await Deno.stat(path.join(this.root, "objects"))).isDirectory;
    } catch (err) {
      if (!(err instanceof Deno.errors.NotFound || err instanceof Deno.errors.NotADirectory)) {
        throw fsError(err);
      }
    }
    if (!this.#exists) {
      throw new PermanentStoreError(`bucket ${this.url} does not exist`, {
        hint: `check --bucket, or create it with \`podmin --bucket ${this.url} create-bucket\``,
      });
    }
  }

  async get(
    key: string,
    options: { ifNoneMatch?: string; maxBytes?: number } = {},
  ): Promise<GetResult> {
    const file = await this.#open(key);
    try {
      const { trailer, bodySize } = await readTrailer(file, key);
      if (options.ifNoneMatch !== undefined && options.ifNoneMatch === trailer.etag) {
        return { notModified: true, etag: trailer.etag };
      }
      if (options.maxBytes !== undefined) {
        checkSize({ what: `${this.url}: ${key}`, size: bodySize, limit: options.maxBytes });
      }
      const body = new Uint8Array(bodySize);
      await file.seek(0, Deno.SeekMode.Start);
      await readFull(file, body);
      return { notModified: false, body, info: toInfo(key, trailer) };
    } finally {
      file.close();
    }
  }

  async head(key: string): Promise<ObjectInfo> {
    const file = await this.#open(key);
    try {
      return toInfo(key, (await readTrailer(file, key)).trailer);
    } finally {
      file.close();
    }
  }

  async put(key: string, body: Uint8Array, options: PutOptions = {}): Promise<{ etag: string }> {
    if (options.ifMatch !== undefined && options.ifNoneMatch !== undefined) {
      throw new UsageError("put: ifMatch and ifNoneMatch are mutually exclusive");
    }
    const target = this.#objectPath(key);
    const result = await this.#writeTemp(
      ReadableStream.from([body]),
      { contentType: options.contentType },
    );
    try {
      await this.#publish(key, target, result.tempPath, async () => {
        if (options.ifMatch === undefined && options.ifNoneMatch === undefined) return;
        const current = await this.#currentEtag(target, key);
        if (options.ifNoneMatch === "*" && current !== undefined) {
          throw new PreconditionFailedError(`${key} already exists`, { key });
        }
        if (options.ifMatch !== undefined && current !== options.ifMatch) {
          throw new PreconditionFailedError(
            current === undefined
              ? `${key} does not exist (If-Match ${options.ifMatch})`
              : `${key} changed: ETag ${current}, expected ${options.ifMatch}`,
            { key },
          );
        }
      });
    } catch (err) {
      await removeQuietly(result.tempPath);
      throw err;
    }
    return { etag: result.trailer.etag };
  }

  async putStream(
    key: string,
    body: ReadableStream<Uint8Array>,
    options: PutStreamOptions = {},
  ): Promise<PutStreamResult> {
    const target = this.#objectPath(key);
    const result = await this.#writeTemp(body, options);
    try {
      await this.#publish(key, target, result.tempPath, () => Promise.resolve());
    } catch (err) {
      await removeQuietly(result.tempPath);
      throw err;
    }
    const { etag, sha256, size } = result.trailer;
    return { etag, sha256, size };
  }

  async getStream(key: string, options: { range?: ByteRange } = {}): Promise<StreamResult> {
    const file = await this.#open(key);
    let handedOver = false;
    try {
      const { trailer, bodySize } = await readTrailer(file, key);
      const start = options.range?.start ?? 0;
      const end = Math.min(options.range?.end ?? bodySize - 1, bodySize - 1);
      if (options.range && (start < 0 || start >= bodySize || end < start)) {
        throw new PermanentStoreError(`range ${start}-${end} not satisfiable for ${key}`, { key });
      }
      await file.seek(start, Deno.SeekMode.Start);
      let remaining = Math.max(0, end - start + 1);
      // A byte stream reads straight into the reader's buffer: a BYOB reader's own, else one the
      // stream allocates per read; no buffer of ours is allocated and filled, then copied.
      const body: ReadableStream<Uint8Array> = new ReadableStream({
        type: "bytes",
        autoAllocateChunkSize: READ_CHUNK_BYTES,
        async pull(controller: ReadableByteStreamController) {
          const request = controller.byobRequest!;
          if (remaining <= 0) {
            file.close();
            controller.close();
            request.respond(0);
            return;
          }
          const v = request.view!;
          const view = new Uint8Array(v.buffer, v.byteOffset, Math.min(v.byteLength, remaining));
          let n: number | null;
          try {
            n = await file.read(view);
          } catch (err) {
            file.close();
            controller.error(fsError(err, key));
            return;
          }
          if (n === null) {
            file.close();
            controller.error(new PermanentStoreError(`${key}: object file shrank`, { key }));
            return;
          }
          remaining -= n;
          request.respond(n);
        },
        cancel() {
          file.close();
        },
      });
      handedOver = true;
      return { info: toInfo(key, trailer), body };
    } finally {
      if (!handedOver) file.close();
    }
  }

  async delete(key: string, options: { ifMatch?: string } = {}): Promise<void> {
    const target = this.#objectPath(key);
    await this.#withLock(key, async () => {
      if (options.ifMatch !== undefined) {
        const current = await this.#currentEtag(target, key);
        if (current !== options.ifMatch) {
          throw new PreconditionFailedError(
            `${key}: ETag ${current ?? "(absent)"}, expected ${options.ifMatch}`,
            { key },
          );
        }
      }
      // An absent key (even under a prefix that was never written) is deleted already.
      if (await removeQuietly(target) && this.#durable) await syncDirectory(path.dirname(target));
    });
  }

  async *list(prefix: string): AsyncIterable<ObjectInfo> {
    await this.#checkExists();
    // Walk from the deepest directory the prefix names completely.
    const parts = prefix.split("/");
    const dirSegments = parts.slice(0, -1);
    for (const s of dirSegments) checkSegment(s, prefix);
    const start = path.join(this.root, "objects", ...dirSegments.map((s) => `${s}.d`));
    const keys: string[] = [];
    await walk(start, dirSegments, keys);
    keys.sort();
    for (const key of keys) {
      if (!key.startsWith(prefix)) continue;
      try {
        yield await this.head(key);
      } catch (err) {
        if (!(err instanceof NotFoundError)) throw err;
      }
    }
  }

  /** Removes temp files older than an hour, left by writers that crashed. */
  async sweepTemp(maxAgeMs = TEMP_MAX_AGE_MS): Promise<number> {
    let removed = 0;
    const dir = path.join(this.root, ".tmp");
    try {
      for await (const entry of Deno.readDir(dir)) {
        const p = path.join(dir, entry.name);
        const st = await Deno.stat(p);
        if (Date.now() - (st.mtime?.getTime() ?? 0) > maxAgeMs) {
          await removeQuietly(p);
          removed++;
        }
      }
    } catch (err) {
      if (!(err instanceof Deno.errors.NotFound)) throw err;
    }
    return removed;
  }

  #objectPath(key: string): string {
    const segments = key.split("/");
    for (const s of segments) checkSegment(s, key);
    const dirs = segments.slice(0, -1).map((s) => `${s}.d`);
    return path.join(this.root, "objects", ...dirs, `${segments[segments.length - 1]}.o`);
  }

  async #open(key: string): Promise<Deno.FsFile> {
    const p = this.#objectPath(key);
    try {
      return await Deno.open(p, { read: true });
    } catch (err) {
      if (err instanceof Deno.errors.NotFound || err instanceof Deno.errors.NotADirectory) {
        await this.#checkExists(); // a missing bucket is not a missing key
        throw new NotFoundError(`${key} not found in ${this.url}`, { key });
      }
      throw fsError(err, key);
    }
  }

  async #currentEtag(target: string, key: string): Promise<string | undefined> {
    let file: Deno.FsFile;
    try {
      file = await Deno.open(target, { read: true });
    } catch (err) {
      if (err instanceof Deno.errors.NotFound) return undefined;
      throw fsError(err, key);
    }
    try {
      return (await readTrailer(file, key)).trailer.etag;
    } finally {
      file.close();
    }
  }

  async #ensureReady(): Promise<void> {
    await this.#checkExists();
    this.#ready ??= (async () => {
      for (const d of ["objects", ".tmp", ".locks"]) {
        await Deno.mkdir(path.join(this.root, d), { recursive: true });
      }
      await this.sweepTemp();
    })();
    try {
      await this.#ready;
    } catch (err) {
      this.#ready = undefined;
      throw fsError(err);
    }
  }

  /** Streams `body` into a new temp file with its trailer; verifies digest and size. */
  async #writeTemp(
    body: ReadableStream<Uint8Array>,
    options: PutStreamOptions,
  ): Promise<{ tempPath: string; trailer: Trailer }> {
    await this.#ensureReady();
    const tempPath = path.join(this.root, ".tmp", crypto.randomUUID());
    const file = await Deno.open(tempPath, { write: true, createNew: true, mode: 0o644 });
    const hash = new Sha256Counter();
    try {
      for await (const chunk of body) {
        await writeFull(file, chunk);
        hash.update(chunk);
        options.onProgress?.(hash.bytes);
      }
      const sha256 = hash.hex();
      if (options.sha256 !== undefined && options.sha256 !== sha256) {
        throw new DigestMismatchError(
          `content has sha256 ${sha256}, expected ${options.sha256}`,
        );
      }
      if (options.size !== undefined && options.size !== hash.bytes) {
        throw new DigestMismatchError(`content has ${hash.bytes} bytes, expected ${options.size}`);
      }
      const trailer: Trailer = {
        etag: `"${sha256}"`,
        size: hash.bytes,
        sha256,
        contentType: options.contentType,
        lastModified: new Date().toISOString(),
      };
      const json = new TextEncoder().encode(JSON.stringify(trailer));
      const footer = new Uint8Array(FOOTER_BYTES);
      footer.set(MAGIC, 0);
      new DataView(footer.buffer).setUint32(4, json.byteLength);
      await writeFull(file, json);
      await writeFull(file, footer);
      if (this.#durable) await file.sync();
      return { tempPath, trailer };
    } catch (err) {
      file.close();
      await removeQuietly(tempPath);
      throw err instanceof StoreError ? err : fsError(err);
    } finally {
      try {
        file.close();
      } catch { /* already closed */ }
    }
  }

  /** Under the key's lock: runs `check`, then renames the temp file into place. */
  async #publish(
    key: string,
    target: string,
    tempPath: string,
    check: () => Promise<void>,
  ): Promise<void> {
    try {
      await Deno.mkdir(path.dirname(target), { recursive: true });
      await this.#withLock(key, async () => {
        await check();
        await renameIntoPlace(tempPath, target, { durable: this.#durable });
      });
    } catch (err) {
      throw fsError(err, key); // StoreErrors (PreconditionFailed) pass through unchanged
    }
  }

  async #withLock<T>(key: string, fn: () => Promise<T>): Promise<T> {
    await this.#ensureReady();
    const stripe = sha256Hex(key).slice(0, 2);
    const lockFile = await Deno.open(path.join(this.root, ".locks", stripe), {
      read: true,
      write: true,
      create: true,
    });
    try {
      await lockFile.lock(true);
      return await fn();
    } finally {
      lockFile.close(); // closing releases the flock
    }
  }
}

/** Bytes read per chunk of a streamed body. */
const READ_CHUNK_BYTES = 256 * 1024;

/** Rejects segments that could escape the store or alias another key. */
function checkSegment(segment: string, key: string): void {
  if (
    segment === "" || segment === "." || segment === ".." || segment.includes("\0") ||
    new TextEncoder().encode(segment).byteLength > 240
  ) {
    throw new UsageError(`invalid object key ${JSON.stringify(key)}`, {
      hint:
        "keys are built by core/bucket/bucket_layout.ts; segments must be non-empty, not . or ..",
    });
  }
}

async function readTrailer(
  file: Deno.FsFile,
  key: string,
): Promise<{ trailer: Trailer; bodySize: number }> {
  const size = (await file.stat()).size;
  const corrupt = (why: string) =>
    new PermanentStoreError(`${key}: corrupt object file (${why})`, {
      key,
      hint: "the file was changed outside Podmin; delete it and write the object again",
    });
  if (size < FOOTER_BYTES) throw corrupt("too short");
  const footer = new Uint8Array(FOOTER_BYTES);
  await file.seek(size - FOOTER_BYTES, Deno.SeekMode.Start);
  await readFull(file, footer);
  for (let i = 0; i < MAGIC.length; i++) if (footer[i] !== MAGIC[i]) throw corrupt("bad magic");
  const len = new DataView(footer.buffer).getUint32(4);
  if (len > size - FOOTER_BYTES) throw corrupt("bad trailer length");
  const json = new Uint8Array(len);
  await file.seek(size - FOOTER_BYTES - len, Deno.SeekMode.Start);
  await readFull(file, json);
  let trailer: Trailer;
  try {
    trailer = JSON.parse(new TextDecoder().decode(json));
  } catch {
    throw corrupt("bad trailer");
  }
  const bodySize = size - FOOTER_BYTES - len;
  if (trailer.size !== bodySize || typeof trailer.etag !== "string") throw corrupt("size mismatch");
  return { trailer, bodySize };
}

function toInfo(key: string, t: Trailer): ObjectInfo {
  return {
    key,
    etag: t.etag,
    size: t.size,
    contentType: t.contentType,
    lastModified: new Date(t.lastModified),
  };
}

async function walk(dir: string, segments: string[], out: string[]): Promise<void> {
  let entries: Deno.DirEntry[];
  try {
    entries = await Array.fromAsync(Deno.readDir(dir));
  } catch (err) {
    if (err instanceof Deno.errors.NotFound) return;
    throw fsError(err);
  }
  for (const e of entries) {
    if (e.isDirectory && e.name.endsWith(".d")) {
      await walk(path.join(dir, e.name), [...segments, e.name.slice(0, -2)], out);
    } else if (e.isFile && e.name.endsWith(".o")) {
      out.push([...segments, e.name.slice(0, -2)].join("/"));
    }
  }
}

async function readFull(file: Deno.FsFile, buf: Uint8Array): Promise<void> {
  let off = 0;
  while (off < buf.byteLength) {
    const n = await file.read(buf.subarray(off));
    if (n === null) throw new PermanentStoreError("unexpected end of object file");
    off += n;
  }
}

async function writeFull(file: Deno.FsFile, buf: Uint8Array): Promise<void> {
  let off = 0;
  while (off < buf.byteLength) off += await file.write(buf.subarray(off));
}

/** Removes `p`; true when it existed. */
async function removeQuietly(p: string): Promise<boolean> {
  try {
    await Deno.remove(p);
    return true;
  } catch (err) {
    if (!(err instanceof Deno.errors.NotFound)) throw err;
    return false;
  }
}

function fsError(err: unknown, key?: string): StoreError {
  if (err instanceof StoreError) return err;
  const message = err instanceof Error ? err.message : String(err);
  return new PermanentStoreError(`filesystem store: ${message}`, {
    key,
    cause: err,
    hint: "check that the store directory exists and is writable",
  });
}

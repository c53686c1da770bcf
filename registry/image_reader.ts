/**
 * The read side of the image store: resolves tags and digests of `apps/` and
 * `mirror/` repositories from the bucket. A tag costs one GET; objects
 * addressed by digest are immutable and cached (bounded), so a repeated pull
 * makes no extra metadata requests.
 */

import {
  imageBlobKey,
  imageManifestKey,
  type ImageRepository,
  imageTagKey,
} from "../core/bucket/bucket_layout.ts";
import { isDigest, Sha256Counter, sha256Hex } from "../core/kit/digest.ts";
import { DigestMismatchError, ValidationError } from "../core/kit/errors.ts";
import type { ByteRange, ObjectStore } from "../core/store/object_store.ts";
import { parseManifest } from "./manifest.ts";

/** A manifest as served. */
export interface ManifestContent {
  bytes: Uint8Array;
  mediaType: string;
  digest: string;
}

/** Options of `ImageReader`. */
export interface ImageReaderOptions {
  store: ObjectStore;
  /** Upper bound of cached manifest bytes (default 32 MiB). */
  manifestCacheBytes?: number;
  /** Upper bound of cached blob sizes (entries, default 100,000). */
  blobCacheEntries?: number;
}

/** A small LRU map bounded by a weight function. */
class Lru<V> {
  #map = new Map<string, V>();
  #weight = 0;
  constructor(readonly limit: number, readonly weigh: (v: V) => number) {}
  get(k: string): V | undefined {
    const v = this.#map.get(k);
    if (v !== undefined) {
      this.#map.delete(k);
      this.#map.set(k, v);
    }
    return v;
  }
  set(k: string, v: V): void {
    const w = this.weigh(v);
    if (w > this.limit) return;
    const old = this.#map.get(k);
    if (old !== undefined) {
      this.#weight -= this.weigh(old);
      this.#map.delete(k);
    }
    this.#map.set(k, v);
    this.#weight += w;
    for (const [key, val] of this.#map) {
      if (this.#weight <= this.limit) break;
      this.#map.delete(key);
      this.#weight -= this.weigh(val);
    }
  }
}

/** Reads images from the bucket for the registry server. */
export class ImageReader {
  readonly #store: ObjectStore;
  readonly #manifests: Lru<ManifestContent>;
  readonly #blobSizes: Lru<number>;

  constructor(options: ImageReaderOptions) {
    this.#store = options.store;
    this.#manifests = new Lru(
      options.manifestCacheBytes ?? 32 * 1024 * 1024,
      (m) => m.bytes.byteLength + 200,
    );
    this.#blobSizes = new Lru(options.blobCacheEntries ?? 100_000, () => 1);
  }

  /** Resolves a tag or digest reference to the manifest bytes. Throws NotFoundError. */
  async manifest(repo: ImageRepository, reference: string): Promise<ManifestContent> {
    if (isDigest(reference)) {
      const cacheKey = `${imageManifestKey(repo, reference.slice(7))}`;
      const cached = this.#manifests.get(cacheKey);
      if (cached) return cached;
      const got = await this.#store.get(cacheKey);
      if (got.notModified) throw new Error("unreachable");
      const content = this.#verify(got.body, got.info.contentType, reference);
      this.#manifests.set(cacheKey, content);
      return content;
    }
    // A tag is mutable: always one GET, which returns the manifest bytes themselves.
    const got = await this.#store.get(imageTagKey(repo, reference));
    if (got.notModified) throw new Error("unreachable");
    return this.#verify(got.body, got.info.contentType);
  }

  #verify(bytes: Uint8Array, contentType: string | undefined, digest?: string): ManifestContent {
    const actual = `sha256:${sha256Hex(bytes)}`;
    if (digest && actual !== digest) {
      throw new ValidationError(`stored manifest ${digest} has digest ${actual}`);
    }
    const parsed = parseManifest(bytes, contentType);
    return { bytes, mediaType: parsed.mediaType, digest: actual };
  }

  /** The size of a blob (HEAD once, then cached: blobs are immutable). */
  async blobSize(root: "apps" | "mirror", digest: string): Promise<number> {
    const key = imageBlobKey(root, digest.slice(7));
    const cached = this.#blobSizes.get(key);
    if (cached !== undefined) return cached;
    const info = await this.#store.head(key);
    this.#blobSizes.set(key, info.size);
    return info.size;
  }

  /**
   * Where a client may fetch a blob of at least `minBytes` straight from the store: a presigned
   * URL of its exact key (`ObjectStore.presignGet`), valid for `expiresSeconds`. Undefined when
   * the store has no such URLs (the filesystem) or the blob is smaller (it is served directly,
   * verified). The object is HEADed first, every time: a missing blob throws NotFoundError (the
   * client gets BLOB_UNKNOWN, not a redirect to a 404) and an unreachable store or refused
   * credentials throw the store's error. Only a size already known to be below `minBytes` skips
   * the HEAD (the GET that serves it then finds out).
   */
  async blobRedirect(
    root: "apps" | "mirror",
    digest: string,
    options: { minBytes: number; expiresSeconds: number },
  ): Promise<{ url: URL; key: string; size: number } | undefined> {
    const presign = this.#store.presignGet?.bind(this.#store);
    if (!presign) return undefined;
    const key = imageBlobKey(root, digest.slice(7));
    const known = this.#blobSizes.get(key);
    if (known !== undefined && known < options.minBytes) return undefined;
    const { size } = await this.#store.head(key);
    this.#blobSizes.set(key, size);
    if (size < options.minBytes) return undefined;
    return { url: await presign(key, { expiresSeconds: options.expiresSeconds }), key, size };
  }

  /**
   * Streams a blob or a range of it (one GET, no HEAD). A whole blob is verified against its
   * digest while it streams: its last chunk is held back until the digest matches, so stored
   * bytes that are truncated or altered end the stream with an error and are never delivered as
   * a complete blob. (A range cannot be verified; the client checks the assembled blob.)
   */
  async blob(
    root: "apps" | "mirror",
    digest: string,
    range?: ByteRange,
  ): Promise<{ body: ReadableStream<Uint8Array>; size: number }> {
    const key = imageBlobKey(root, digest.slice(7));
    const { info, body } = await this.#store.getStream(key, { range });
    this.#blobSizes.set(key, info.size);
    return { body: range ? body : body.pipeThrough(verifying(digest, key)), size: info.size };
  }
}

/**
 * Passes a stream through, holding back its last chunk until the whole has `digest` (`key` names
 * the object in the error). Also the benchmarks' runtime floor (tests/bench/deno_passthrough.ts).
 */
export function verifying(digest: string, key: string): TransformStream<Uint8Array, Uint8Array> {
  const hash = new Sha256Counter();
  let held: Uint8Array | undefined;
  return new TransformStream({
    transform(chunk, controller) {
      if (held) controller.enqueue(held);
      hash.update(chunk);
      held = chunk;
    },
    flush(controller) {
      const actual = `sha256:${hash.hex()}`;
      if (actual !== digest) {
        throw new DigestMismatchError(
          `stored blob ${key} has digest ${actual} (${hash.bytes} bytes), not ${digest}`,
          { key },
        );
      }
      if (held) controller.enqueue(held);
    },
  });
}

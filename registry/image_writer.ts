/**
 * Writes images into the bucket (`podmin push`, `podmin mirror`). Order makes
 * every step safe to interrupt and re-run: blobs absent from the bucket
 * (HEAD first) are streamed in with their digest verified; child manifests
 * next, then the root manifest, and the tag last.
 */

import {
  imageBlobKey,
  imageManifestKey,
  type ImageRepository,
  imageTagKey,
} from "../core/bucket/bucket_layout.ts";
import { sha256Hex } from "../core/kit/digest.ts";
import { NotFoundError, ValidationError } from "../core/kit/errors.ts";
import type { ObjectStore } from "../core/store/object_store.ts";
import { progress } from "../core/kit/progress.ts";
import type { ImageSource, ManifestDoc } from "./image_source.ts";
import { type Descriptor, parseManifest, platformOf } from "./manifest.ts";

/** Options of `writeImage`. */
export interface WriteImageOptions {
  store: ObjectStore;
  source: ImageSource;
  repo: ImageRepository;
  /** Tag to point at the root manifest; none for digest-only copies. */
  tag?: string;
  /** For indexes: the platforms (`os/arch`) whose manifests are copied; all when undefined. */
  platforms?: string[];
  /** Progress and status lines (stderr). */
  log?: (line: string) => void;
}

/** What a write did. */
export interface WriteImageResult {
  digest: string;
  mediaType: string;
  blobsUploaded: number;
  blobsSkipped: number;
  bytesUploaded: number;
  manifests: number;
  /** Platforms copied from an index. */
  platforms: string[];
}

/** Copies one image (manifest or index) from a source into the bucket. */
export async function writeImage(options: WriteImageOptions): Promise<WriteImageResult> {
  const copy = new ImageCopy(options);
  const root = await options.source.root();
  copy.result.digest = await copy.manifest({ doc: root, expected: root.digest, depth: 0 });
  copy.result.mediaType = root.mediaType;
  if (options.tag) {
    await options.store.put(imageTagKey(options.repo, options.tag), root.bytes, {
      contentType: root.mediaType,
    });
  }
  return copy.result;
}

/** One copy in progress: blobs before the manifests that reference them, children first. */
class ImageCopy {
  readonly #options: WriteImageOptions;
  readonly #log: (line: string) => void;
  readonly result: WriteImageResult = {
    digest: "",
    mediaType: "",
    blobsUploaded: 0,
    blobsSkipped: 0,
    bytesUploaded: 0,
    manifests: 0,
    platforms: [],
  };

  constructor(options: WriteImageOptions) {
    this.#options = options;
    this.#log = options.log ?? (() => {});
  }

  /** Copies a manifest (an index: its wanted children first) and returns its digest. */
  async manifest(
    { doc, expected, depth }: { doc: ManifestDoc; expected?: string; depth: number },
  ): Promise<string> {
    const { source } = this.#options;
    if (depth > 2) throw new ValidationError(`${source.name}: indexes nested too deep`);
    const digest = this.#verify(doc, expected);
    const parsed = parseManifest(doc.bytes, doc.mediaType);
    doc.mediaType = parsed.mediaType;
    if (parsed.manifests.length) {
      for (const child of this.#wantedChildren(parsed.manifests)) {
        await this.manifest({
          doc: await source.manifest(child),
          expected: child.digest,
          depth: depth + 1,
        });
        const platform = platformOf(child);
        if (platform) this.result.platforms.push(platform);
      }
    } else {
      for (const blob of parsed.blobs) await this.#putBlob(blob);
    }
    await this.#putManifest(doc, digest);
    return digest;
  }

  #verify(doc: ManifestDoc, expected?: string): string {
    const actual = `sha256:${sha256Hex(doc.bytes)}`;
    if (expected && actual !== expected) {
      throw new ValidationError(
        `${this.#options.source.name}: manifest ${expected} has digest ${actual}`,
      );
    }
    return actual;
  }

  /** The index entries of the wanted platforms (all without `platforms`); none is an error. */
  #wantedChildren(manifests: Descriptor[]): Descriptor[] {
    const { platforms, source } = this.#options;
    const wanted = manifests.filter((m) => {
      const platform = platformOf(m);
      return !platforms ||
        (platform !== undefined && platforms.some((p) => platform.startsWith(p)));
    });
    if (!wanted.length) {
      throw new ValidationError(
        `${source.name}: no manifest for ${platforms?.join(", ")}`,
        {
          hint: `available: ${manifests.map((m) => platformOf(m) ?? "unknown").join(", ")}`,
        },
      );
    }
    return wanted;
  }

  async #putBlob(d: Descriptor): Promise<void> {
    const { store, repo, source } = this.#options;
    const key = imageBlobKey(repo.root, d.digest.slice(7));
    try {
      const info = await store.head(key);
      if (info.size === d.size) {
        this.result.blobsSkipped++;
        return;
      }
    } catch (err) {
      if (!(err instanceof NotFoundError)) throw err;
    }
    const p = progress(`blob ${d.digest.slice(7, 19)}`, d.size, { write: this.#log });
    await store.putStream(key, await source.blob(d), {
      sha256: d.digest.slice(7),
      size: d.size,
      contentType: "application/octet-stream",
      onProgress: (n) => p.update(n),
    });
    p.done();
    this.result.blobsUploaded++;
    this.result.bytesUploaded += d.size;
  }

  async #putManifest(doc: ManifestDoc, digest: string): Promise<void> {
    const { store, repo } = this.#options;
    const key = imageManifestKey(repo, digest.slice(7));
    try {
      await store.head(key);
      return; // immutable and already stored
    } catch (err) {
      if (!(err instanceof NotFoundError)) throw err;
    }
    await store.put(key, doc.bytes, { contentType: doc.mediaType });
    this.result.manifests++;
  }
}

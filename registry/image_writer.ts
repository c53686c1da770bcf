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
} from "../core/bucket_layout.ts";
import { sha256Hex } from "../core/digest.ts";
import { NotFoundError, ValidationError } from "../core/errors.ts";
import type { ObjectStore } from "../core/object_store.ts";
import { progress } from "../core/progress.ts";
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
  const { store, source, repo } = options;
  const log = options.log ?? (() => {});
  const result: WriteImageResult = {
    digest: "",
    mediaType: "",
    blobsUploaded: 0,
    blobsSkipped: 0,
    bytesUploaded: 0,
    manifests: 0,
    platforms: [],
  };

  const verify = (doc: ManifestDoc, expected?: string) => {
    const actual = `sha256:${sha256Hex(doc.bytes)}`;
    if (expected && actual !== expected) {
      throw new ValidationError(`${source.name}: manifest ${expected} has digest ${actual}`);
    }
    return actual;
  };

  const putBlob = async (d: Descriptor) => {
    const key = imageBlobKey(repo.root, d.digest.slice(7));
    try {
      const info = await store.head(key);
      if (info.size === d.size) {
        result.blobsSkipped++;
        return;
      }
    } catch (err) {
      if (!(err instanceof NotFoundError)) throw err;
    }
    const p = progress(`blob ${d.digest.slice(7, 19)}`, d.size, { write: log });
    await store.putStream(key, await source.blob(d), {
      sha256: d.digest.slice(7),
      size: d.size,
      contentType: "application/octet-stream",
      onProgress: (n) => p.update(n),
    });
    p.done();
    result.blobsUploaded++;
    result.bytesUploaded += d.size;
  };

  const putManifest = async (doc: ManifestDoc, digest: string) => {
    const key = imageManifestKey(repo, digest.slice(7));
    try {
      await store.head(key);
      return; // immutable and already stored
    } catch (err) {
      if (!(err instanceof NotFoundError)) throw err;
    }
    await store.put(key, doc.bytes, { contentType: doc.mediaType });
    result.manifests++;
  };

  const copyManifest = async (doc: ManifestDoc, expected?: string, depth = 0): Promise<string> => {
    if (depth > 2) throw new ValidationError(`${source.name}: indexes nested too deep`);
    const digest = verify(doc, expected);
    const parsed = parseManifest(doc.bytes, doc.mediaType);
    doc.mediaType = parsed.mediaType;
    if (parsed.manifests.length) {
      const wanted = parsed.manifests.filter((m) => {
        const platform = platformOf(m);
        return !options.platforms ||
          (platform !== undefined && options.platforms.some((p) => platform.startsWith(p)));
      });
      if (!wanted.length) {
        throw new ValidationError(
          `${source.name}: no manifest for ${options.platforms?.join(", ")}`,
          {
            hint: `available: ${
              parsed.manifests.map((m) => platformOf(m) ?? "unknown").join(", ")
            }`,
          },
        );
      }
      for (const child of wanted) {
        await copyManifest(await source.manifest(child), child.digest, depth + 1);
        const platform = platformOf(child);
        if (platform) result.platforms.push(platform);
      }
    } else {
      for (const blob of parsed.blobs) await putBlob(blob);
    }
    await putManifest(doc, digest);
    return digest;
  };

  const root = await source.root();
  result.digest = await copyManifest(root, root.digest);
  result.mediaType = root.mediaType;
  if (options.tag) {
    await store.put(imageTagKey(repo, options.tag), root.bytes, { contentType: root.mediaType });
  }
  return result;
}

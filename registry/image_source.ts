/**
 * Local image sources in skopeo's transport syntax, as operators know it:
 * `oci:DIR[:REF]`, `oci-archive:FILE[:REF]` and `docker-archive:FILE[:REF]`.
 * Archives are extracted (with traversal checks) into a temp directory.
 */

import * as path from "node:path";
import { isDigest, Sha256Counter, sha256Hex } from "../core/kit/digest.ts";
import { UsageError, ValidationError } from "../core/kit/errors.ts";
import type { Descriptor } from "./manifest.ts";
import { OCI_CONFIG, OCI_LAYER_GZIP, OCI_LAYER_TAR, OCI_MANIFEST } from "./media_types.ts";
import { extractTar, safeJoin } from "./tar_extract.ts";

/** A manifest document: its bytes, media type and digest. */
export interface ManifestDoc {
  bytes: Uint8Array;
  mediaType: string;
  digest: string;
}

/** Where images are copied from. */
export interface ImageSource {
  /** Printable description. */
  readonly name: string;
  /** The image (manifest or index) to copy. */
  root(): Promise<ManifestDoc>;
  /** A manifest referenced by an index. */
  manifest(d: Descriptor): Promise<ManifestDoc>;
  /** Streams a blob. */
  blob(d: Descriptor): Promise<ReadableStream<Uint8Array>>;
  /** Removes temp files. */
  close(): Promise<void>;
}

const REF_ANNOTATION = "org.opencontainers.image.ref.name";

/** An OCI image layout directory. */
class OciLayoutSource implements ImageSource {
  constructor(
    readonly name: string,
    readonly dir: string,
    readonly ref: string | undefined,
    readonly cleanup?: string,
  ) {}

  async root(): Promise<ManifestDoc> {
    let index: { manifests?: Descriptor[] };
    try {
      index = JSON.parse(await Deno.readTextFile(path.join(this.dir, "index.json")));
    } catch (err) {
      throw new UsageError(
        `${this.name}: no readable OCI layout index.json (${(err as Error).message})`,
        {
          hint:
            "oci:DIR must be an OCI image layout directory (skopeo copy … oci:DIR:TAG makes one)",
        },
      );
    }
    const all = index.manifests ?? [];
    const refs = all.map((m) => m.annotations?.[REF_ANNOTATION]).filter(Boolean);
    const chosen = this.ref === undefined
      ? (all.length === 1 ? all[0] : undefined)
      : all.find((m) => m.annotations?.[REF_ANNOTATION] === this.ref);
    if (!chosen) {
      throw new UsageError(
        this.ref === undefined
          ? `${this.name} holds ${all.length} images; name one`
          : `${this.name} has no image named ${JSON.stringify(this.ref)}`,
        { hint: `references in the layout: ${refs.join(", ") || "(none)"}` },
      );
    }
    return await this.manifest(chosen);
  }

  async manifest(d: Descriptor): Promise<ManifestDoc> {
    const bytes = await this.#read(d);
    return { bytes, mediaType: d.mediaType, digest: d.digest };
  }

  async #read(d: Descriptor): Promise<Uint8Array> {
    if (!isDigest(d.digest)) throw new ValidationError(`bad digest ${d.digest}`);
    let bytes: Uint8Array;
    try {
      bytes = await Deno.readFile(path.join(this.dir, "blobs", "sha256", d.digest.slice(7)));
    } catch {
      throw new ValidationError(`${this.name}: ${d.digest} is missing from the layout`);
    }
    if (`sha256:${sha256Hex(bytes)}` !== d.digest) {
      throw new ValidationError(`${this.name}: ${d.digest} is corrupt`);
    }
    return bytes;
  }

  async blob(d: Descriptor): Promise<ReadableStream<Uint8Array>> {
    if (!isDigest(d.digest)) throw new ValidationError(`bad digest ${d.digest}`);
    try {
      return (await Deno.open(path.join(this.dir, "blobs", "sha256", d.digest.slice(7)))).readable;
    } catch {
      throw new ValidationError(`${this.name}: blob ${d.digest} is missing from the layout`);
    }
  }

  async close(): Promise<void> {
    if (this.cleanup) await Deno.remove(this.cleanup, { recursive: true }).catch(() => {});
  }
}

/** A `docker save` archive: manifest.json + config + layer files; an OCI manifest is synthesised. */
class DockerArchiveSource implements ImageSource {
  #files = new Map<string, string>(); // digest -> path
  constructor(readonly name: string, readonly dir: string, readonly ref: string | undefined) {}

  async root(): Promise<ManifestDoc> {
    let entries: { Config: string; RepoTags?: string[]; Layers: string[] }[];
    try {
      entries = JSON.parse(await Deno.readTextFile(path.join(this.dir, "manifest.json")));
    } catch {
      throw new UsageError(`${this.name}: not a docker-archive (no manifest.json)`);
    }
    const entry = this.ref === undefined
      ? (entries.length === 1 ? entries[0] : undefined)
      : entries.find((e) => e.RepoTags?.includes(this.ref!));
    if (!entry) {
      throw new UsageError(`${this.name}: choose one image with docker-archive:FILE:REPO:TAG`, {
        hint: `images: ${entries.flatMap((e) => e.RepoTags ?? []).join(", ") || "(untagged)"}`,
      });
    }
    const describe = async (rel: unknown, mediaType?: string): Promise<Descriptor> => {
      // manifest.json is untrusted: its paths must name regular files inside the archive.
      if (typeof rel !== "string") {
        throw new ValidationError(`${this.name}: manifest.json names a non-string path`);
      }
      const p = safeJoin(this.dir, rel);
      const st = await Deno.lstat(p).catch(() => undefined);
      if (!st?.isFile) {
        throw new ValidationError(
          `${this.name}: ${JSON.stringify(rel)} is not a file of the archive`,
        );
      }
      const head = new Uint8Array(2);
      const file = await Deno.open(p);
      try {
        await file.read(head);
      } finally {
        file.close();
      }
      const { sha256, size } = await hashFile(p);
      const digest = `sha256:${sha256}`;
      this.#files.set(digest, p);
      const type = mediaType ??
        (head[0] === 0x1f && head[1] === 0x8b ? OCI_LAYER_GZIP : OCI_LAYER_TAR);
      return { mediaType: type, digest, size };
    };
    const manifest = {
      schemaVersion: 2,
      mediaType: OCI_MANIFEST,
      config: await describe(entry.Config, OCI_CONFIG),
      layers: await Promise.all(
        (Array.isArray(entry.Layers) ? entry.Layers : [undefined]).map((l) => describe(l)),
      ),
    };
    const bytes = new TextEncoder().encode(JSON.stringify(manifest));
    return { bytes, mediaType: OCI_MANIFEST, digest: `sha256:${sha256Hex(bytes)}` };
  }

  manifest(d: Descriptor): Promise<ManifestDoc> {
    throw new ValidationError(
      `${this.name}: docker-archive images have no index (asked for ${d.digest})`,
    );
  }

  async blob(d: Descriptor): Promise<ReadableStream<Uint8Array>> {
    const p = this.#files.get(d.digest);
    if (!p) throw new ValidationError(`${this.name}: unknown blob ${d.digest}`);
    return (await Deno.open(p)).readable;
  }

  async close(): Promise<void> {
    await Deno.remove(this.dir, { recursive: true }).catch(() => {});
  }
}

async function hashFile(p: string): Promise<{ sha256: string; size: number }> {
  const h = new Sha256Counter();
  for await (const chunk of (await Deno.open(p)).readable) h.update(chunk);
  return { sha256: h.hex(), size: h.bytes };
}

async function extracted(file: string, name: string): Promise<string> {
  const dir = await Deno.makeTempDir({ prefix: "podmin-image-" });
  try {
    await extractTar((await Deno.open(file)).readable, dir);
  } catch (err) {
    await Deno.remove(dir, { recursive: true }).catch(() => {});
    if (err instanceof Deno.errors.NotFound) throw new UsageError(`${name}: file not found`);
    throw err;
  }
  return dir;
}

/** Parses a source in skopeo syntax and opens it. */
export async function openImageSource(spec: string): Promise<ImageSource> {
  const hint = "use oci:DIR[:REF], oci-archive:FILE[:REF] or docker-archive:FILE[:REPO:TAG]";
  const colon = spec.indexOf(":");
  if (colon < 0) throw new UsageError(`unknown image source ${JSON.stringify(spec)}`, { hint });
  const transport = spec.slice(0, colon);
  const rest = spec.slice(colon + 1);
  const split = (s: string) => {
    const i = s.indexOf(":");
    return i < 0 ? [s, undefined] as const : [s.slice(0, i), s.slice(i + 1) || undefined] as const;
  };
  const [location, ref] = split(rest);
  if (!location) {
    throw new UsageError(`image source ${JSON.stringify(spec)} names no path`, { hint });
  }
  switch (transport) {
    case "oci":
      return new OciLayoutSource(spec, location, ref);
    case "oci-archive": {
      const dir = await extracted(location, spec);
      return new OciLayoutSource(spec, dir, ref, dir);
    }
    case "docker-archive":
      return new DockerArchiveSource(spec, await extracted(location, spec), ref);
    default:
      throw new UsageError(`unsupported transport ${JSON.stringify(transport)}`, { hint });
  }
}

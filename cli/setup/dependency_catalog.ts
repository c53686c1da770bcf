/**
 * The catalogue of pinned node dependencies: what `podmin setup` publishes
 * into `dependencies/` for each architecture. Upstream files are pinned by
 * URL, version and sha256 — either a literal `sha256`, or `sha256Url`: the
 * vendor's published checksum file beside the download, read when setup
 * resolves the entry (cli/setup/vendor_checksum.ts) and recorded in the
 * dependency manifest from then on. Podmin's own files (the agent binary, the
 * vmconfig archive) are produced locally and digested when setup runs.
 */

import { UsageError, ValidationError } from "../../core/kit/errors.ts";
import { type Architecture, ARCHITECTURES } from "../../core/bucket/dependency_manifest.ts";
import { KNOWN_DEPENDENCIES } from "../../vmconfig/render_user_data.ts";

/** One pinned file of the catalogue, its digest known. */
export interface CatalogEntry {
  name: string;
  version: string;
  arch: Architecture;
  /** Upstream download URL (https). */
  url: string;
  /** The file's sha256 (64 lower-case hex digits). */
  sha256: string;
  /**
   * The vendor's checksum file the digest is taken from (`<url>.sha256`, `.sha256sum`): its
   * content is `HEX` or `HEX  FILENAME`. A catalogue as written gives `sha256` or this, never
   * both; a resolved entry keeps it to say where its digest came from.
   */
  sha256Url?: string;
  /** Byte size when the pin states it; checked on download. */
  size?: number;
  /**
   * When `url` is an archive holding the pinned file (the Deno runtime in its npm package):
   * the archive's registry `integrity` (`sha512-<base64>`) and the `member` path; `sha256` then
   * pins the extracted member, which is what setup publishes.
   */
  archive?: { integrity: string; member: string };
}

/** A catalogue whose every digest is known. */
export interface Catalog {
  dependencies: CatalogEntry[];
}

/** A catalogue entry as written: `sha256` is absent when `sha256Url` names the vendor's checksum. */
export type CatalogEntrySpec = Omit<CatalogEntry, "sha256"> & { sha256?: string };

/** A catalogue as written (JSON file, `--kubernetes-version`): `{ "dependencies": [...] }`. */
export interface CatalogSpec {
  dependencies: CatalogEntrySpec[];
}

/** True when `text` is an absolute http(s) URL. */
function isHttpUrl(text: unknown): boolean {
  if (typeof text !== "string") return false;
  try {
    const u = new URL(text);
    return u.protocol === "https:" || u.protocol === "http:";
  } catch {
    return false;
  }
}

/** How an entry is pinned: `sha256` (or `sha256Url`, not with an archive), size and archive. */
function checkDigestSource(e: CatalogEntrySpec, at: string): void {
  if (e.sha256 !== undefined && e.sha256Url !== undefined) {
    throw new ValidationError(`${at}: give "sha256" or "sha256Url", not both`, {
      hint: '"sha256Url" takes the digest from the vendor\'s checksum file instead of a literal',
    });
  }
  if (e.sha256Url !== undefined) {
    if (!isHttpUrl(e.sha256Url)) {
      throw new ValidationError(
        `${at}: sha256Url must be the http(s) URL of the vendor's checksum file`,
        {
          hint:
            'e.g. "sha256Url": "https://dl.k8s.io/release/v1.37.2/bin/linux/amd64/kubelet.sha256"',
        },
      );
    }
    if (e.archive !== undefined) {
      throw new ValidationError(
        `${at}: sha256Url cannot be used with archive (sha256 pins the extracted member)`,
      );
    }
  } else if (typeof e.sha256 !== "string" || !/^[0-9a-f]{64}$/.test(e.sha256)) {
    throw new ValidationError(`${at}: sha256 must be 64 hex digits`, {
      hint: 'or "sha256Url": the URL of the vendor\'s published checksum file',
    });
  }
  if (e.size !== undefined && (!Number.isSafeInteger(e.size) || e.size <= 0)) {
    throw new ValidationError(`${at}: bad size`);
  }
  if (e.archive !== undefined) {
    const a = e.archive;
    if (
      a === null || typeof a !== "object" ||
      !/^sha512-[A-Za-z0-9+/]{86}==$/.test(a.integrity ?? "") ||
      typeof a.member !== "string" || !/^[A-Za-z0-9._-]+(\/[A-Za-z0-9._-]+)*$/.test(a.member) ||
      a.member.split("/").some((s) => s === "." || s === "..")
    ) {
      throw new ValidationError(
        `${at}: archive must be {"integrity": "sha512-…", "member": "relative/path"}`,
      );
    }
  }
}

/** Validates a catalogue read from a file or embedded. */
export function parseCatalog(doc: unknown, where = "catalogue"): CatalogSpec {
  const c = doc as CatalogSpec;
  if (c === null || typeof c !== "object" || !Array.isArray(c.dependencies)) {
    throw new ValidationError(`${where}: expected {"dependencies": [...]}`);
  }
  const seen = new Set<string>();
  const dependencies = c.dependencies.map((e, i) => {
    const at = `${where}: dependencies[${i}]`;
    if (e === null || typeof e !== "object") throw new ValidationError(`${at}: not an object`);
    if (!/^[a-z0-9][a-z0-9.-]{0,62}$/.test(e.name)) {
      throw new ValidationError(`${at}: invalid name`);
    }
    if (!KNOWN_DEPENDENCIES.has(e.name)) {
      // A name no VM installs would be uploaded and then never reach a node.
      throw new ValidationError(`${at}: unknown dependency ${JSON.stringify(e.name)}`, {
        hint: `known names: ${[...KNOWN_DEPENDENCIES].sort().join(", ")}`,
      });
    }
    if (typeof e.version !== "string" || !/^[A-Za-z0-9][A-Za-z0-9.+_-]{0,62}$/.test(e.version)) {
      throw new ValidationError(`${at}: invalid version`);
    }
    if (!(ARCHITECTURES as readonly string[]).includes(e.arch)) {
      throw new ValidationError(`${at}: arch must be amd64 or arm64`);
    }
    try {
      new URL(e.url);
    } catch {
      throw new ValidationError(`${at}: invalid url`);
    }
    if (!isHttpUrl(e.url)) throw new ValidationError(`${at}: url must be http(s)`);
    checkDigestSource(e, at);
    const id = `${e.name}/${e.arch}`;
    if (seen.has(id)) throw new ValidationError(`${at}: ${id} listed twice`);
    seen.add(id);
    return {
      name: e.name,
      version: e.version,
      arch: e.arch,
      url: e.url,
      ...(e.sha256Url === undefined ? { sha256: e.sha256 } : { sha256Url: e.sha256Url }),
      size: e.size,
      ...(e.archive
        ? { archive: { integrity: e.archive.integrity, member: e.archive.member } }
        : {}),
    };
  });
  return { dependencies };
}

/** Reads a catalogue JSON file (its `sha256Url` entries still to be resolved). */
export async function readCatalogFile(path: string): Promise<CatalogSpec> {
  let text: string;
  try {
    text = await Deno.readTextFile(path);
  } catch (err) {
    throw new ValidationError(`cannot read catalogue ${path}: ${(err as Error).message}`);
  }
  try {
    return parseCatalog(JSON.parse(text), path);
  } catch (err) {
    if (err instanceof SyntaxError) throw new ValidationError(`${path}: not JSON: ${err.message}`);
    throw err;
  }
}

/**
 * `--otel-logs` ships node logs with Fluent Bit: refuse it, before anything is created, unless the
 * catalogue pins `fluent-bit` for every NodeGroup architecture (no public pin exists to embed).
 */
export function requireFluentBit(catalog: CatalogSpec, arches: readonly Architecture[]): void {
  const missing = arches.filter((arch) =>
    !catalog.dependencies.some((d) => d.name === "fluent-bit" && d.arch === arch)
  );
  if (missing.length === 0) return;
  throw new UsageError(
    `--otel-logs needs Fluent Bit on every node, and the dependency catalogue pins no fluent-bit for ${
      missing.join(", ")
    }`,
    {
      hint:
        'add --dependency-catalog FILE with a "fluent-bit" entry per architecture: the vendor\'s ' +
        ".deb URL (packages.fluentbit.io) and its sha256",
    },
  );
}

/**
 * The catalogue of pinned node dependencies: what `podmin setup` publishes
 * into `dependencies/` for each architecture. Upstream files are pinned by
 * URL, version and sha256; Podmin's own files (the agent binary, the vmconfig
 * archive) are produced locally and digested when setup runs.
 */

import { UsageError, ValidationError } from "../../core/errors.ts";
import { type Architecture, ARCHITECTURES } from "../../core/dependency_manifest.ts";
import { KNOWN_DEPENDENCIES } from "../../vmconfig/render_user_data.ts";

/** One pinned file of the catalogue. */
export interface CatalogEntry {
  name: string;
  version: string;
  arch: Architecture;
  /** Upstream download URL (https). */
  url: string;
  sha256: string;
  /** Byte size when the pin states it; checked on download. */
  size?: number;
  /**
   * When `url` is an archive holding the pinned file (the Deno runtime in its npm package):
   * the archive's registry `integrity` (`sha512-<base64>`) and the `member` path; `sha256` then
   * pins the extracted member, which is what setup publishes.
   */
  archive?: { integrity: string; member: string };
}

/** A catalogue file (JSON): `{ "dependencies": CatalogEntry[] }`. */
export interface Catalog {
  dependencies: CatalogEntry[];
}

/** Validates a catalogue read from a file or embedded. */
export function parseCatalog(doc: unknown, where = "catalogue"): Catalog {
  const c = doc as Catalog;
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
    let url: URL;
    try {
      url = new URL(e.url);
    } catch {
      throw new ValidationError(`${at}: invalid url`);
    }
    if (url.protocol !== "https:" && url.protocol !== "http:") {
      throw new ValidationError(`${at}: url must be http(s)`);
    }
    if (!/^[0-9a-f]{64}$/.test(e.sha256)) {
      throw new ValidationError(`${at}: sha256 must be 64 hex digits`);
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
    const id = `${e.name}/${e.arch}`;
    if (seen.has(id)) throw new ValidationError(`${at}: ${id} listed twice`);
    seen.add(id);
    return {
      name: e.name,
      version: e.version,
      arch: e.arch,
      url: e.url,
      sha256: e.sha256,
      size: e.size,
      ...(e.archive
        ? { archive: { integrity: e.archive.integrity, member: e.archive.member } }
        : {}),
    };
  });
  return { dependencies };
}

/** Reads a catalogue JSON file. */
export async function readCatalogFile(path: string): Promise<Catalog> {
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
export function requireFluentBit(catalog: Catalog, arches: readonly Architecture[]): void {
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

/**
 * Vendor checksum files: the `.sha256` / `.sha256sum` a vendor publishes beside a release file
 * (catalogue entries with `sha256Url`, cli/setup/dependency_catalog.ts). Setup reads one to learn
 * the digest it then verifies the download against; the digest goes into the dependency manifest,
 * and every later setup and every node uses the recorded value.
 *
 * Accepted content: one line `HEX` (dl.k8s.io), or lines `HEX  FILENAME` / `HEX *FILENAME`
 * (sha256sum's format, GitHub releases of cri-tools and containerd), of which exactly one names
 * the downloaded file. HEX is 64 hex digits (either case; recorded lower-case).
 */

import { PodminError } from "../../core/kit/errors.ts";
import type { Catalog, CatalogSpec } from "./dependency_catalog.ts";

/** A vendor checksum file is missing, unreadable or malformed. */
export class VendorChecksumError extends PodminError {}

/** The largest checksum file read (a few lines are expected). */
const MAX_CHECKSUM_BYTES = 64 * 1024;

/** What to do about a bad or absent vendor checksum. */
const CHECKSUM_HINT = "check that the version is published by the vendor (a typo, or a release " +
  "not yet out?), that $PODMIN_RELEASE_MIRROR mirrors the vendor's layout, or pin a literal " +
  '"sha256" in --dependency-catalog';

/** The file name a URL ends with (its last path segment, decoded). */
function baseName(url: string): string {
  const segments = new URL(url).pathname.split("/");
  return decodeURIComponent(segments[segments.length - 1]);
}

/**
 * The digest a checksum file states for `artifactUrl`'s file; a VendorChecksumError naming the
 * checksum URL, what it holds and what was expected when it is malformed.
 */
export function parseChecksumFile(
  o: { text: string; checksumUrl: string; artifactUrl: string; label: string },
): string {
  const file = baseName(o.artifactUrl);
  const shown = JSON.stringify(o.text.length > 200 ? `${o.text.slice(0, 200)}…` : o.text);
  const malformed = (why: string) =>
    new VendorChecksumError(
      `${o.label}: the published checksum ${o.checksumUrl} is malformed: ${why}; it holds ${shown}, ` +
        `expected 64 hex digits, optionally followed by the file name ${file}`,
      { hint: CHECKSUM_HINT },
    );
  const lines = o.text.split(/\r?\n/).map((l) => l.trim()).filter((l) => l !== "");
  if (!lines.length) throw malformed("it is empty");
  const entries = lines.map((line) => {
    const m = /^([0-9a-fA-F]{64})(?:[ \t]+\*?(\S(?:.*\S)?))?$/.exec(line);
    if (!m) throw malformed(`line ${JSON.stringify(line)} is not "HEX" or "HEX  FILENAME"`);
    return { hex: m[1].toLowerCase(), file: m[2]?.replace(/^\.\//, "") };
  });
  if (entries.length === 1 && entries[0].file === undefined) return entries[0].hex;
  const named = entries.filter((e) => e.file !== undefined && e.file.split("/").pop() === file);
  if (entries.some((e) => e.file === undefined)) {
    throw malformed("a bare digest among several lines");
  }
  if (named.length !== 1) {
    throw malformed(
      named.length ? `${file} is listed ${named.length} times` : `no line names ${file}`,
    );
  }
  return named[0].hex;
}

/** Fetches and parses the vendor's checksum of `artifactUrl` from `checksumUrl`. */
export async function fetchVendorChecksum(
  o: { checksumUrl: string; artifactUrl: string; label: string; fetch?: typeof fetch },
): Promise<string> {
  let res: Response;
  try {
    res = await (o.fetch ?? fetch)(o.checksumUrl);
  } catch (err) {
    throw new VendorChecksumError(
      `${o.label}: the published checksum ${o.checksumUrl} could not be fetched: ${
        (err as Error).message
      }`,
      { hint: `check the network; ${CHECKSUM_HINT}`, cause: err },
    );
  }
  if (!res.ok) {
    await res.body?.cancel();
    throw new VendorChecksumError(
      `${o.label}: the published checksum ${o.checksumUrl} answered ${res.status}${
        res.statusText ? ` ${res.statusText}` : ""
      } (expected the sha256 of ${o.artifactUrl})`,
      { hint: CHECKSUM_HINT },
    );
  }
  const bytes = new Uint8Array(await res.arrayBuffer());
  if (bytes.byteLength > MAX_CHECKSUM_BYTES) {
    throw new VendorChecksumError(
      `${o.label}: the published checksum ${o.checksumUrl} is malformed: ${bytes.byteLength} bytes, ` +
        `expected one line "HEX" or "HEX  FILENAME" (at most ${MAX_CHECKSUM_BYTES} bytes)`,
      { hint: CHECKSUM_HINT },
    );
  }
  let text: string;
  try {
    text = new TextDecoder("utf-8", { fatal: true }).decode(bytes);
  } catch {
    throw new VendorChecksumError(
      `${o.label}: the published checksum ${o.checksumUrl} is malformed: not UTF-8 text, ` +
        `expected one line "HEX" or "HEX  FILENAME"`,
      { hint: CHECKSUM_HINT },
    );
  }
  return parseChecksumFile({ ...o, text });
}

/**
 * A catalogue with every `sha256Url` entry's digest read from the vendor (for programs that use
 * a catalogue without a dependency manifest, such as `podmin local`).
 */
export async function resolveCatalog(
  catalog: CatalogSpec,
  o: { fetch?: typeof fetch; log?: (line: string) => void } = {},
): Promise<Catalog> {
  const dependencies = [];
  for (const e of catalog.dependencies) {
    if (e.sha256 !== undefined) {
      dependencies.push({ ...e, sha256: e.sha256 });
      continue;
    }
    const label = `${e.name} ${e.version} ${e.arch}`;
    const sha256 = await fetchVendorChecksum({
      checksumUrl: e.sha256Url!,
      artifactUrl: e.url,
      label,
      fetch: o.fetch,
    });
    o.log?.(`${label}: sha256 ${sha256} from ${e.sha256Url}`);
    dependencies.push({ ...e, sha256 });
  }
  return { dependencies };
}

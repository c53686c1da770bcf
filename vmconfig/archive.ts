/**
 * The vmconfig archive the user-data installs (dependency `vmconfig`): a gzip-compressed ustar
 * archive of the embedded scripts, libraries and systemd units, built deterministically (fixed
 * order, owner root, mtime 0, fixed modes), so equal sources give equal bytes and digests.
 */

import { gzipSync } from "node:zlib";
import { sha256Hex } from "../core/kit/digest.ts";
import { VERSION } from "../core/kit/version.ts";
import { VMCONFIG_ASSETS } from "./assets.ts";

/** A built vmconfig archive. */
export interface VmconfigArchive {
  /** The tar.gz bytes. */
  bytes: Uint8Array;
  /** Lower-case hex sha256 of `bytes`. */
  sha256: string;
  size: number;
  /** The dependency version: the Podmin version and the first 12 hex digits of the digest. */
  version: string;
}

const BLOCK = 512;
const enc = new TextEncoder();

function octal(value: number, width: number): string {
  return value.toString(8).padStart(width - 1, "0") + "\0";
}

function header(name: string, mode: number, size: number, type: "0" | "5"): Uint8Array {
  if (enc.encode(name).length > 100) throw new Error(`archive member name too long: ${name}`);
  const h = new Uint8Array(BLOCK);
  const put = (offset: number, text: string) => h.set(enc.encode(text), offset);
  put(0, name);
  put(100, octal(mode, 8));
  put(108, octal(0, 8)); // uid
  put(116, octal(0, 8)); // gid
  put(124, octal(size, 12));
  put(136, octal(0, 12)); // mtime
  put(148, "        "); // checksum placeholder
  put(156, type);
  put(257, "ustar\0");
  put(263, "00");
  put(265, "root");
  put(297, "root");
  let sum = 0;
  for (const b of h) sum += b;
  put(148, sum.toString(8).padStart(6, "0") + "\0 ");
  return h;
}

/** The tar (uncompressed) of the given files: path -> [mode, content]. */
export function buildTar(files: Array<[string, number, Uint8Array]>): Uint8Array {
  const parts: Uint8Array[] = [];
  const dirs = new Set<string>();
  for (const [name] of files) {
    const segs = name.split("/");
    for (let i = 1; i < segs.length; i++) dirs.add(segs.slice(0, i).join("/") + "/");
  }
  for (const d of [...dirs].sort()) parts.push(header(d, 0o755, 0, "5"));
  for (const [name, mode, data] of [...files].sort((a, b) => a[0] < b[0] ? -1 : 1)) {
    parts.push(header(name, mode, data.length, "0"), data);
    const pad = (BLOCK - (data.length % BLOCK)) % BLOCK;
    if (pad) parts.push(new Uint8Array(pad));
  }
  parts.push(new Uint8Array(BLOCK * 2));
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let off = 0;
  for (const p of parts) {
    out.set(p, off);
    off += p.length;
  }
  return out;
}

/** Builds the vmconfig archive from assets (default: the embedded ones). */
export function buildVmconfigArchive(
  assets: Readonly<Record<string, string>> = VMCONFIG_ASSETS,
): VmconfigArchive {
  const files: Array<[string, number, Uint8Array]> = [];
  for (const [rel, text] of Object.entries(assets)) {
    if (rel === "user-data.sh.tmpl") continue; // rendered by the CLI, not shipped
    files.push([rel, rel.startsWith("bin/") ? 0o755 : 0o644, enc.encode(text)]);
  }
  // gzip with a zero mtime and no file name: deterministic for equal input.
  const bytes = new Uint8Array(gzipSync(buildTar(files), { level: 9 }));
  const sha256 = sha256Hex(bytes);
  return { bytes, sha256, size: bytes.length, version: `${VERSION}-${sha256.slice(0, 12)}` };
}

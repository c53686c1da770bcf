/**
 * Writing a file atomically, decided once for the whole tree: the bytes go to a temporary file in
 * the target's directory, the file is fsynced, renamed over the target, and the directory is
 * fsynced. A reader never sees half a file; after a crash the target holds the old or the new
 * bytes, and (durable) a write that returned is not lost.
 *
 * Durability (`durable`, default true) costs two fsyncs a write. Callers pass `durable: false`
 * only where a lost write is rewritten anyway: the agent's status files and DNS zone are written
 * again on the next pass, so a crash can cost at most a stale copy, never a torn one.
 */

import * as path from "node:path";

/** Options of `writeFileAtomic`. */
export interface AtomicWriteOptions {
  /** Permission bits of the new file (default 0o644; the umask applies). */
  mode?: number;
  /** fsync the file before, and its directory after, the rename (default true). */
  durable?: boolean;
  /** Temporary file's path (default `<dir>/.<name>.<random>.tmp`, beside the target). */
  temp?: string;
}

/** Writes `data` to `file` atomically (temporary file, fsync, rename, directory fsync). */
export async function writeFileAtomic(
  file: string,
  data: Uint8Array | string,
  options: AtomicWriteOptions = {},
): Promise<void> {
  const durable = options.durable ?? true;
  const bytes = typeof data === "string" ? new TextEncoder().encode(data) : data;
  const tmp = options.temp ?? tempPathFor(file);
  const handle = await Deno.open(tmp, {
    write: true,
    create: true,
    truncate: true,
    mode: options.mode ?? 0o644,
  });
  try {
    try {
      let off = 0;
      while (off < bytes.byteLength) off += await handle.write(bytes.subarray(off));
      if (durable) await handle.sync();
    } finally {
      handle.close();
    }
  } catch (err) {
    await Deno.remove(tmp).catch(() => {});
    throw err;
  }
  await renameIntoPlace(tmp, file, { durable });
}

/**
 * The last step of an atomic write, for callers that fill (and fsync) their own temporary file:
 * renames `tmp` over `file`, then (durable, default true) fsyncs `file`'s directory so the
 * rename survives a crash.
 */
export async function renameIntoPlace(
  tmp: string,
  file: string,
  options: { durable?: boolean } = {},
): Promise<void> {
  await Deno.rename(tmp, file);
  if (options.durable ?? true) await syncDirectory(path.dirname(file));
}

/** fsyncs a file that was written by other means (a download, an extracted archive member). */
export async function syncFile(file: string): Promise<void> {
  const f = await Deno.open(file, { read: true, write: true });
  try {
    await f.sync();
  } finally {
    f.close();
  }
}

/** fsyncs a directory, so that the entries created, renamed or removed in it are on disk. */
export async function syncDirectory(dir: string): Promise<void> {
  const d = await Deno.open(dir, { read: true });
  try {
    await d.sync();
  } finally {
    d.close();
  }
}

/** A fresh temporary path beside `file` (same directory, so the rename stays on one filesystem). */
export function tempPathFor(file: string): string {
  return path.join(path.dirname(file), `.${path.basename(file)}.${crypto.randomUUID()}.tmp`);
}

/**
 * Per-Pod value directories on tmpfs, written as immutable generations and
 * swapped atomically, as kubelet's atomic writer does for Secret volumes:
 *
 *   <dir>/..gen-<n>/<key>   the values (0444), never modified once written
 *   <dir>/..data            symlink to the current generation (swapped by rename)
 *   <dir>/<key>             symlink to ..data/<key>
 *
 * A container that mounts <dir> sees either the old or the new set of values.
 *
 * The visible layout (links, files, modes) is verified and repaired on every write, not only the
 * generation's content: a crash between the swap and the links must not hide a key forever.
 * A per-Pod directory that is a symlink (or not a directory) is never followed: it is reported
 * with `UnexpectedEntryError` and left alone.
 */

import * as path from "node:path";
import { PodminError } from "../core/kit/errors.ts";
import type { Logger } from "../core/kit/log.ts";
import { POD_DIR_PATTERN, podDirName } from "./pod_dir.ts";

const GEN_PREFIX = "..gen-";

/** An agent-owned path is a symlink or not a directory: reported, never followed or removed. */
export class UnexpectedEntryError extends PodminError {}

/** Modes of the layout (spec §7.5). */
const DIR_MODE = 0o755;
const FILE_MODE = 0o444;

/**
 * Makes sure `dir` is a real directory (with `create`, creating it when absent; else false when
 * absent) with mode 0755; throws `UnexpectedEntryError` for a symlink or any other kind of entry.
 */
async function ensureRealDir(dir: string, options: { create: boolean }): Promise<boolean> {
  let st: Deno.FileInfo;
  try {
    st = await Deno.lstat(dir);
  } catch (err) {
    if (!(err instanceof Deno.errors.NotFound)) throw err;
    if (!options.create) return false;
    await Deno.mkdir(dir, { mode: DIR_MODE });
    st = await Deno.lstat(dir);
  }
  if (st.isSymlink || !st.isDirectory) {
    throw new UnexpectedEntryError(
      `${dir} is ${st.isSymlink ? "a symlink" : "not a directory"}; the agent leaves it alone`,
      { hint: `remove ${dir} to let the agent recreate its values directory` },
    );
  }
  if ((st.mode! & 0o7777) !== DIR_MODE) await Deno.chmod(dir, DIR_MODE);
  return true;
}

/** Reads the current generation's values, or undefined when there is none. */
export async function readGeneration(dir: string): Promise<Map<string, Uint8Array> | undefined> {
  let target: string;
  try {
    target = await Deno.readLink(path.join(dir, "..data"));
  } catch (err) {
    if (err instanceof Deno.errors.NotFound) return undefined;
    throw err;
  }
  const genDir = path.join(dir, path.basename(target));
  const values = new Map<string, Uint8Array>();
  try {
    for await (const e of Deno.readDir(genDir)) {
      if (e.isFile) values.set(e.name, await Deno.readFile(path.join(genDir, e.name)));
    }
  } catch (err) {
    // A dangling ..data (generation removed by hand or a crash): no usable generation; the next
    // write replaces the link.
    if (err instanceof Deno.errors.NotFound) return undefined;
    throw err;
  }
  return values;
}

function sameValues(a: Map<string, Uint8Array>, b: Map<string, Uint8Array>): boolean {
  if (a.size !== b.size) return false;
  for (const [k, v] of a) {
    const w = b.get(k);
    if (!w || w.byteLength !== v.byteLength || !v.every((x, i) => x === w[i])) return false;
  }
  return true;
}

/**
 * Publishes `values` as a new generation unless they equal the current one.
 * Returns true when a new generation was swapped in.
 */
export async function writeGeneration(
  dir: string,
  values: Map<string, Uint8Array>,
): Promise<boolean> {
  await ensureRealDir(dir, { create: true });
  const current = await readGeneration(dir);
  if (current && sameValues(current, values)) {
    await repairLayout(dir);
    return false;
  }

  const gen = `${GEN_PREFIX}${Date.now()}-${crypto.randomUUID().slice(0, 8)}`;
  const genDir = path.join(dir, gen);
  await Deno.mkdir(genDir, { mode: 0o755 });
  for (const [key, value] of values) {
    await Deno.writeFile(path.join(genDir, key), value, { mode: 0o444 });
  }
  // Swap: a new symlink renamed over ..data is atomic.
  const tmpLink = path.join(dir, "..data.tmp");
  await Deno.remove(tmpLink).catch(() => {});
  await Deno.symlink(gen, tmpLink);
  await Deno.rename(tmpLink, path.join(dir, "..data"));

  await repairLayout(dir);
  return true;
}

/**
 * Verifies and repairs the visible layout of `dir` against its current generation: the
 * generation's modes, one `<key> -> ..data/<key>` link per key, nothing else visible, no older
 * generation. Returns what it repaired (empty when the layout was whole); a directory without a
 * generation is left as it is. Throws `UnexpectedEntryError` when `dir` is a symlink.
 */
export async function repairLayout(dir: string): Promise<string[]> {
  const repaired: string[] = [];
  if (!await ensureRealDir(dir, { create: false })) return repaired;
  let gen: string;
  try {
    gen = path.basename(await Deno.readLink(path.join(dir, "..data")));
  } catch (err) {
    if (err instanceof Deno.errors.NotFound) return repaired;
    throw err;
  }
  const genDir = path.join(dir, gen);
  const keys = new Set<string>();
  try {
    const st = await Deno.lstat(genDir);
    if (!st.isDirectory) return repaired;
    if ((st.mode! & 0o7777) !== DIR_MODE) {
      await Deno.chmod(genDir, DIR_MODE);
      repaired.push(`mode of ${gen}`);
    }
    for await (const e of Deno.readDir(genDir)) {
      if (!e.isFile) continue;
      keys.add(e.name);
      const file = path.join(genDir, e.name);
      if (((await Deno.lstat(file)).mode! & 0o7777) !== FILE_MODE) {
        await Deno.chmod(file, FILE_MODE);
        repaired.push(`mode of ${e.name}`);
      }
    }
  } catch (err) {
    if (err instanceof Deno.errors.NotFound) return repaired; // dangling ..data
    throw err;
  }
  for (const key of keys) {
    const link = path.join(dir, key);
    const want = `..data/${key}`;
    let target: string | undefined;
    try {
      target = await Deno.readLink(link);
    } catch (err) {
      if (err instanceof Deno.errors.NotFound) target = undefined;
      else if (err instanceof Deno.errors.InvalidData) target = ""; // not a link
      else throw err;
    }
    if (target === want) continue;
    if (target !== undefined) await Deno.remove(link, { recursive: true });
    await Deno.symlink(want, link);
    repaired.push(`link ${key}`);
  }
  for await (const e of Deno.readDir(dir)) {
    if (e.name.startsWith("..")) {
      if (e.name.startsWith(GEN_PREFIX) && e.name !== gen) {
        await Deno.remove(path.join(dir, e.name), { recursive: true });
      }
      continue;
    }
    if (!keys.has(e.name)) {
      await Deno.remove(path.join(dir, e.name), { recursive: true });
      repaired.push(`removed ${e.name}`);
    }
  }
  return repaired;
}

/**
 * Creates a per-Pod root (`--secrets-dir`, `--tls-dir`) when absent and enforces its mode (0700)
 * and owner (the agent's user, root on a node) on every call: an existing 0755 directory would
 * expose every Pod's files. Repairs are logged.
 */
export async function ensurePrivateRoot(
  options: { dir: string; what: string; log: Logger },
): Promise<void> {
  const { dir, what, log } = options;
  await Deno.mkdir(dir, { recursive: true, mode: 0o700 });
  const st = await Deno.stat(dir);
  const uid = Deno.uid();
  const gid = Deno.gid();
  if (uid !== null && gid !== null && (st.uid !== uid || st.gid !== gid)) {
    await Deno.chown(dir, uid, gid);
    log.warn(`${what} directory owner repaired`, { dir, uid: st.uid, gid: st.gid });
  }
  if ((st.mode! & 0o7777) !== 0o700) {
    await Deno.chmod(dir, 0o700);
    log.warn(`${what} directory mode repaired`, { dir, mode: (st.mode! & 0o7777).toString(8) });
  }
}

/**
 * Removes the per-Pod directories under `root` of Pods not in `keep` (`namespace/name`); only
 * real directories whose names match the owned pattern are touched.
 */
export async function prunePodDirs(root: string, keep: Set<string>): Promise<void> {
  const wanted = new Set(
    [...keep].map((ref) => podDirName(...(ref.split("/") as [string, string]))),
  );
  let entries: Deno.DirEntry[];
  try {
    entries = await Array.fromAsync(Deno.readDir(root));
  } catch (err) {
    if (err instanceof Deno.errors.NotFound) return;
    throw err;
  }
  for (const e of entries) {
    if (e.isDirectory && POD_DIR_PATTERN.test(e.name) && !wanted.has(e.name)) {
      await Deno.remove(path.join(root, e.name), { recursive: true });
    }
  }
}

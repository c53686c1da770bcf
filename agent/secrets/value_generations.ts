/**
 * Per-Pod value directories on tmpfs, written as immutable generations and
 * swapped atomically, as kubelet's atomic writer does for Secret volumes:
 *
 *   <dir>/..gen-<n>/<key>   the values (0444), never modified once written
 *   <dir>/..data            symlink to the current generation (swapped by rename)
 *   <dir>/<key>             symlink to ..data/<key>
 *
 * A container that mounts <dir> sees either the old or the new set of values.
 */

import * as path from "node:path";

const GEN_PREFIX = "..gen-";

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
  await Deno.mkdir(dir, { recursive: true, mode: 0o755 });
  const current = await readGeneration(dir);
  if (current && sameValues(current, values)) return false;

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

  // Per-key links; remove links of keys that are gone.
  for (const key of values.keys()) {
    const link = path.join(dir, key);
    try {
      await Deno.lstat(link);
    } catch {
      await Deno.symlink(`..data/${key}`, link);
    }
  }
  for await (const e of Deno.readDir(dir)) {
    if (e.name.startsWith("..")) {
      if (e.name.startsWith(GEN_PREFIX) && e.name !== gen) {
        await Deno.remove(path.join(dir, e.name), { recursive: true });
      }
      continue;
    }
    if (!values.has(e.name)) await Deno.remove(path.join(dir, e.name), { recursive: true });
  }
  return true;
}

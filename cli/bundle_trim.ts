/**
 * A build step of the code-split CLI bundle (cli/build.sh): every module `deno bundle` writes
 * imports, for its side effects, the bundler's runtime chunk, which imports `node:module` to give
 * bundled npm code a `require` (about 20 ms of start-up). The modules `podmin --help` loads need
 * none of it, so this drops that side-effect import from the entry and the chunks it imports
 * statically, when none of them imports anything from the runtime chunk. Modules that use it
 * (each command's implementation) import it themselves when they load.
 *
 * Usage: deno run --allow-read --allow-write cli/bundle_trim.ts DIR ENTRY.js
 */

import * as path from "node:path";

/** A relative module a bundle module imports, and whether it only imports it for side effects. */
interface BundleImport {
  file: string;
  sideEffectOnly: boolean;
}

const SIDE_EFFECT_IMPORT = /^import\s*"\.\/([^"/]+\.js)";\n/gm;
const NAMED_IMPORT = /^(?:import|export)\s[^;"]*?\sfrom\s*"\.\/([^"/]+\.js)";/gm;

function importsOf(text: string): BundleImport[] {
  return [
    ...[...text.matchAll(SIDE_EFFECT_IMPORT)].map((m) => ({ file: m[1], sideEffectOnly: true })),
    ...[...text.matchAll(NAMED_IMPORT)].map((m) => ({ file: m[1], sideEffectOnly: false })),
  ];
}

/** The runtime chunk: the one module that imports `node:module` and exports `__require`. */
function isRuntimeChunk(text: string): boolean {
  return /^import\s*\{[^}]*createRequire[^}]*\}\s*from\s*"node:module";$/m.test(text) &&
    /\b__require\b/.test(text);
}

/** What `trimBundle` changed. */
export interface TrimResult {
  /** The bundle's modules, by file name, with the trimmed ones rewritten. */
  files: Map<string, string>;
  /** The modules whose side-effect import of the runtime chunk was dropped. */
  trimmed: string[];
  /** Why nothing was dropped, when nothing was. */
  kept?: string;
}

/**
 * Drops the side-effect import of the runtime chunk from `entry` and every module it imports
 * statically, unless one of them imports a name from that chunk (then nothing changes).
 */
export function trimBundle(files: Map<string, string>, entry: string): TrimResult {
  const runtime = [...files].filter(([, text]) => isRuntimeChunk(text)).map(([name]) => name);
  if (runtime.length !== 1) {
    return { files, trimmed: [], kept: `${runtime.length} runtime chunks` };
  }
  const closure = new Set<string>();
  const stack = [entry];
  while (stack.length) {
    const file = stack.pop()!;
    if (closure.has(file) || file === runtime[0]) continue;
    const text = files.get(file);
    if (text === undefined) return { files, trimmed: [], kept: `${file} is not in the bundle` };
    closure.add(file);
    for (const i of importsOf(text)) {
      if (i.file === runtime[0] && !i.sideEffectOnly) {
        return { files, trimmed: [], kept: `${file} imports from the runtime chunk` };
      }
      stack.push(i.file);
    }
  }
  const out = new Map(files);
  const trimmed: string[] = [];
  for (const file of closure) {
    const text = files.get(file)!;
    const next = text.replace(
      SIDE_EFFECT_IMPORT,
      (line, imported) => imported === runtime[0] ? "" : line,
    );
    if (next !== text) {
      out.set(file, next);
      trimmed.push(file);
    }
  }
  return { files: out, trimmed: trimmed.sort() };
}

if (import.meta.main) {
  const [dir, entry] = Deno.args;
  if (!dir || !entry) {
    console.error("usage: bundle_trim.ts DIR ENTRY.js");
    Deno.exit(2);
  }
  const files = new Map<string, string>();
  for await (const e of Deno.readDir(dir)) {
    if (e.isFile && e.name.endsWith(".js")) {
      files.set(e.name, await Deno.readTextFile(path.join(dir, e.name)));
    }
  }
  const result = trimBundle(files, entry);
  for (const file of result.trimmed) {
    await Deno.writeTextFile(path.join(dir, file), result.files.get(file)!);
  }
  if (result.kept) console.error(`note: the bundle's runtime import was kept: ${result.kept}`);
}

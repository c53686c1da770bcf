/**
 * The bucket layout owns every key: a test fails when product code spells a key prefix of the
 * bucket in a string literal anywhere but core/bucket/bucket_layout.ts.
 */

import assert from "node:assert/strict";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import {
  DEPENDENCY_MANIFEST,
  dependencyBlobKey,
  imageTagKey,
  parseImageTagKey,
  PREFIXES,
} from "./bucket_layout.ts";

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "../..");
const PRODUCT = ["agent", "cli", "core", "registry", "vmconfig", "ffi", "bpf"];
const LAYOUT = "core/bucket/bucket_layout.ts";

/**
 * A string literal that starts with a key prefix the layout owns, or holds one of the image
 * store's key segments. `apps/` and `mirror/` are left out: they are also the registry's
 * repository paths (`apps/demo:1.0`), which Pods and operators type.
 */
const KEY_LITERAL = new RegExp(
  `["'\`](?:${
    Object.values(PREFIXES).filter((p) => p !== PREFIXES.apps && p !== PREFIXES.mirror)
      .map((p) => p.replace("/", "\\/")).join("|")
  })|\\/_(?:tags|blobs|manifests)\\/`,
);

function* productFiles(dir: string): Generator<string> {
  for (const e of Deno.readDirSync(dir)) {
    const p = join(dir, e.name);
    if (e.isDirectory && e.name !== "node_modules") yield* productFiles(p);
    else if (e.isFile && p.endsWith(".ts") && !p.endsWith("_test.ts")) yield p;
  }
}

/** The lines of a file that are code (comment lines and JSDoc dropped). */
function codeLines(text: string): [number, string][] {
  const out: [number, string][] = [];
  let inBlock = false;
  text.split("\n").forEach((line, i) => {
    const t = line.trim();
    if (inBlock) {
      if (t.includes("*/")) inBlock = false;
      return;
    }
    if (t.startsWith("/*")) {
      inBlock = !t.includes("*/");
      return;
    }
    if (t.startsWith("//")) return;
    out.push([i + 1, line.replace(/\s\/\/\s.*$/, "")]);
  });
  return out;
}

Deno.test("bucket layout: no key prefix is spelled outside core/bucket/bucket_layout.ts", () => {
  const found: string[] = [];
  for (const folder of PRODUCT) {
    for (const file of productFiles(join(ROOT, folder))) {
      const rel = relative(ROOT, file);
      if (rel === LAYOUT) continue;
      for (const [n, line] of codeLines(Deno.readTextFileSync(file))) {
        if (KEY_LITERAL.test(line)) found.push(`${rel}:${n}: ${line.trim()}`);
      }
    }
  }
  assert.deepEqual(found, [], "build these keys with core/bucket/bucket_layout.ts");
});

Deno.test("bucket layout: the dependency keys and a tag key parse back", () => {
  assert.equal(DEPENDENCY_MANIFEST, `${PREFIXES.dependencies}manifest.json`);
  assert.match(dependencyBlobKey("a".repeat(64)), /^dependencies\/blobs\/sha256\/a{64}$/);
  const key = imageTagKey({ root: "apps", name: "web/api" }, "1.0");
  assert.deepEqual(parseImageTagKey(key), { repository: "apps/web/api", tag: "1.0" });
  assert.equal(parseImageTagKey("apps/web/_manifests/sha256/x"), undefined);
  assert.equal(parseImageTagKey("apps/web/_tags/../x"), undefined);
});

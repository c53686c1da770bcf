import assert from "node:assert/strict";
import { trimBundle } from "./bundle_trim.ts";

const RUNTIME = `var __create = Object.create;
import { createRequire as __deno_internal_createRequire } from "node:module";
var __require = __deno_internal_createRequire(import.meta.url);
var __esm = (fn, res) => function __init() { return res; };
export {
  __require,
  __esm
};
`;

function bundle(entryImports: string): Map<string, string> {
  return new Map([
    ["chunk-RT.js", RUNTIME],
    ["chunk-KIT.js", `import "./chunk-RT.js";\n// core/kit/cli_kit.ts\nexport const kit = 1;\n`],
    [
      "main.js",
      `import {\n  kit\n} from "./chunk-KIT.js";\n${entryImports}// cli/main.ts\n` +
      `const run = () => import(${JSON.stringify("./run-X.js")});\nexport { kit, run };\n`,
    ],
    [
      "run-X.js",
      `import {\n  __commonJS\n} from "./chunk-RT.js";\nimport "./chunk-KIT.js";\nexport const r = 1;\n`,
    ],
  ]);
}

Deno.test("bundle trim: the entry and its static chunks lose the runtime's side-effect import; lazy modules keep theirs", () => {
  const r = trimBundle(bundle(`import "./chunk-RT.js";\n`), "main.js");
  assert.equal(r.kept, undefined);
  assert.deepEqual(r.trimmed, ["chunk-KIT.js", "main.js"]);
  assert.ok(!r.files.get("main.js")!.includes(`"./chunk-RT.js"`));
  assert.ok(!r.files.get("chunk-KIT.js")!.includes(`"./chunk-RT.js"`));
  assert.ok(r.files.get("main.js")!.includes(`from "./chunk-KIT.js";`), "other imports stay");
  assert.ok(r.files.get("run-X.js")!.includes(`from "./chunk-RT.js";`), "a lazy module keeps it");
});

Deno.test("bundle trim: nothing changes when the entry's static modules use the runtime", () => {
  const files = bundle(`import {\n  __esm\n} from "./chunk-RT.js";\n`);
  const r = trimBundle(files, "main.js");
  assert.deepEqual(r.trimmed, []);
  assert.match(r.kept!, /main\.js imports from the runtime chunk/);
  assert.equal(r.files, files);
});

Deno.test("bundle trim: no runtime chunk, or a missing module, changes nothing", () => {
  const noRuntime = bundle("");
  noRuntime.delete("chunk-RT.js");
  assert.match(trimBundle(noRuntime, "main.js").kept!, /0 runtime chunks/);
  const missing = bundle("");
  missing.delete("chunk-KIT.js");
  assert.match(trimBundle(missing, "main.js").kept!, /chunk-KIT\.js is not in the bundle/);
});

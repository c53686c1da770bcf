/**
 * Architecture test: reads the imports of every TypeScript file of the project and fails on any
 * circular import and on any import that breaks the floors below. The rules are written here
 * once; docs/spec.md and the README describe the same floors in prose.
 *
 * Test code (everything under `tests/` and every `*_test.ts` file) is exempt from the floor rules:
 * a test drives its subject through whatever real peers it needs (a dataplane program test loads
 * the agent's loader, a registry test runs the CLI's writer). Test code still may not form an
 * import cycle, and no product file may import test code (that rule is one of the floors below).
 */
import assert from "node:assert/strict";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const SKIPPED_DIRS = new Set(["node_modules", "dist", ".git"]);

/** A top-level product folder ("floor") and the project folders it must never import. */
interface FloorRule {
  folder: string;
  forbidden: readonly string[];
  why: string;
}

/**
 * The floors, bottom up. Every product folder has a rule; no product file imports `tests/`.
 * Read "forbidden" as "must never import", whatever else the folder may import.
 */
const FLOORS: readonly FloorRule[] = [
  {
    folder: "core/kit",
    forbidden: ["core/model", "core/crypto", "core/aws", "core/store", "core/bucket"],
    why: "core/kit (errors, log, limits, bounds, encodings, the CLI kit) is the floor of core: " +
      "every concern folder above it uses it, so it knows none of them",
  },
  {
    folder: "core/model",
    forbidden: ["core/crypto", "core/aws", "core/store", "core/bucket"],
    why: "core/model (resources, names, Pod security, image references) is plain data and " +
      "validation: it knows no certificate, AWS client, store or bucket object",
  },
  {
    folder: "core/crypto",
    forbidden: ["core/aws", "core/store", "core/bucket"],
    why: "core/crypto (certificates, DER) signs and checks names from the model; it stores nothing",
  },
  {
    folder: "core/aws",
    forbidden: ["core/store", "core/bucket"],
    why: "core/aws (credentials, request signing) is the client plumbing under the S3 store: it " +
      "knows no store and no bucket object",
  },
  {
    folder: "core/store",
    forbidden: ["core/bucket"],
    why: "core/store (the object store, S3 and filesystem backends, store URLs) moves bytes by " +
      "key: what the keys mean is core/bucket's, above it",
  },
  {
    folder: "core/bucket",
    forbidden: [],
    why: "core/bucket (layout, indexes, leases, records) is the top of core: the bucket model " +
      "every program shares",
  },
  {
    folder: "core",
    forbidden: ["ffi", "bpf", "registry", "vmconfig", "agent", "cli"],
    why: "core is the ground floor (bucket objects, schemas, object store) that every other " +
      "folder imports: it imports nothing of the project above it, or a change anywhere would " +
      "ripple into everything",
  },
  {
    folder: "ffi",
    forbidden: ["bpf", "registry", "vmconfig", "agent", "cli"],
    why: "ffi is a thin typed binding to libbpf and imports only core: it knows nothing of the " +
      "dataplane's meaning, so the agent's dataplane changes without touching it",
  },
  {
    folder: "bpf",
    forbidden: ["ffi", "registry", "vmconfig", "agent", "cli"],
    why: "bpf holds the C program and its embedded object, built and loaded by others: it " +
      "depends on nothing above core, least of all on its loader",
  },
  {
    folder: "registry",
    forbidden: ["cli", "agent"],
    why: "the registry server runs inside the agent and its writer inside the CLI: importing " +
      "either program would drag it into the other",
  },
  {
    folder: "vmconfig",
    forbidden: ["registry", "agent", "cli"],
    why: "vmconfig renders a VM's bootstrap from plain settings and is embedded by the CLI: it " +
      "needs no program, and image references are a core concept",
  },
  {
    folder: "agent",
    forbidden: ["cli"],
    why: "the agent runs on every VM and ships without the operator's CLI; what both need " +
      "(bucket objects) lives in core",
  },
  {
    folder: "cli",
    forbidden: ["agent"],
    why: "the CLI runs on the operator's machine and ships without the agent; what both need " +
      "(bucket objects, image references) lives in core",
  },
];

/** True for test code, which is exempt from the floor rules (see the module comment). */
function isTestCode(path: string): boolean {
  return path.startsWith("tests/") || path.endsWith("_test.ts");
}

async function projectFiles(dir = ROOT): Promise<string[]> {
  const out: string[] = [];
  for await (const entry of Deno.readDir(dir)) {
    const path = join(dir, entry.name);
    if (entry.isDirectory && !SKIPPED_DIRS.has(entry.name)) out.push(...await projectFiles(path));
    else if (entry.isFile && entry.name.endsWith(".ts")) out.push(relative(ROOT, path));
  }
  return out.sort();
}

/** Static `import`/`export … from`, side-effect imports and literal dynamic `import()`. */
const IMPORT_PATTERNS = [
  /^\s*(?:import|export)\s[^;]*?\sfrom\s*["']([^"']+)["']/gm,
  /^\s*import\s*["']([^"']+)["']/gm,
  /\bimport\(\s*["']([^"']+)["']\s*\)/g,
];

/** Project files (repository-relative) a file imports; package and `node:` imports are left out. */
function projectImports(path: string, text: string): string[] {
  const code = text.replace(/\/\*[\s\S]*?\*\//g, "").replace(/^\s*\/\/.*$/gm, "");
  const found = new Set<string>();
  for (const pattern of IMPORT_PATTERNS) {
    for (const match of code.matchAll(pattern)) {
      const specifier = match[1];
      if (!specifier.startsWith(".")) continue;
      found.add(relative(ROOT, resolve(ROOT, dirname(path), specifier)));
    }
  }
  return [...found].sort();
}

async function importGraph(): Promise<Map<string, string[]>> {
  const graph = new Map<string, string[]>();
  for (const path of await projectFiles()) {
    graph.set(path, projectImports(path, await Deno.readTextFile(join(ROOT, path))));
  }
  return graph;
}

/** True when `path` is `folder` or lies inside it. */
function inFolder(path: string, folder: string): boolean {
  return path === folder || path.startsWith(`${folder}/`);
}

/** The rule of the innermost folder with a rule that holds `path`, if any. */
function ruleOf(path: string): FloorRule | undefined {
  return FLOORS.filter((rule) => inFolder(path, rule.folder))
    .sort((a, b) => b.folder.length - a.folder.length)[0];
}

function floorBreaches(graph: Map<string, string[]>): string[] {
  const breaches: string[] = [];
  for (const [from, imports] of graph) {
    if (isTestCode(from)) continue;
    const rule = ruleOf(from);
    if (!rule) continue; // a folder without a rule fails its own test above
    // A folder's rule binds its subfolders too (core/kit may not import agent either).
    const forbidden = FLOORS.filter((outer) => inFolder(from, outer.folder))
      .flatMap((outer) => outer.forbidden);
    for (const to of imports) {
      if (isTestCode(to)) breaches.push(`${from} imports ${to}: product code never imports tests`);
      else if (forbidden.some((folder) => inFolder(to, folder))) {
        breaches.push(`${from} imports ${to}: ${rule.why}`);
      }
    }
  }
  return breaches;
}

/** Every import cycle, each once, as the list of files around it. */
function importCycles(graph: Map<string, string[]>): string[][] {
  const cycles: string[][] = [];
  const state = new Map<string, "open" | "done">();
  const stack: string[] = [];
  const visit = (node: string): void => {
    state.set(node, "open");
    stack.push(node);
    for (const next of graph.get(node) ?? []) {
      if (state.get(next) === "open") cycles.push([...stack.slice(stack.indexOf(next)), next]);
      else if (!state.has(next)) visit(next);
    }
    stack.pop();
    state.set(node, "done");
  };
  for (const node of graph.keys()) if (!state.has(node)) visit(node);
  return cycles;
}

Deno.test("architecture: every import resolves to a project file", async () => {
  const graph = await importGraph();
  const missing = [...graph].flatMap(([from, imports]) =>
    imports.filter((to) => !graph.has(to) && !to.endsWith(".json")).map((to) => `${from} -> ${to}`)
  );
  assert.deepEqual(missing, [], "imports of files that do not exist");
});

Deno.test("architecture: every product folder has a floor rule", async () => {
  const folders = new Set(
    [...(await importGraph()).keys()].filter((p) => p.includes("/") && !isTestCode(p))
      .map((p) => p.split("/")[0]),
  );
  const unruled = [...folders].filter((f) => !FLOORS.some((rule) => rule.folder === f));
  assert.deepEqual(unruled, [], "product folders without a rule in tests/architecture_test.ts");
});

Deno.test("architecture: every core file lives in a concern folder", async () => {
  const loose = [...(await importGraph()).keys()].filter((p) => /^core\/[^/]+$/.test(p));
  assert.deepEqual(loose, [], "core files outside core/kit, model, crypto, aws, store, bucket");
});

Deno.test("architecture: no import breaks the floors", async () => {
  const breaches = floorBreaches(await importGraph());
  assert.deepEqual(breaches, [], `imports breaking the floors:\n${breaches.join("\n")}`);
});

Deno.test("architecture: no circular import", async () => {
  const cycles = importCycles(await importGraph()).map((cycle) => cycle.join(" -> "));
  assert.deepEqual(cycles, [], `circular imports:\n${cycles.join("\n")}`);
});

/** The run wiring: `podmin-agent run` composing the parts; the program registers it. */
const RUN_WIRING = ["agent/run_command.ts", "agent/run_flags.ts", "agent/run_parts.ts"];

Deno.test("architecture: agent features never import the run wiring", async () => {
  const graph = await importGraph();
  const breaches = [...graph].filter(([from]) =>
    inFolder(from, "agent") && !isTestCode(from) && !RUN_WIRING.includes(from) &&
    from !== "agent/program.ts"
  ).flatMap(([from, imports]) =>
    imports.filter((to) => RUN_WIRING.includes(to)).map((to) => `${from} imports ${to}`)
  );
  assert.deepEqual(breaches, [], "a part owns its flags and defaults; the wiring only composes");
});

Deno.test("architecture: `new Loop` only inside the agent's feature folders", async () => {
  const outside: string[] = [];
  for (const path of await projectFiles()) {
    if (!inFolder(path, "agent") || isTestCode(path)) continue;
    const code = (await Deno.readTextFile(join(ROOT, path)))
      .replace(/\/\*[\s\S]*?\*\//g, "").replace(/^\s*\/\/.*$/gm, "");
    const inFeature = /^agent\/[^/]+\//.test(path);
    if (/\bnew Loop\b/.test(code) && !inFeature) outside.push(path);
  }
  assert.deepEqual(outside, [], "loops belong to the parts of feature folders, not the wiring");
});

/** The agent's programs and commands: the top floor of `agent/`, the only files that compose. */
const AGENT_COMMANDS = [
  "agent/main.ts",
  "agent/program.ts",
  ...RUN_WIRING,
  "agent/status_command.ts",
];

/** The feature folder (`agent/<feature>`) a file lies in, if any. */
function agentFeature(path: string): string | undefined {
  return /^agent\/[^/]+\//.test(path) ? path.split("/").slice(0, 2).join("/") : undefined;
}

Deno.test("architecture: the agent's shared modules never import a feature folder", async () => {
  const breaches = [...await importGraph()].filter(([from]) =>
    /^agent\/[^/]+$/.test(from) && !isTestCode(from) && !AGENT_COMMANDS.includes(from)
  ).flatMap(([from, imports]) =>
    imports.filter((to) => agentFeature(to) !== undefined).map((to) => `${from} imports ${to}`)
  );
  assert.deepEqual(
    breaches,
    [],
    "agent/*.ts below the commands (loop, part, hub events, status files, notifiers) is the floor " +
      "every feature stands on: it knows no feature",
  );
});

Deno.test("architecture: no two agent feature folders import each other", async () => {
  const edges = new Set<string>();
  for (const [from, imports] of await importGraph()) {
    const a = agentFeature(from);
    if (!a || isTestCode(from)) continue;
    for (const to of imports) {
      const b = agentFeature(to);
      if (b && b !== a) edges.add(`${a} -> ${b}`);
    }
  }
  const mutual = [...edges].filter((e) => {
    const [a, b] = e.split(" -> ");
    return a < b && edges.has(`${b} -> ${a}`);
  });
  assert.deepEqual(mutual, [], "feature folders stand on floors: one of each pair is below");
});

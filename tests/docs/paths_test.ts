/**
 * Every repository path the documentation names exists: in the comments of product and test code
 * (`.ts`, `.sh`, `.h`, `.c`), in `docs/*.md` and in the READMEs. A dead path in a
 * comment or the spec sends a newcomer looking for a file that moved (issue 34, item 5).
 *
 * What counts as a repository path (`repositoryPaths`): a word starting with one of the top-level
 * folders (`TOP_LEVEL`) followed by `/`, not preceded by a path or word character (so
 * `/usr/local/bin/…`, `../core/…` and URLs are not taken), and ending in a file extension or a
 * trailing slash (a bare `core/bucket` in prose is a word, not a claim). A mention with a
 * placeholder is a pattern and must match at least one existing path: `<name>` and `*` stand for
 * one path segment or part of one, `{a,b}` for alternatives, `…` for the rest of the segment. A
 * path git ignores (`.gitignore`: outputs such as `bench/results.json`) is not looked for.
 */

import assert from "node:assert/strict";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "../..");
const SKIPPED_DIRS = new Set(["node_modules", "dist", ".git", ".cache"]);

/** The top-level folders a repository path starts with. */
export const TOP_LEVEL = [
  "agent",
  "cli",
  "core",
  "registry",
  "bpf",
  "ffi",
  "vmconfig",
  "tests",
  "docs",
  "bench",
] as const;

const PATH_RE = new RegExp(
  String.raw`(?<![\w./\-<>*{}$~])(?:${TOP_LEVEL.join("|")})/[\w./\-<>*{},…]*`,
  "g",
);

/** A mention found in a file: the path as written and the line it is on. */
interface Mention {
  path: string;
  line: number;
}

/**
 * The repository paths named in `text` (see the module comment), with their line numbers. A
 * mention must end in a file extension or a trailing slash; trailing punctuation is dropped.
 */
export function repositoryPaths(text: string): Mention[] {
  const out: Mention[] = [];
  for (const match of text.matchAll(PATH_RE)) {
    const path = outsideBraces(match[0]).replace(/[.,]+$/, "");
    if (!/\.[A-Za-z][A-Za-z0-9]*$/.test(path) && !path.endsWith("/")) continue;
    const line = text.slice(0, match.index).split("\n").length;
    out.push({ path, line });
  }
  return out;
}

/** `text` up to its first comma outside `{…}` (a comma inside braces separates alternatives). */
function outsideBraces(text: string): string {
  let depth = 0;
  for (let i = 0; i < text.length; i++) {
    if (text[i] === "{") depth++;
    else if (text[i] === "}") depth--;
    else if (text[i] === "," && depth === 0) return text.slice(0, i);
  }
  return text;
}

/** The comment text of a source file, other characters blanked so line numbers stay. */
export function commentText(path: string, source: string): string {
  const keep = (m: string) => m;
  const blank = (m: string) => m.replace(/[^\n]/g, " ");
  if (path.endsWith(".sh")) {
    // A `#` starts a comment at the start of a line or after white space (not `$#`, `${#x}`).
    return source.split("\n").map((l) => {
      const i = l.search(/(^|\s)#/);
      return i < 0 ? "" : l.slice(i);
    }).join("\n");
  }
  // C, headers and TypeScript: block comments and `//` comments after white space or at the
  // start of a line (so `http://…` inside a string is not one). Everything else is blanked.
  const re = /\/\*[\s\S]*?\*\/|(?<=^|\s)\/\/[^\n]*|[^/\n]+|[\s\S]/gm;
  return source.replace(re, (m) => (m.startsWith("/*") || m.startsWith("//") ? keep(m) : blank(m)));
}

/** A glob-like mention as a regular expression over repository paths (see the module comment). */
export function mentionPattern(path: string): RegExp | undefined {
  if (!/[<>*{}…]/.test(path)) return undefined;
  let re = "";
  for (let i = 0; i < path.length; i++) {
    const c = path[i];
    if (c === "<") {
      const end = path.indexOf(">", i);
      if (end < 0) return /^$/;
      re += "[^/]+";
      i = end;
    } else if (c === "*") re += "[^/]*";
    else if (c === "…") re += "[^/]*";
    else if (c === "{") {
      const end = path.indexOf("}", i);
      if (end < 0) return /^$/;
      re += "(?:" + path.slice(i + 1, end).split(",").map(escape).join("|") + ")";
      i = end;
    } else re += escape(c);
  }
  return new RegExp("^" + re + "$");
}

function escape(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}

/** Every file and folder of the repository (folders with a trailing slash). */
async function repositoryEntries(dir = ROOT): Promise<string[]> {
  const out: string[] = [];
  for await (const entry of Deno.readDir(dir)) {
    if (SKIPPED_DIRS.has(entry.name)) continue;
    const path = join(dir, entry.name);
    if (entry.isDirectory) {
      out.push(relative(ROOT, path) + "/");
      out.push(...await repositoryEntries(path));
    } else out.push(relative(ROOT, path));
  }
  return out;
}

/** The paths `.gitignore` names (outputs), as exact paths or folder prefixes. */
async function ignoredPaths(): Promise<string[]> {
  const text = await Deno.readTextFile(join(ROOT, ".gitignore"));
  return text.split("\n").map((l) => l.trim()).filter((l) => l && !l.startsWith("#"));
}

/** The files whose text is documentation: comments of code, the docs, the READMEs. */
function documented(entries: string[]): string[] {
  return entries.filter((p) =>
    (/\.(ts|sh|h|c)$/.test(p) && TOP_LEVEL.some((t) => p.startsWith(t + "/"))) ||
    /^docs\/[^/]+\.md$/.test(p) || p === "README.md" || p === "tests/README.md"
  );
}

Deno.test("docs paths: the mention finder takes repository paths and patterns, nothing else", () => {
  const text = [
    "see core/bucket/bucket_layout.ts, and tests/<subject>/ or agent/dataplane/*_map.ts.",
    "not /usr/local/bin/podmin-agent nor ../core/kit/log.ts nor https://x.io/core/y.ts",
    "a word: core/bucket (no extension); a folder: tests/support/; a key: deployments/index.json",
    "alternatives: core/kit/{log,errors}.ts, then prose",
  ].join("\n");
  assert.deepEqual(repositoryPaths(text).map((m) => `${m.line}:${m.path}`), [
    "1:core/bucket/bucket_layout.ts",
    "1:tests/<subject>/",
    "1:agent/dataplane/*_map.ts",
    "3:tests/support/",
    "4:core/kit/{log,errors}.ts",
  ]);
  assert.ok(mentionPattern("tests/<subject>/")!.test("tests/mesh/"));
  assert.ok(mentionPattern("core/kit/{log,errors}.ts")!.test("core/kit/errors.ts"));
  assert.equal(mentionPattern("core/kit/log.ts"), undefined);
  const ts = 'const u = "http://core/x.ts"; // see core/kit/log.ts\n/* and cli/main.ts */';
  assert.deepEqual(repositoryPaths(commentText("a.ts", ts)).map((m) => m.path), [
    "core/kit/log.ts",
    "cli/main.ts",
  ]);
  assert.deepEqual(
    repositoryPaths(commentText("a.sh", 'x="core/a.sh" # see cli/build.sh\n')).map((m) => m.path),
    ["cli/build.sh"],
  );
});

Deno.test("docs paths: every repository path named in a comment, the docs or a README exists", async () => {
  const entries = await repositoryEntries();
  const existing = new Set(entries);
  const ignored = await ignoredPaths();
  const dead: string[] = [];
  let checked = 0;
  for (const file of documented(entries)) {
    const source = await Deno.readTextFile(join(ROOT, file));
    const text = file.endsWith(".md") ? source : commentText(file, source);
    for (const { path, line } of repositoryPaths(text)) {
      checked++;
      if (ignored.some((i) => path === i || (i.endsWith("/") && path.startsWith(i)))) continue;
      const pattern = mentionPattern(path);
      const found = pattern ? entries.some((e) => pattern.test(e)) : existing.has(path) ||
        existing.has(path + "/");
      if (!found) dead.push(`${file}:${line}: ${path}`);
    }
  }
  assert.ok(checked > 500, `only ${checked} mentions found: is the finder broken?`);
  assert.deepEqual(dead, [], `paths named that do not exist:\n${dead.join("\n")}`);
});

/** The anchors GitHub gives the headings of a Markdown text (duplicates numbered `-1`, `-2`). */
export function headingAnchors(markdown: string): Set<string> {
  const seen = new Map<string, number>();
  const out = new Set<string>();
  let fenced = false;
  for (const line of markdown.split("\n")) {
    if (line.startsWith("```")) fenced = !fenced;
    const m = fenced ? null : /^#{1,6} (.*)$/.exec(line);
    if (!m) continue;
    const slug = m[1].trim().toLowerCase().replace(/[^\p{L}\p{N}_\- ]/gu, "").replaceAll(" ", "-");
    const n = seen.get(slug) ?? 0;
    seen.set(slug, n + 1);
    out.add(n === 0 ? slug : `${slug}-${n}`);
  }
  return out;
}

Deno.test("docs paths: every Markdown link of the docs and READMEs reaches its file and heading", async () => {
  const files = documented(await repositoryEntries()).filter((p) => p.endsWith(".md"));
  const broken: string[] = [];
  for (const file of files) {
    // Code (fenced blocks, code spans) is blanked: a regular expression there is not a link.
    const text = (await Deno.readTextFile(join(ROOT, file)))
      .replace(/^```[\s\S]*?^```/gm, (c) => c.replace(/[^\n]/g, " "))
      .replace(/`[^`\n]*`/g, (c) => " ".repeat(c.length));
    for (const m of text.matchAll(/\]\(([^)\s]+)\)/g)) {
      const [target, anchor] = m[1].split("#");
      if (/^[a-z]+:/.test(target)) continue; // a URL
      const path = target ? join(dirname(file), target) : file;
      const line = text.slice(0, m.index).split("\n").length;
      let body: string;
      try {
        body = await Deno.readTextFile(join(ROOT, path));
      } catch {
        if (!anchor && (await Deno.stat(join(ROOT, path)).catch(() => undefined))) continue;
        broken.push(`${file}:${line}: ${m[1]} (no such file)`);
        continue;
      }
      if (anchor && !headingAnchors(body).has(anchor)) {
        broken.push(`${file}:${line}: ${m[1]} (no such heading)`);
      }
    }
  }
  assert.deepEqual(broken, [], `links that lead nowhere:\n${broken.join("\n")}`);
});

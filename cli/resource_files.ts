/**
 * Reads operator resource files: YAML or JSON, several documents per file, `kind: List`
 * documents (what `podmin get -o json` prints) expanded, directories read for their `.yaml`,
 * `.yml` and `.json` files (recursively with `-R`), `-` for standard input.
 *
 * A top-level `status` (what `get -o yaml|json` prints, e.g. a Service's VIP) is read-only: it is
 * accepted and ignored, so `podmin get -o yaml | podmin apply -f -` round-trips. Errors name the
 * file, the line and column, the document and the field path, and show YAML syntax errors with
 * the offending line.
 */

import * as path from "node:path";
import { type Document, LineCounter, parseAllDocuments } from "yaml";
import { describeFsError } from "../core/kit/cli_kit.ts";
import { type Problem, UsageError, ValidationError } from "../core/kit/errors.ts";
import { checkSize, LIMITS } from "../core/kit/limits.ts";
import { parseResource, type Resource, resourceRef } from "../core/model/resources.ts";
import { encodeSpec } from "../core/bucket/spec_objects.ts";

/** A resource and where it came from. */
export interface LoadedResource {
  resource: Resource;
  /** `FILE: document N` */
  where: string;
}

/** Options of reading resource files. */
export interface ResourceFileOptions {
  /** `-n`: the namespace of documents that name none; a document naming another is refused. */
  namespace?: string;
}

type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => v !== null && typeof v === "object" && !Array.isArray(v);

/** `[3, "a", 0]` segments of a field path like `spec.ports[0].port`. */
function pathSegments(field: string): (string | number)[] {
  const out: (string | number)[] = [];
  for (const part of field.split(".")) {
    const m = /^([^[]*)((\[\d+\])*)$/.exec(part);
    if (!m) return out;
    if (m[1]) out.push(m[1]);
    for (const i of m[2].matchAll(/\[(\d+)\]/g)) out.push(Number(i[1]));
  }
  return out;
}

/** `FILE:LINE:COL` of the deepest node of `field` present in the document. */
function locate(
  o: { doc: Document; lines: LineCounter; name: string; prefix: (string | number)[] },
  field: string,
): string {
  const segs = [...o.prefix, ...pathSegments(field)];
  for (let n = segs.length; n >= 0; n--) {
    const node = o.doc.getIn(segs.slice(0, n), true) as { range?: [number, number, number] };
    if (node?.range) {
      const { line, col } = o.lines.linePos(node.range[0]);
      return `${o.name}:${line}:${col}`;
    }
  }
  return o.name;
}

/** The source line and a caret under the column, as the error excerpt. */
function excerpt(text: string, line: number, col: number): string {
  const source = text.split("\n")[line - 1] ?? "";
  return `${String(line).padStart(4)} | ${source}\n     | ${" ".repeat(Math.max(0, col - 1))}^`;
}

/** One document's or List item's resource, with its place in the file for error messages. */
interface DocumentItem {
  value: unknown;
  prefix: (string | number)[];
  where: string;
}

/** Parses one item into `out`, or adds its problems (each located in the file) to `problems`. */
function loadItem(
  ctx: {
    doc: Document;
    lines: LineCounter;
    name: string;
    options: ResourceFileOptions;
    problems: string[];
    out: LoadedResource[];
  },
  item: DocumentItem,
): void {
  const { doc, lines, name, options, problems, out } = ctx;
  const at = (field: string) => locate({ doc, lines, name, prefix: item.prefix }, field);
  const raw = item.value;
  if (isObj(raw)) {
    delete raw.status; // read-only: what `get -o yaml` shows is accepted and ignored
    const meta = raw.metadata;
    if (options.namespace !== undefined && isObj(meta)) {
      if (meta.namespace === undefined) meta.namespace = options.namespace;
      else if (meta.namespace !== options.namespace) {
        problems.push(
          `${at("metadata.namespace")}: ${item.where}: metadata.namespace: ${
            JSON.stringify(meta.namespace)
          } does not match -n ${options.namespace}`,
        );
        return;
      }
    }
  }
  try {
    const resource = parseResource(raw);
    checkSize({
      what: `${name}: ${item.where}: ${resource.kind} ${resourceRef(resource)} (canonical JSON)`,
      size: encodeSpec(resource).bytes.byteLength,
      limit: LIMITS.resourceBytes,
      hint: "keep large data out of resources: images carry files, spec.secrets carries values",
    });
    out.push({ resource, where: `${name}: ${item.where}` });
  } catch (err) {
    if (!(err instanceof ValidationError)) throw err;
    if (!err.problems) {
      problems.push(err.message); // a size limit: the message names file and document
      return;
    }
    for (const p of err.problems as Problem[]) {
      problems.push(
        p.path
          ? `${at(p.path)}: ${item.where}: ${p.path}: ${p.message}`
          : `${name}: ${item.where}: ${p.message}`,
      );
    }
  }
}

/** Parses the text of one file. `name` is used in error messages. */
export function parseResourceText(
  text: string,
  name: string,
  options: ResourceFileOptions = {},
): LoadedResource[] {
  const lines = new LineCounter();
  const docs = parseAllDocuments(text, { uniqueKeys: true, lineCounter: lines });
  const out: LoadedResource[] = [];
  const problems: string[] = [];
  let syntax = false;
  docs.forEach((doc, i) => {
    const where = `${name}: document ${i + 1}`;
    if (doc.errors.length) {
      const e = doc.errors[0];
      const pos = e.linePos?.[0];
      const what = e.message.split("\n")[0].replace(/ at line \d+, column \d+:?$/, "");
      problems.push(
        pos
          ? `${name}:${pos.line}:${pos.col}: document ${i + 1}: YAML syntax: ${what}\n${
            excerpt(text, pos.line, pos.col)
          }`
          : `${where}: YAML syntax: ${what}`,
      );
      syntax = true;
      return;
    }
    let value: unknown;
    try {
      value = doc.toJS({ maxAliasCount: 50 });
    } catch (err) {
      // e.g. "Excessive alias count indicates a resource exhaustion attack" (an alias bomb).
      problems.push(`${where}: cannot expand the YAML: ${(err as Error).message}`);
      return;
    }
    if (value === null || value === undefined) return; // empty document
    const items: DocumentItem[] =
      isObj(value) && value.kind === "List" && Array.isArray(value.items)
        ? value.items.map((item, j) => ({
          value: item,
          prefix: ["items", j],
          where: `document ${i + 1}, items[${j}]`,
        }))
        : [{ value, prefix: [], where: `document ${i + 1}` }];
    for (const item of items) loadItem({ doc, lines, name, options, problems, out }, item);
  });
  if (problems.length) {
    throw new ValidationError(problems.join("\n"), {
      hint: syntax
        ? "fix the YAML syntax at the line shown (indentation, quotes, brackets)"
        : 'fix the fields named above; see docs/spec.md, "Resources"',
    });
  }
  return out;
}

/** Reads a resource file (`-` is stdin), refusing one over `LIMITS.resourceFileBytes` unread. */
async function readBounded(file: string): Promise<string> {
  const limit = LIMITS.resourceFileBytes;
  const hint = "split the resources over several files, and keep large data out of them";
  if (file !== "-") {
    const { size } = await Deno.stat(file);
    checkSize({ what: `resource file ${file}`, size, limit, hint });
    return await Deno.readTextFile(file);
  }
  const chunks: Uint8Array[] = [];
  let size = 0;
  for await (const chunk of Deno.stdin.readable) {
    size += chunk.byteLength;
    checkSize({ what: "standard input", size, limit, hint });
    chunks.push(chunk);
  }
  return new TextDecoder().decode(await new Blob(chunks as Uint8Array<ArrayBuffer>[]).bytes());
}

const MANIFEST_FILE = /\.(ya?ml|json)$/;

/** The manifest files of a directory (sorted; subdirectories too when `recursive`). */
async function filesOf(dir: string, recursive: boolean): Promise<string[]> {
  const out: string[] = [];
  const entries = [];
  for await (const e of Deno.readDir(dir)) entries.push(e);
  entries.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  for (const e of entries) {
    const p = path.join(dir, e.name);
    if (e.isDirectory && recursive) out.push(...await filesOf(p, true));
    else if (e.isFile && MANIFEST_FILE.test(e.name)) out.push(p);
  }
  return out;
}

/** `-f` values expanded: directories to their manifest files. */
async function expandFiles(files: string[], recursive: boolean): Promise<string[]> {
  const out: string[] = [];
  for (const f of files) {
    if (f === "-") {
      out.push(f);
      continue;
    }
    let info: Deno.FileInfo;
    try {
      info = await Deno.stat(f);
    } catch (err) {
      throw new UsageError(`cannot read ${f}: ${describeFsError(err)}`, {
        hint: "check the path passed with -f",
      });
    }
    if (!info.isDirectory) {
      out.push(f);
      continue;
    }
    const inside = await filesOf(f, recursive);
    if (!inside.length) {
      throw new UsageError(
        `no .yaml, .yml or .json file in ${f}${recursive ? " or below" : ""}`,
        {
          hint: recursive ? "check the directory passed with -f" : "add -R to read subdirectories",
        },
      );
    }
    out.push(...inside);
  }
  return out;
}

/**
 * Reads and validates every file (`-` is standard input, a directory its manifest files,
 * recursively with `recursive`); rejects duplicates across files.
 */
export async function loadResourceFiles(
  files: string[],
  options: ResourceFileOptions & { recursive?: boolean } = {},
): Promise<LoadedResource[]> {
  if (files.length === 0) {
    throw new UsageError("no resource file given", {
      hint: "pass -f FILE or -f DIR (repeatable), or -f - for stdin",
    });
  }
  const all: LoadedResource[] = [];
  for (const file of await expandFiles(files, options.recursive ?? false)) {
    let text: string;
    try {
      text = await readBounded(file);
    } catch (err) {
      if (err instanceof ValidationError) throw err;
      throw new UsageError(`cannot read ${file}: ${describeFsError(err)}`, {
        hint: "check the path passed with -f",
      });
    }
    all.push(...parseResourceText(text, file === "-" ? "stdin" : file, options));
  }
  const seen = new Map<string, string>();
  for (const r of all) {
    const id = `${r.resource.kind} ${resourceRef(r.resource)}`;
    const first = seen.get(id);
    if (first) {
      throw new ValidationError(`${r.where}: ${id} is also defined in ${first}`, {
        hint: "each Deployment and Service may appear once per apply",
      });
    }
    seen.set(id, r.where);
  }
  if (all.length === 0) throw new UsageError(`no resources found in ${files.join(", ")}`);
  return all;
}

/** Reads operator resource files (YAML or JSON, several documents per file). */

import { parseAllDocuments } from "yaml";
import { UsageError, ValidationError } from "../core/errors.ts";
import { checkSize, LIMITS } from "../core/limits.ts";
import { parseResource, type Resource, resourceRef } from "../core/resources.ts";
import { encodeSpec } from "../core/spec_objects.ts";

/** A resource and where it came from. */
export interface LoadedResource {
  resource: Resource;
  /** `FILE: document N` */
  where: string;
}

/** Parses the text of one file. `name` is used in error messages. */
export function parseResourceText(text: string, name: string): LoadedResource[] {
  const docs = parseAllDocuments(text, { prettyErrors: true, uniqueKeys: true });
  const out: LoadedResource[] = [];
  const problems: string[] = [];
  docs.forEach((doc, i) => {
    const where = `${name}: document ${i + 1}`;
    if (doc.errors.length) {
      problems.push(`${where}: ${doc.errors.map((e) => e.message.split("\n")[0]).join("; ")}`);
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
    try {
      const resource = parseResource(value, where);
      checkSize({
        what: `${where}: ${resource.kind} ${resourceRef(resource)} (canonical JSON)`,
        size: encodeSpec(resource).bytes.byteLength,
        limit: LIMITS.resourceBytes,
        hint: "keep large data out of resources: images carry files, spec.secrets carries values",
      });
      out.push({ resource, where });
    } catch (err) {
      if (!(err instanceof ValidationError)) throw err;
      problems.push(err.message);
    }
  });
  if (problems.length) {
    throw new ValidationError(problems.join("\n"), {
      hint: 'fix the fields named above; see docs/spec.md, "Resources"',
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

/** Reads and validates every file (`-` is standard input); rejects duplicates across files. */
export async function loadResourceFiles(files: string[]): Promise<LoadedResource[]> {
  if (files.length === 0) {
    throw new UsageError("no resource file given", {
      hint: "pass -f FILE (repeatable), or -f - for stdin",
    });
  }
  const all: LoadedResource[] = [];
  for (const file of files) {
    let text: string;
    try {
      text = await readBounded(file);
    } catch (err) {
      if (err instanceof ValidationError) throw err;
      throw new UsageError(`cannot read ${file}: ${(err as Error).message}`, {
        hint: "check the path passed with -f",
      });
    }
    all.push(...parseResourceText(text, file));
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

/**
 * The agent's JSON status files under its state directory (status.json, identity.json, mesh.json,
 * dns.json, dataplane.json, …): written atomically (temporary file, then rename), so a reader or a
 * crash mid-write never sees half a file.
 */

import * as path from "node:path";

/** Writes `value` as JSON to `file` atomically, creating its directory. */
export async function writeJsonStatus(file: string, value: unknown): Promise<void> {
  await Deno.mkdir(path.dirname(file), { recursive: true, mode: 0o755 });
  await Deno.writeTextFile(`${file}.tmp`, JSON.stringify(value, null, 2) + "\n");
  await Deno.rename(`${file}.tmp`, file);
}

/** Reads a JSON status file; undefined when it does not exist. */
export async function readJsonStatus<T>(file: string): Promise<T | undefined> {
  try {
    return JSON.parse(await Deno.readTextFile(file)) as T;
  } catch (err) {
    if (err instanceof Deno.errors.NotFound) return undefined;
    throw err;
  }
}

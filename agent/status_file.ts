/**
 * The agent's JSON status files under its state directory (status.json, identity.json, mesh.json,
 * dns.json, dataplane.json, …): written atomically (temporary file, then rename), so a reader or a
 * crash mid-write never sees half a file.
 */

import * as path from "node:path";
import { writeFileAtomic } from "../core/store/atomic_write.ts";

/** Writes `value` as JSON to `file` atomically (not durable), creating its directory. */
export async function writeJsonStatus(file: string, value: unknown): Promise<void> {
  await Deno.mkdir(path.dirname(file), { recursive: true, mode: 0o755 });
  // Not durable: every pass writes its status again, so a crash costs a stale copy, never a torn one.
  await writeFileAtomic(file, JSON.stringify(value, null, 2) + "\n", { durable: false });
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

/** `<state-dir>/identity.json`: the workload CA maintainer's last pass, written atomically. */

import * as path from "node:path";
import type { IdentityStatus } from "./ca_maintainer.ts";

/** The identity status file under a state directory. */
export function identityStatusPath(stateDir: string): string {
  return path.join(stateDir, "identity.json");
}

/** Writes the status atomically (temporary file, then rename). */
export async function writeIdentityStatus(stateDir: string, status: IdentityStatus): Promise<void> {
  await Deno.mkdir(stateDir, { recursive: true, mode: 0o755 });
  const file = identityStatusPath(stateDir);
  await Deno.writeTextFile(`${file}.tmp`, JSON.stringify(status, null, 2) + "\n");
  await Deno.rename(`${file}.tmp`, file);
}

/** `<state-dir>/identity.json`: the workload CA maintainer's last pass, written atomically. */

import * as path from "node:path";
import type { IdentityStatus } from "./ca_maintainer.ts";
import { writeJsonStatus } from "../status_file.ts";

/** The identity status file under a state directory. */
export function identityStatusPath(stateDir: string): string {
  return path.join(stateDir, "identity.json");
}

/** Writes the status atomically (temporary file, then rename). */
export function writeIdentityStatus(stateDir: string, status: IdentityStatus): Promise<void> {
  return writeJsonStatus(identityStatusPath(stateDir), status);
}

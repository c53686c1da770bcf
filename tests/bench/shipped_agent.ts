/**
 * The agent as nodes run it, for the benchmarks: the single-file bundle of this tree (built by
 * `cli/build.sh bundle` into a temporary directory) run by this Deno with the V8
 * flags and environment of core/model/agent_runtime_settings.ts. A compiled binary carries the same
 * flags; it cannot be built here (no `denort`), and the bundle is the other shipped form.
 */

import * as path from "node:path";
import { AGENT_ENV, agentV8FlagsArg } from "../../core/model/agent_runtime_settings.ts";

const root = new URL("../../", import.meta.url).pathname;

/** Builds the bundle into `<dir>/dist` (the caller removes `dir`) and returns its path. */
async function buildBundle(dir: string): Promise<string> {
  const dist = path.join(dir, "dist");
  const out = await new Deno.Command("bash", {
    args: [path.join(root, "cli/build.sh"), "bundle"],
    env: { PODMIN_DIST: dist },
    stdout: "null",
    stderr: "piped",
  }).output();
  if (!out.success) {
    throw new Error(`cli/build.sh bundle failed: ${new TextDecoder().decode(out.stderr)}`);
  }
  return path.join(dist, "podmin-agent.js");
}

/**
 * The argv (before the agent's own arguments) and environment of the shipped agent, its bundle
 * built under `dir` (a temporary directory of the caller's).
 */
export async function shippedAgent(
  dir: string,
): Promise<{ argv: string[]; env: Record<string, string> }> {
  const argv = [Deno.execPath(), "run", "--allow-all", agentV8FlagsArg(), await buildBundle(dir)];
  // One run first, as on a node after its first start: Deno writes the bundle's V8 code cache
  // then (measured: that first process ends at 143 MiB RSS, the next at 80).
  const warm = await new Deno.Command(argv[0], {
    args: [...argv.slice(1), "--version"],
    stdout: "null",
    stderr: "piped",
  }).output();
  if (!warm.success) {
    throw new Error(`podmin-agent --version failed: ${new TextDecoder().decode(warm.stderr)}`);
  }
  return { argv, env: { ...AGENT_ENV } };
}

/** Runs a Podmin program and kills it with SIGKILL after a delay, unless it finished first. */

import { spawnProgram } from "../support/programs.ts";

/** Whether the kill hit a running process, and how the process ended. */
export interface KillOutcome {
  killed: boolean;
  code: number;
}

/** Starts `podmin ARGS…` (`agent`: `podmin-agent`) and sends SIGKILL after `ms`. */
export async function killAfter(
  args: string[],
  options: { ms: number; agent?: boolean; env?: Record<string, string> },
): Promise<KillOutcome> {
  const child = spawnProgram(args, { agent: options.agent, env: options.env });
  let killed = false;
  const timer = setTimeout(() => {
    try {
      child.kill("SIGKILL");
      killed = true;
    } catch {
      // Already exited.
    }
  }, options.ms);
  const status = await child.status;
  clearTimeout(timer);
  return { killed: killed && status.signal === "SIGKILL", code: status.code };
}

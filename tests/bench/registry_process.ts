/** A registry process for the benches: started, waited for until `/v2/` answers, stopped. */

import { waitFor } from "../support/programs.ts";

/** A running registry: its base URL and process id (for CPU and memory figures). */
export interface Server {
  base: string;
  pid: number;
  stop(): Promise<void>;
}

/** Starts `cmd args` and waits (30 s at most) until `<base>/v2/` answers 2xx. */
export async function serve(
  options: { cmd: string; args: string[]; env?: Record<string, string>; base: string },
): Promise<Server> {
  const child = new Deno.Command(options.cmd, {
    args: options.args,
    env: options.env,
    stdin: "null",
    stdout: "null",
    stderr: "null",
  }).spawn();
  await waitFor(options.cmd, async () => {
    try {
      const res = await fetch(`${options.base}/v2/`);
      await res.body?.cancel();
      return res.ok;
    } catch {
      return false;
    }
  }, 30_000);
  return {
    base: options.base,
    pid: child.pid,
    async stop() {
      child.kill("SIGTERM");
      await child.status;
    },
  };
}

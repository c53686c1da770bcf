/**
 * A benchmark's worker process and its command channel: JSON lines on the worker's stdin, each
 * answered by one stdout line `@@<json>` carrying the command's `id` (other stdout lines are
 * ignored). Used by the cluster-scale fleet (cluster_scale_fleet.ts) and the rollout benchmark's
 * simulated agents (rollout_sim.ts).
 */

import { processCpuSeconds } from "./bench_output.ts";

/** One worker process running `script` (a Deno program) with `args`. */
export class WorkerChannel<Request extends object> {
  readonly child: Deno.ChildProcess;
  readonly #pending = new Map<number, (body: unknown) => void>();
  readonly #failures = new Map<number, (err: Error) => void>();
  #exited?: string;
  /** True once the bench asked it to stop (`{cmd: "stop"}`) or killed it: its exit is no abort. */
  #ending = false;
  /** True when it exited on its own with a failure (the runtime aborted, or a crash). */
  aborted = false;
  #next = 0;
  readonly #writer: WritableStreamDefaultWriter<Uint8Array>;

  constructor(o: { script: string; args: string[]; env?: Record<string, string> }) {
    this.child = new Deno.Command(Deno.execPath(), {
      args: ["run", "--allow-all", o.script, ...o.args],
      env: o.env,
      stdin: "piped",
      stdout: "piped",
      stderr: "inherit",
    }).spawn();
    this.#writer = this.child.stdin.getWriter();
    const reading = this.#read();
    // A worker that dies (a crash of the runtime included) fails every command still waiting —
    // once its output is read to the end: a worker answers `stop` and exits at once, and its exit
    // status can arrive before that last answer has been read from the pipe.
    void this.child.status.then(async (status) => {
      await reading.catch(() => {});
      this.#exited = `a worker process exited (code ${status.code}, signal ${status.signal})`;
      if (!this.#ending || status.code !== 0 && status.signal !== "SIGKILL") this.aborted = true;
      for (const fail of this.#failures.values()) fail(new Error(this.#exited));
    });
  }

  async #read(): Promise<void> {
    const decoder = new TextDecoder();
    let buffer = "";
    for await (const chunk of this.child.stdout) {
      buffer += decoder.decode(chunk, { stream: true });
      let nl: number;
      while ((nl = buffer.indexOf("\n")) >= 0) {
        const line = buffer.slice(0, nl);
        buffer = buffer.slice(nl + 1);
        if (!line.startsWith("@@")) continue;
        const body = JSON.parse(line.slice(2));
        this.#pending.get(body.id)?.(body);
        this.#pending.delete(body.id);
        this.#failures.delete(body.id);
      }
    }
  }

  /** Sends a command; resolves with its answer (rejects when the worker exits first). */
  send<T>(command: Request): Promise<T> {
    if (this.#exited) return Promise.reject(new Error(this.#exited));
    if ((command as { cmd?: unknown }).cmd === "stop") this.#ending = true;
    const id = this.#next++;
    const answer = new Promise<T>((resolve, reject) => {
      this.#pending.set(id, resolve as (b: unknown) => void);
      this.#failures.set(id, reject);
    });
    void this.#writer.write(new TextEncoder().encode(JSON.stringify({ ...command, id }) + "\n"));
    return answer;
  }

  /** CPU seconds the worker used so far. */
  cpuSeconds(): Promise<number> {
    return processCpuSeconds(this.child.pid);
  }

  /** Kills the worker (SIGKILL; not counted as an abort). */
  kill(): void {
    this.#ending = true;
    try {
      this.child.kill("SIGKILL");
    } catch { /* gone */ }
  }
}

/**
 * The worker's side: reads the commands on stdin, calls `handle` for each (not awaited: commands
 * overlap), until stdin ends.
 */
export async function serveCommands<C extends { id: number }>(
  handle: (command: C) => Promise<void>,
): Promise<void> {
  const decoder = new TextDecoder();
  let buffer = "";
  for await (const chunk of Deno.stdin.readable) {
    buffer += decoder.decode(chunk, { stream: true });
    let nl: number;
    while ((nl = buffer.indexOf("\n")) >= 0) {
      const line = buffer.slice(0, nl);
      buffer = buffer.slice(nl + 1);
      if (line.trim()) void handle(JSON.parse(line));
    }
  }
}

/** Starts `agents` one after another, spread evenly over `spreadMs` (a worker's `start`). */
export async function startSpread(
  agents: { start(): Promise<unknown> }[],
  spreadMs: number,
): Promise<void> {
  const gap = spreadMs / Math.max(1, agents.length);
  for (const a of agents) {
    await a.start();
    await new Promise((r) => setTimeout(r, gap));
  }
}

/** The worker's answer to command `id`: one stdout line `@@<json>`. */
export function reply(id: number, body: unknown): void {
  console.log(`@@${JSON.stringify({ id, ...(body as object) })}`);
}

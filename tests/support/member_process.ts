/**
 * A mesh member in a child process (tests/support/mesh_member_child.ts): spawned with its
 * configuration, its events read from stdout, its log kept, and its end reported as an exit code
 * or a signal — so a test sees a runtime abort of the member (exit 134, SIGSEGV) as an outcome,
 * not as its own crash.
 */

import * as path from "node:path";
import type { MemberChildConfig } from "./mesh_member_child.ts";

/** One event line of the child. */
export interface MemberEvent {
  event: string;
  at: number;
  [field: string]: unknown;
}

/** How the child ended. */
export interface MemberExit {
  code: number;
  signal: Deno.Signal | null;
}

/** A running member child. */
export class MemberProcess {
  readonly events: MemberEvent[] = [];
  /** Set once the child ended. */
  exit?: MemberExit;
  readonly #child: Deno.ChildProcess;
  readonly #stderr: string[] = [];
  readonly #waiters = new Set<() => void>();
  readonly #done: Promise<MemberExit>;
  readonly #dir: string;

  private constructor(child: Deno.ChildProcess, dir: string) {
    this.#child = child;
    this.#dir = dir;
    const out = this.#lines(child.stdout, (line) => {
      try {
        this.events.push(JSON.parse(line) as MemberEvent);
      } catch {
        this.#stderr.push(`stdout: ${line}`);
      }
    });
    const err = this.#lines(child.stderr, (line) => this.#stderr.push(line));
    this.#done = child.status.then(async (s) => {
      await Promise.all([out, err]);
      this.exit = { code: s.code, signal: s.signal };
      this.#wake();
      await Deno.remove(this.#dir, { recursive: true }).catch(() => {});
      return this.exit;
    });
  }

  /** Starts a member child with `config`. */
  static async spawn(config: MemberChildConfig): Promise<MemberProcess> {
    const dir = await Deno.makeTempDir({ prefix: "podmin-member-" });
    const file = path.join(dir, "config.json");
    await Deno.writeTextFile(file, JSON.stringify(config));
    const child = new Deno.Command(Deno.execPath(), {
      args: [
        "run",
        "--allow-all",
        new URL("./mesh_member_child.ts", import.meta.url).pathname,
        file,
      ],
      stdin: "null",
      stdout: "piped",
      stderr: "piped",
    }).spawn();
    return new MemberProcess(child, dir);
  }

  /** The child's PID. */
  get pid(): number {
    return this.#child.pid;
  }

  /** The last lines of its stderr (its log, an abort message). */
  tail(lines = 20): string {
    return this.#stderr.slice(-lines).join("\n");
  }

  /** Whether an event named `event` came. */
  saw(event: string): boolean {
    return this.events.some((e) => e.event === event);
  }

  /** Resolves once `f()` holds or the child ended (then `exit` says how); rejects after `timeoutMs`. */
  until(what: string, f: () => boolean, timeoutMs = 30_000): Promise<void> {
    const done = () => f() || this.exit !== undefined;
    if (done()) return Promise.resolve();
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.#waiters.delete(check);
        reject(new Error(`timed out waiting for ${what}; member log:\n${this.tail()}`));
      }, timeoutMs);
      const check = () => {
        if (!done()) return;
        clearTimeout(timer);
        this.#waiters.delete(check);
        resolve();
      };
      this.#waiters.add(check);
    });
  }

  /** Stops the child (SIGTERM) and waits for its end. */
  async stop(): Promise<MemberExit> {
    if (this.exit === undefined) {
      try {
        this.#child.kill("SIGTERM");
      } catch { /* already gone */ }
    }
    return await this.#done;
  }

  /** The child's end. */
  ended(): Promise<MemberExit> {
    return this.#done;
  }

  async #lines(
    stream: ReadableStream<Uint8Array<ArrayBuffer>>,
    on: (line: string) => void,
  ): Promise<void> {
    let rest = "";
    for await (const chunk of stream.pipeThrough(new TextDecoderStream())) {
      const parts = (rest + chunk).split("\n");
      rest = parts.pop() ?? "";
      for (const p of parts) if (p) on(p);
      this.#wake();
    }
    if (rest) on(rest);
  }

  #wake(): void {
    for (const w of [...this.#waiters]) w();
  }
}

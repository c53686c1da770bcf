/** Runs a Podmin program and kills it with SIGKILL at a chosen moment, unless it finished first. */

import { spawnProgram } from "../support/programs.ts";

/** Whether the kill hit a running process, and whether the marker was seen first. */
export interface KillOutcome {
  killed: boolean;
  /** The marker (or the `when` condition) was seen and triggered the kill. */
  marked: boolean;
}

/** Options of `killAfter`. */
export interface KillOptions {
  /** Kill after this long (the upper bound when `marker` is given). */
  ms: number;
  /** Kill as soon as the `count`-th stderr line containing `text` appears. */
  marker?: { text: string; count: number };
  /** Kill `afterMs` after `check` (polled while the program runs) first returns true. */
  when?: { check: () => Promise<boolean>; afterMs: number };
  agent?: boolean;
  env?: Record<string, string>;
}

/** Starts `podmin ARGS…` (`agent`: `podmin-agent`) and sends SIGKILL at the chosen moment. */
export async function killAfter(args: string[], options: KillOptions): Promise<KillOutcome> {
  const child = spawnProgram(args, {
    agent: options.agent,
    env: options.env,
    stderr: options.marker ? "piped" : "null",
  });
  let killed = false;
  let marked = false;
  const kill = () => {
    if (killed) return;
    try {
      child.kill("SIGKILL");
      killed = true;
    } catch {
      // Already exited.
    }
  };
  const timer = setTimeout(kill, options.ms);
  const watch = options.marker
    ? watchStderr(child, options.marker, () => {
      marked = true;
      kill();
    })
    : Promise.resolve();
  let running = true;
  const poll = options.when
    ? pollUntil(options.when, () => running, () => {
      marked = true;
      kill();
    })
    : Promise.resolve();
  const status = await child.status;
  running = false;
  clearTimeout(timer);
  await watch;
  await poll;
  return { killed: killed && status.signal === "SIGKILL", marked };
}

async function watchStderr(
  child: Deno.ChildProcess,
  marker: { text: string; count: number },
  onMarker: () => void,
): Promise<void> {
  let seen = 0;
  let buf = "";
  for await (const chunk of child.stderr.pipeThrough(new TextDecoderStream())) {
    buf += chunk;
    const lines = buf.split("\n");
    buf = lines.pop()!;
    for (const line of lines) {
      if (line.includes(marker.text) && ++seen === marker.count) onMarker();
    }
  }
}

async function pollUntil(
  when: { check: () => Promise<boolean>; afterMs: number },
  running: () => boolean,
  onTrue: () => void,
): Promise<void> {
  while (running()) {
    if (await when.check()) {
      await new Promise((r) => setTimeout(r, when.afterMs));
      if (running()) onTrue();
      return;
    }
    await new Promise((r) => setTimeout(r, 2));
  }
}

/** A measuring run: how long the program took, and when its first write was seen. */
export interface TimedRun {
  code: number;
  stderr: string;
  /** From the start to the end of the run. */
  ms: number;
  /** From the start to the first poll of `wrote` that returned true (undefined: none did). */
  firstWriteMs?: number;
}

/**
 * Runs `podmin ARGS…` (`agent`: `podmin-agent`) to completion while polling `wrote`, to learn
 * when its writes begin: the kills at random moments are aimed between that and its end.
 */
export async function timeRun(
  args: string[],
  options: { agent?: boolean; env?: Record<string, string>; wrote: () => Promise<boolean> },
): Promise<TimedRun> {
  const t0 = Date.now();
  const child = spawnProgram(args, { agent: options.agent, env: options.env, stderr: "piped" });
  const stderr = new Response(child.stderr).text();
  let running = true;
  let firstWriteMs: number | undefined;
  const poll = (async () => {
    while (running && firstWriteMs === undefined) {
      if (await options.wrote()) firstWriteMs = Date.now() - t0;
      else await new Promise((r) => setTimeout(r, 2));
    }
  })();
  const status = await child.status;
  const ms = Date.now() - t0;
  running = false;
  await poll;
  return { code: status.code, stderr: await stderr, ms, firstWriteMs };
}

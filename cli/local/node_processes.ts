/**
 * The daemons of a local node: started detached inside the node's mount
 * namespace (nsenter), their output appended to a log file, identified later
 * by PID *and* command line so that a recycled PID is never signalled.
 */

import { PodminError } from "../../core/kit/errors.ts";
import { sleep } from "../../core/kit/retry.ts";

/** A started daemon as recorded in the node's state file. */
export interface DaemonRecord {
  pid: number;
  /** argv[0] the process was started with (checked before any signal). */
  program: string;
  log: string;
}

/** Options of `startDaemon`. */
export interface StartDaemonOptions {
  /** The persistent mount namespace file to enter. */
  mountNs: string;
  argv: string[];
  log: string;
  env?: Record<string, string>;
}

/** Starts `argv` in its own session inside the mount namespace; returns its record. */
export async function startDaemon(o: StartDaemonOptions): Promise<DaemonRecord> {
  // sh redirects and execs setsid, which (not a group leader) execs nsenter without forking,
  // which execs the program without forking: the child's PID is the daemon's.
  const child = new Deno.Command("sh", {
    args: [
      "-c",
      'exec "$@" >>"$PODMIN_DAEMON_LOG" 2>&1 </dev/null',
      "sh",
      "setsid",
      "nsenter",
      `--mount=${o.mountNs}`,
      "--",
      ...o.argv,
    ],
    env: { ...o.env, PODMIN_DAEMON_LOG: o.log },
    stdin: "null",
    stdout: "null",
    stderr: "null",
  }).spawn();
  child.unref();
  const record = { pid: child.pid, program: o.argv[0], log: o.log };
  // Until the exec chain reaches the program, the PID still runs sh, setsid or nsenter.
  for (let i = 0; i < 100 && !(await isRunning(record)); i++) {
    try {
      const stat = await Deno.readTextFile(`/proc/${record.pid}/stat`);
      if (/^\d+ \(.*\) Z /.test(stat)) break;
    } catch {
      break;
    }
    await sleep(50);
  }
  return record;
}

/** Whether the recorded process is still the one that was started. */
export async function isRunning(d: DaemonRecord): Promise<boolean> {
  try {
    const cmdline = await Deno.readTextFile(`/proc/${d.pid}/cmdline`);
    const stat = await Deno.readTextFile(`/proc/${d.pid}/stat`);
    // A zombie is gone for our purposes.
    if (/^\d+ \(.*\) Z /.test(stat)) return false;
    return cmdline.split("\0")[0] === d.program;
  } catch {
    return false;
  }
}

/** Stops a recorded daemon: SIGTERM, then SIGKILL after `graceMs`. False when it was not running. */
export async function stopDaemon(d: DaemonRecord, graceMs = 10_000): Promise<boolean> {
  if (!(await isRunning(d))) return false;
  try {
    Deno.kill(d.pid, "SIGTERM");
  } catch { /* gone meanwhile */ }
  const deadline = Date.now() + graceMs;
  while (Date.now() < deadline) {
    if (!(await isRunning(d))) return true;
    await sleep(100);
  }
  try {
    Deno.kill(d.pid, "SIGKILL");
  } catch { /* gone meanwhile */ }
  for (let i = 0; i < 50 && (await isRunning(d)); i++) await sleep(100);
  return true;
}

/** The last lines of a daemon's log that look like errors (or the last lines at all). */
export async function lastErrorLines(log: string, count = 3): Promise<string> {
  const text = await Deno.readTextFile(log).catch(() => "");
  const lines = text.split("\n").filter((l) => l.trim());
  const errors = lines.filter((l) =>
    /\b(panic|fatal|error|failed|E\d{4})\b|level=(error|fatal)|"level":"error"/i.test(l)
  );
  return (errors.length ? errors : lines).slice(-count).join("\n");
}

/** A daemon that did not come up: names it and carries its own last words. */
export class DaemonStartError extends PodminError {}

/** Options of `waitUntil`. */
export interface WaitOptions {
  daemon: DaemonRecord;
  /** Name the operator reads (containerd, kubelet, podmin-agent). */
  name: string;
  ready: () => Promise<boolean>;
  timeoutMs: number;
  log?: (line: string) => void;
}

/** Waits until `ready()`; fails at once with the daemon's log when it exits first. */
export async function waitUntil(o: WaitOptions): Promise<void> {
  const deadline = Date.now() + o.timeoutMs;
  let lastNote = Date.now();
  while (Date.now() < deadline) {
    if (await o.ready().catch(() => false)) return;
    if (!(await isRunning(o.daemon))) {
      throw new DaemonStartError(
        `${o.name} exited at start: ${(await lastErrorLines(o.daemon.log)) || "(no output)"}`,
        { hint: `its whole log: ${o.daemon.log}` },
      );
    }
    if (o.log && Date.now() - lastNote > 5000) {
      o.log(`  still waiting for ${o.name}…`);
      lastNote = Date.now();
    }
    await sleep(200);
  }
  throw new DaemonStartError(
    `${o.name} did not become ready in ${Math.round(o.timeoutMs / 1000)} s: ${
      (await lastErrorLines(o.daemon.log)) || "(no output)"
    }`,
    { hint: `its whole log: ${o.daemon.log}` },
  );
}

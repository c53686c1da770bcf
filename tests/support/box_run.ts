/**
 * One run of the machine harness and its clean-up. Every resource a run makes is named by its
 * run-unique id `pmb<5 characters>`: the directory `/var/tmp/podmin-box/<id>/` (machine roots,
 * logs, `owner.json`), network namespaces `<id>-<name>`, host links `<id><suffix>`, cgroups
 * `<hierarchy>/<id>/…`. Mounts are made only inside private mount namespaces of the run's
 * processes (they vanish with them) and by `ip netns` (removed with the namespace).
 *
 * `removeRun(id)` removes all of it: the processes (SIGKILL to everything in the run's cgroups and
 * network namespaces; a machine's PID 1 takes its PID namespace with it), then the cgroups,
 * network namespaces, host links and the directory. `openBoxRun()` first removes what killed
 * earlier runs left behind: a run whose owner process (`owner.json`: pid and start time) no longer
 * exists, or whose resources exist without a directory.
 */

import * as path from "node:path";
import { cgroupPids, removeCgroup, topLevelCgroups } from "./box_cgroups.ts";
import { runCommand } from "./command.ts";

/** Where runs keep their directories. */
export const BOX_ROOT = "/var/tmp/podmin-box";

const RUN_ID = /^pmb[0-9a-z]{5}$/;

/** An open run. */
export interface BoxRun {
  /** The run-unique prefix of every resource. */
  id: string;
  /** `/var/tmp/podmin-box/<id>`. */
  dir: string;
  /** Removes everything of this run (`removeRun`). */
  close(): Promise<void>;
}

interface Owner {
  pid: number;
  start: string;
}

/** The start time of a process (field 22 of /proc/PID/stat), or undefined when it is gone. */
async function startTime(pid: number): Promise<string | undefined> {
  const stat = await Deno.readTextFile(`/proc/${pid}/stat`).catch(() => undefined);
  return stat?.slice(stat.lastIndexOf(")") + 2).split(" ")[19];
}

async function ownerAlive(id: string): Promise<boolean> {
  try {
    const o = JSON.parse(await Deno.readTextFile(path.join(BOX_ROOT, id, "owner.json"))) as Owner;
    return (await startTime(o.pid)) === o.start;
  } catch {
    return false;
  }
}

async function netnsOf(id: string): Promise<string[]> {
  const out = await runCommand("ip", ["netns", "list"]);
  return out.stdout.split("\n").map((l) => l.split(" ")[0]).filter((n) => n.startsWith(`${id}-`));
}

async function linksOf(id: string): Promise<string[]> {
  const out = await runCommand("ip", ["-o", "link", "show"]);
  return out.stdout.split("\n").map((l) => /^\d+: ([^:@]+)/.exec(l)?.[1] ?? "")
    .filter((n) => n.startsWith(id));
}

async function processesOf(id: string): Promise<number[]> {
  const pids = new Set(await cgroupPids(id));
  for (const ns of await netnsOf(id)) {
    const out = await runCommand("ip", ["netns", "pids", ns]);
    for (const p of out.stdout.split("\n")) if (/^\d+$/.test(p)) pids.add(Number(p));
  }
  pids.delete(Deno.pid);
  return [...pids];
}

/** Removes every resource of run `id` (see the module comment); safe to call twice. */
export async function removeRun(id: string): Promise<void> {
  if (!RUN_ID.test(id)) throw new Error(`not a machine harness run id: ${id}`);
  const deadline = Date.now() + 30_000;
  for (let pids = await processesOf(id); pids.length; pids = await processesOf(id)) {
    if (Date.now() > deadline) {
      throw new Error(`run ${id}: processes ${pids.join(", ")} survive SIGKILL`);
    }
    for (const pid of pids) {
      try {
        Deno.kill(pid, "SIGKILL");
      } catch { /* gone */ }
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  await removeCgroup(id);
  for (const ns of await netnsOf(id)) await runCommand("ip", ["netns", "del", ns]);
  for (const link of await linksOf(id)) await runCommand("ip", ["link", "del", link]);
  const dir = path.join(BOX_ROOT, id);
  const mounts = (await Deno.readTextFile("/proc/self/mountinfo")).split("\n")
    .map((l) => l.split(" ")[4]).filter((m) => m?.startsWith(`${dir}/`));
  for (const m of mounts.reverse()) await runCommand("umount", ["-l", m]);
  await Deno.remove(dir, { recursive: true }).catch((err) => {
    if (!(err instanceof Deno.errors.NotFound)) throw err;
  });
}

/** Removes the resources of earlier runs whose owner is gone; returns their ids. */
export async function removeLeftovers(): Promise<string[]> {
  const ids = new Set<string>();
  for await (const e of Deno.readDir(BOX_ROOT)) ids.add(e.name);
  for (const c of await topLevelCgroups()) ids.add(c);
  const ns = await runCommand("ip", ["netns", "list"]);
  for (const l of ns.stdout.split("\n")) ids.add(l.split("-")[0]);
  const links = await runCommand("ip", ["-o", "link", "show"]);
  for (const l of links.stdout.split("\n")) ids.add(/^\d+: (pmb[0-9a-z]{5})/.exec(l)?.[1] ?? "");
  const removed: string[] = [];
  for (const id of ids) {
    if (!RUN_ID.test(id) || await ownerAlive(id)) continue;
    await removeRun(id);
    removed.push(id);
  }
  return removed;
}

/** Opens a new run after removing killed runs' leftovers. */
export async function openBoxRun(): Promise<BoxRun> {
  await Deno.mkdir(BOX_ROOT, { recursive: true, mode: 0o700 });
  await removeLeftovers();
  const bytes = crypto.getRandomValues(new Uint8Array(5));
  const id = "pmb" + [...bytes].map((b) => (b % 36).toString(36)).join("");
  const dir = path.join(BOX_ROOT, id);
  await Deno.mkdir(dir, { mode: 0o700 });
  const owner: Owner = { pid: Deno.pid, start: (await startTime(Deno.pid))! };
  await Deno.writeTextFile(path.join(dir, "owner.json"), JSON.stringify(owner));
  return { id, dir, close: () => removeRun(id) };
}

/**
 * The machine harness's cgroups: one directory per machine, `<run id>/<machine>`, in every
 * cgroup hierarchy of the host (cgroup v1 controllers, name=systemd and the v2 hierarchy of a
 * hybrid host; the one v2 hierarchy of a unified host). A machine's processes, its systemd
 * included, live below it and nowhere else: nothing of the harness joins the host's root cgroup.
 */

import * as path from "node:path";

/** The mount points of the host's cgroup hierarchies (from /proc/self/mountinfo). */
export async function cgroupHierarchies(): Promise<string[]> {
  const info = await Deno.readTextFile("/proc/self/mountinfo");
  const out: string[] = [];
  for (const line of info.split("\n")) {
    const [left, right] = line.split(" - ");
    const fstype = right?.split(" ")[0];
    if (fstype !== "cgroup" && fstype !== "cgroup2") continue;
    out.push(left.split(" ")[4]);
  }
  return out.sort();
}

/**
 * Creates `rel` (e.g. `pmbxxxxx/m0`) in every hierarchy; a new cpuset cgroup gets its parent's
 * CPUs and memory nodes (cgroup v1 leaves them empty, and an empty cpuset admits no process).
 */
export async function createCgroup(rel: string): Promise<void> {
  for (const h of await cgroupHierarchies()) {
    let dir = h;
    for (const part of rel.split("/")) {
      const parent = dir;
      dir = path.join(dir, part);
      try {
        await Deno.mkdir(dir);
      } catch (err) {
        if (!(err instanceof Deno.errors.AlreadyExists)) throw err;
        continue;
      }
      for (const f of ["cpuset.cpus", "cpuset.mems"]) {
        const own = path.join(dir, f);
        try {
          await Deno.stat(own);
        } catch {
          continue; // not a cpuset v1 hierarchy
        }
        await Deno.writeTextFile(own, await Deno.readTextFile(path.join(parent, f)));
      }
    }
  }
}

/** The directories of `rel` in every hierarchy where it exists. */
export async function cgroupDirs(rel: string): Promise<string[]> {
  const out: string[] = [];
  for (const h of await cgroupHierarchies()) {
    try {
      if ((await Deno.stat(path.join(h, rel))).isDirectory) out.push(path.join(h, rel));
    } catch { /* absent here */ }
  }
  return out;
}

async function subtree(dir: string): Promise<string[]> {
  const out = [dir];
  for await (const e of Deno.readDir(dir)) {
    if (e.isDirectory) out.push(...await subtree(path.join(dir, e.name)));
  }
  return out;
}

/** Every process in `rel` or below, in any hierarchy. */
export async function cgroupPids(rel: string): Promise<number[]> {
  const pids = new Set<number>();
  for (const dir of await cgroupDirs(rel)) {
    for (const d of await subtree(dir).catch(() => [])) {
      const procs = await Deno.readTextFile(path.join(d, "cgroup.procs")).catch(() => "");
      for (const p of procs.split("\n")) if (p) pids.add(Number(p));
    }
  }
  return [...pids];
}

/** Removes `rel` and everything below it in every hierarchy (its processes must be gone). */
export async function removeCgroup(rel: string): Promise<void> {
  for (const dir of await cgroupDirs(rel)) {
    for (const d of (await subtree(dir)).reverse()) await Deno.remove(d);
  }
}

/** The names directly below the root of the first hierarchy (run ids of the harness among them). */
export async function topLevelCgroups(): Promise<string[]> {
  const names = new Set<string>();
  for (const h of await cgroupHierarchies()) {
    for await (const e of Deno.readDir(h)) if (e.isDirectory) names.add(e.name);
  }
  return [...names];
}

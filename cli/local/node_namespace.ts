/**
 * The private filesystem view of a local node: a persistent mount namespace
 * (bound to a file under the state directory) in which the node's own
 * directories are bind-mounted over the real paths its generated files name
 * (/etc/containerd, /var/lib/kubelet, /run/containerd, …). containerd, kubelet
 * and the agent run inside it with the network of the host; the host's own
 * files at those paths are never touched. Mount points that do not exist on
 * the host are created as empty directories (or files) and recorded, so that
 * `down` removes exactly those.
 */

import * as path from "node:path";
import { PodminError } from "../../core/kit/errors.ts";

/** A directory (or file) of the node bound over a real path. */
export interface NodeBind {
  /** Path under the node's root directory on the host. */
  source: string;
  /** The real path the node's processes see. */
  target: string;
  file?: boolean;
}

/** A command failed while the namespace was being set up or removed. */
export class NamespaceError extends PodminError {}

/** Runs a command to completion; throws a NamespaceError with its stderr when it fails. */
export async function runOrThrow(args: string[]): Promise<void> {
  const out = await new Deno.Command(args[0], {
    args: args.slice(1),
    stderr: "piped",
    stdout: "null",
  })
    .output();
  if (!out.success) {
    throw new NamespaceError(
      `${args.join(" ")}: ${new TextDecoder().decode(out.stderr).trim() || `exit ${out.code}`}`,
    );
  }
}

/** Mount points of this process's mount namespace. */
export async function mountPoints(): Promise<Set<string>> {
  const info = await Deno.readTextFile("/proc/self/mountinfo");
  // Field 5 is the mount point, octal-escaped.
  return new Set(
    info.split("\n").filter(Boolean).map((l) =>
      l.split(" ")[4].replace(/\\([0-7]{3})/g, (_, o) => String.fromCharCode(parseInt(o, 8)))
    ),
  );
}

/** Whether a path exists (without following a final symlink). */
export async function exists(p: string): Promise<boolean> {
  try {
    await Deno.lstat(p);
    return true;
  } catch {
    return false;
  }
}

/** Creates the missing mount points on the host; returns what it created, outermost first. */
export async function createMountPoints(binds: readonly NodeBind[]): Promise<string[]> {
  const created: string[] = [];
  for (const b of binds) {
    const missing: string[] = [];
    for (
      let p = b.file ? path.dirname(b.target) : b.target;
      !(await exists(p));
      p = path.dirname(p)
    ) {
      missing.unshift(p);
    }
    for (const p of missing) {
      await Deno.mkdir(p);
      created.push(p);
    }
    if (b.file && !(await exists(b.target))) {
      await Deno.writeFile(b.target, new Uint8Array());
      created.push(b.target);
    }
    if (b.file) await Deno.writeFile(b.source, new Uint8Array(), { append: true });
    else await Deno.mkdir(b.source, { recursive: true });
  }
  return created;
}

/** Options of `createNamespace`. */
export interface CreateNamespaceOptions {
  /** Directory holding the namespace file (made a private bind mount of itself). */
  nsDir: string;
  binds: readonly NodeBind[];
}

/** Creates the persistent mount namespace with the binds; returns the namespace file. */
export async function createNamespace(o: CreateNamespaceOptions): Promise<string> {
  await Deno.mkdir(o.nsDir, { recursive: true });
  if (!(await mountPoints()).has(o.nsDir)) {
    await runOrThrow(["mount", "--bind", o.nsDir, o.nsDir]);
  }
  await runOrThrow(["mount", "--make-private", o.nsDir]);
  const nsFile = path.join(o.nsDir, "mnt");
  await Deno.writeFile(nsFile, new Uint8Array());
  const script = o.binds.map((b) => `mount --bind '${b.source}' '${b.target}'`).join(" && ");
  await runOrThrow([
    "unshare",
    `--mount=${nsFile}`,
    "--propagation",
    "private",
    "sh",
    "-c",
    script,
  ]);
  return nsFile;
}

/** The mount namespace inode of a process, or undefined when it is gone. */
export async function mountNsOf(pid: number | "self"): Promise<string | undefined> {
  try {
    return await Deno.readLink(`/proc/${pid}/ns/mnt`);
  } catch {
    return undefined;
  }
}

/** The identity (`mnt:[inode]`) of the namespace bound at `nsFile`, if it is bound. */
export async function namespaceId(nsFile: string): Promise<string | undefined> {
  try {
    const st = await Deno.stat(nsFile);
    if (!(await mountPoints()).has(nsFile)) return undefined;
    return `mnt:[${st.ino}]`;
  } catch {
    return undefined;
  }
}

/** PIDs of every process inside the namespace `id`. */
export async function processesIn(id: string): Promise<number[]> {
  const pids: number[] = [];
  for await (const e of Deno.readDir("/proc")) {
    if (!/^\d+$/.test(e.name)) continue;
    if ((await mountNsOf(Number(e.name))) === id) pids.push(Number(e.name));
  }
  return pids;
}

/** Unmounts `p` when it is a mount point (lazily when busy); true when something was unmounted. */
export async function unmountIfMounted(p: string): Promise<boolean> {
  if (!(await mountPoints()).has(p)) return false;
  await runOrThrow(["umount", p]).catch(() => runOrThrow(["umount", "-l", p]));
  return true;
}

/** Removes what `createMountPoints` created, innermost first, where still empty. */
export async function removeMountPoints(created: readonly string[]): Promise<string[]> {
  const left: string[] = [];
  for (const p of [...created].reverse()) {
    try {
      const st = await Deno.lstat(p);
      if (st.isFile && st.size !== 0) {
        left.push(p);
        continue;
      }
      await Deno.remove(p);
    } catch (err) {
      if (!(err instanceof Deno.errors.NotFound)) left.push(p);
    }
  }
  return left;
}

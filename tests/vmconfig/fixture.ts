/** Shared pieces of vmconfig's boot tests: dependency files, an isolated root, netns, commands. */

import { gzipSync } from "node:zlib";
import { buildTar } from "../../vmconfig/archive.ts";

const enc = new TextEncoder();

/** A finished command. */
export interface Out {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs a command to completion (never throws on a non-zero exit). */
export async function run(
  cmd: string,
  args: string[],
  opts: { env?: Record<string, string>; stdin?: string; cwd?: string } = {},
): Promise<Out> {
  const child = new Deno.Command(cmd, {
    args,
    env: opts.env,
    cwd: opts.cwd,
    stdin: opts.stdin === undefined ? "null" : "piped",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  if (opts.stdin !== undefined) {
    const w = child.stdin.getWriter();
    await w.write(enc.encode(opts.stdin));
    await w.close();
  }
  const out = await child.output();
  const dec = new TextDecoder();
  return { code: out.code, stdout: dec.decode(out.stdout), stderr: dec.decode(out.stderr) };
}

/** Runs a command and throws with its output when it fails. */
export async function must(cmd: string, args: string[], opts = {}): Promise<string> {
  const out = await run(cmd, args, opts);
  if (out.code !== 0) {
    throw new Error(`${cmd} ${args.join(" ")} exited ${out.code}\n${out.stdout}\n${out.stderr}`);
  }
  return out.stdout;
}

/** A fake-but-executable program: a shell script that prints its name and version. */
export function fakeBinary(name: string, version: string): Uint8Array {
  return enc.encode(`#!/bin/sh\necho "${name} ${version} (podmin test double)"\n`);
}

/** A tar.gz of the given members (mode 0755 for programs). */
export function tgz(members: Array<[string, Uint8Array, number?]>): Uint8Array {
  return new Uint8Array(
    gzipSync(buildTar(members.map(([n, d, m]) => [n, m ?? 0o755, d])), { level: 1 }),
  );
}

/** A Debian package built by dpkg-deb from the given files. */
export async function deb(
  dir: string,
  pkg: string,
  version: string,
  files: Array<[string, Uint8Array]>,
): Promise<Uint8Array> {
  const tree = `${dir}/${pkg}-deb`;
  await Deno.mkdir(`${tree}/DEBIAN`, { recursive: true });
  await Deno.writeTextFile(
    `${tree}/DEBIAN/control`,
    `Package: ${pkg}\nVersion: ${version}\nArchitecture: amd64\nMaintainer: Podmin tests <t@example.invalid>\nDescription: test double\n`,
  );
  for (const [p, data] of files) {
    await Deno.mkdir(`${tree}/${p.substring(0, p.lastIndexOf("/"))}`, { recursive: true });
    await Deno.writeFile(`${tree}/${p}`, data, { mode: 0o755 });
  }
  await must("dpkg-deb", ["--root-owner-group", "-Zgzip", "-b", tree, `${dir}/${pkg}.deb`]);
  return await Deno.readFile(`${dir}/${pkg}.deb`);
}

/** Seeds a minimal Debian-like root: the account databases with root only. */
export async function seedRoot(root: string): Promise<void> {
  await Deno.mkdir(`${root}/etc`, { recursive: true });
  const files: Record<string, [string, number]> = {
    passwd: ["root:x:0:0:root:/root:/bin/bash\n", 0o644],
    group: ["root:x:0:\n", 0o644],
    shadow: ["root:*:19000:0:99999:7:::\n", 0o640],
    gshadow: ["root:*::\n", 0o640],
  };
  for (const [f, [text, mode]] of Object.entries(files)) {
    await Deno.writeTextFile(`${root}/etc/${f}`, text, { mode });
  }
}

/** Every path below root (relative), sorted. */
export async function listTree(root: string, dir = ""): Promise<string[]> {
  const out: string[] = [];
  for await (const e of Deno.readDir(`${root}${dir}`)) {
    const rel = `${dir}/${e.name}`;
    out.push(rel);
    if (e.isDirectory && !e.isSymlink) out.push(...await listTree(root, rel));
  }
  return out.sort();
}

/** owner uid, gid and permission bits of a path. */
export async function ownerMode(path: string): Promise<string> {
  const st = await Deno.lstat(path);
  return `${st.uid}:${st.gid} ${((st.mode ?? 0) & 0o7777).toString(8).padStart(4, "0")}`;
}

/** A recorder standing in for a command: appends its arguments, one call per line. */
export async function recorder(
  dir: string,
  name: string,
): Promise<{ path: string; log: string }> {
  const path = `${dir}/${name}-recorder`;
  const log = `${dir}/${name}.log`;
  await Deno.writeTextFile(path, `#!/bin/sh\necho "$*" >>"${log}"\n`, { mode: 0o755 });
  await Deno.writeTextFile(log, "");
  return { path, log };
}

/** A recorder standing in for systemctl. */
export function systemctlRecorder(dir: string): Promise<{ path: string; log: string }> {
  return recorder(dir, "systemctl");
}

/**
 * A recorder standing in for apt-get: one line per call, "DEBIAN_FRONTEND=<value> <arguments>".
 * It installs nothing (tests never reach the package archive).
 */
export async function aptRecorder(dir: string): Promise<{ path: string; log: string }> {
  const path = `${dir}/apt-get-recorder`;
  const log = `${dir}/apt-get.log`;
  await Deno.writeTextFile(
    path,
    `#!/bin/sh\necho "DEBIAN_FRONTEND=\${DEBIAN_FRONTEND:-} $*" >>"${log}"\n`,
    { mode: 0o755 },
  );
  await Deno.writeTextFile(log, "");
  return { path, log };
}

/** A throwaway network namespace; `close()` deletes it (and its interfaces). */
export async function netns(name: string): Promise<{ name: string; close(): Promise<void> }> {
  await run("ip", ["netns", "del", name]);
  await must("ip", ["netns", "add", name]);
  await must("ip", ["-n", name, "link", "set", "lo", "up"]);
  return { name, close: async () => void await run("ip", ["netns", "del", name]) };
}

/**
 * A veth pair standing in for an ENI inside namespace `ns` (the dummy driver is not available
 * everywhere): `dev` with an optional MAC; `dev` and its peer `<dev>-peer` brought up unless
 * told otherwise (a hot-plugged interface starts down).
 */
export async function vethEni(
  ns: string,
  dev: string,
  options: { mac?: string; up?: boolean; peerUp?: boolean } = {},
): Promise<void> {
  const mac = options.mac ? ["address", options.mac] : [];
  await must("ip", [
    "-n",
    ns,
    "link",
    "add",
    dev,
    ...mac,
    "type",
    "veth",
    "peer",
    "name",
    `${dev}-peer`,
  ]);
  if (options.peerUp ?? true) await must("ip", ["-n", ns, "link", "set", `${dev}-peer`, "up"]);
  if (options.up ?? true) await must("ip", ["-n", ns, "link", "set", dev, "up"]);
}

/**
 * The test-built node peers packed as their vendors pack them (containerd tar.gz with bin/, crictl
 * and CoreDNS tgz, kubelet and runc raw, CNI plugins tgz), and a dependency catalogue whose URLs
 * point at a local file server holding them, with their real digests: what `deno task demo` and
 * the machine harness's `setup` download and verify.
 */

import { createHash } from "node:crypto";
import * as path from "node:path";
import type { CatalogEntry } from "../../cli/setup/dependency_catalog.ts";
import { mustRun } from "./command.ts";
import { nodePeerDir } from "./node_peers.ts";

/** The host's architecture as the catalogue names it. */
export const HOST_ARCH = Deno.build.arch === "x86_64" ? "amd64" : "arm64";

const sha256 = (b: Uint8Array) => createHash("sha256").update(b).digest("hex");

/** A tar.gz of `files` (name in the archive → host path), as the vendors pack them. */
export async function vendorTgz(
  work: string,
  name: string,
  files: Record<string, string>,
): Promise<Uint8Array> {
  const dir = path.join(work, `${name}.d`);
  for (const [member, from] of Object.entries(files)) {
    await Deno.mkdir(path.dirname(path.join(dir, member)), { recursive: true });
    await Deno.copyFile(from, path.join(dir, member));
  }
  const file = path.join(work, `${name}.tgz`);
  await mustRun("tar", ["-czf", file, "-C", dir, "--owner=0", "--group=0", ...Object.keys(files)]);
  return await Deno.readFile(file);
}

/** The first `tool` on PATH. */
export async function which(tool: string): Promise<string> {
  for (const d of (Deno.env.get("PATH") ?? "").split(":")) {
    try {
      if ((await Deno.stat(path.join(d, tool))).isFile) return path.join(d, tool);
    } catch { /* not here */ }
  }
  throw new Error(`${tool} not on PATH`);
}

/** The directory of the host's CNI plugins (Debian's containernetworking-plugins). */
export async function cniDir(): Promise<string> {
  for (const d of ["/opt/cni/bin", "/usr/lib/cni"]) {
    try {
      await Deno.stat(path.join(d, "ptp"));
      return d;
    } catch { /* next */ }
  }
  throw new Error("no CNI plugins (containernetworking-plugins)");
}

/** The vendor artifacts of the test-built peers, by catalogue name (files built under `work`). */
export async function vendorArtifacts(work: string): Promise<Map<string, Uint8Array>> {
  const containerd = nodePeerDir("containerd");
  const cni = await cniDir();
  return new Map([
    [
      "containerd",
      await vendorTgz(work, "containerd", {
        "bin/containerd": path.join(containerd, "containerd"),
        "bin/containerd-shim-runc-v2": path.join(containerd, "containerd-shim-runc-v2"),
        "bin/ctr": path.join(containerd, "ctr"),
      }),
    ],
    ["runc", await Deno.readFile(await which("runc"))],
    ["kubelet", await Deno.readFile(path.join(nodePeerDir("kubelet"), "kubelet"))],
    [
      "crictl",
      await vendorTgz(work, "crictl", { crictl: path.join(nodePeerDir("crictl"), "crictl") }),
    ],
    [
      "coredns",
      await vendorTgz(work, "coredns", { coredns: path.join(nodePeerDir("coredns"), "coredns") }),
    ],
    [
      "cni-plugins",
      await vendorTgz(work, "cni-plugins", {
        "./ptp": path.join(cni, "ptp"),
        "./host-local": path.join(cni, "host-local"),
        "./loopback": path.join(cni, "loopback"),
      }),
    ],
  ]);
}

/** The file name a catalogue name is served as (raw programs keep their name). */
export function vendorFileName(name: string): string {
  return name === "runc" || name === "kubelet" || name === "deno"
    ? name
    : name === "containerd"
    ? `${name}.tar.gz`
    : `${name}.tgz`;
}

/** The files to serve (by `vendorFileName`) and their real digests (by catalogue name). */
export function servedArtifacts(artifacts: Map<string, Uint8Array>): {
  files: Map<string, Uint8Array>;
  sha: Map<string, string>;
} {
  const files = new Map<string, Uint8Array>();
  const sha = new Map<string, string>();
  for (const [name, bytes] of artifacts) {
    files.set(vendorFileName(name), bytes);
    sha.set(name, sha256(bytes));
  }
  return { files, sha };
}

/**
 * A catalogue of the host's architecture whose URLs are `url(file name)`; each version is
 * `versions[name]`, else `0.0.0-test`.
 */
export function catalogOf(
  sha: Map<string, string>,
  url: (file: string) => string,
  versions: Record<string, string> = {},
): { dependencies: CatalogEntry[] } {
  const dependencies: CatalogEntry[] = [...sha].map(([name, hex]) => ({
    name,
    version: versions[name] ?? "0.0.0-test",
    arch: HOST_ARCH,
    url: url(vendorFileName(name)),
    sha256: hex,
  }));
  return { dependencies };
}

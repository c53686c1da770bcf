/**
 * The programs of a local node: containerd (with its runc shim), runc, kubelet,
 * crictl, CoreDNS and the CNI plugins. From `--bin-dir` directories (locally built
 * ones), or from the pinned default catalogue through the digest-checked
 * dependency cache (downloaded once, verified on every reuse). Their versions
 * are read from the programs themselves: the generated configuration follows
 * them.
 */

import * as path from "node:path";
import { PodminError } from "../../core/kit/errors.ts";
import { DEFAULT_CATALOG } from "../setup/default_catalog.ts";
import type { Catalog } from "../setup/dependency_catalog.ts";
import { DependencyCache } from "../setup/dependency_cache.ts";

/** Resolved programs (host paths) and their versions. */
export interface NodeBinaries {
  containerd: string;
  shim: string;
  ctr?: string;
  kubelet: string;
  crictl: string;
  coredns: string;
  runc: string;
  /** Directory holding the ptp, host-local and loopback CNI plugins. */
  cniDir: string;
  containerdVersion: string;
  kubeletVersion: string;
  corednsVersion: string;
}

/** A program is missing or unusable. */
export class BinaryError extends PodminError {}

/** A pinned program could not be downloaded: `url` is the one that failed. */
export class PinnedDownloadError extends BinaryError {
  /** The catalogue entry's name, version and URL. */
  readonly pinned: { name: string; version: string; url: string };

  constructor(
    message: string,
    o: { name: string; version: string; url: string; hint?: string; cause?: unknown },
  ) {
    super(message, { hint: o.hint, cause: o.cause });
    this.pinned = { name: o.name, version: o.version, url: o.url };
  }
}

const CNI_PLUGINS = ["ptp", "host-local", "loopback"] as const;

async function executable(p: string): Promise<boolean> {
  try {
    const st = await Deno.stat(p);
    return st.isFile && ((st.mode ?? 0) & 0o111) !== 0;
  } catch {
    return false;
  }
}

async function find(name: string, dirs: readonly string[]): Promise<string | undefined> {
  for (const d of dirs) {
    if (await executable(path.join(d, name))) return path.join(d, name);
  }
}

async function versionOf(program: string, args: string[], pattern: RegExp): Promise<string> {
  const out = await new Deno.Command(program, { args, stdout: "piped", stderr: "piped" }).output();
  const text = new TextDecoder().decode(out.stdout) + new TextDecoder().decode(out.stderr);
  const m = pattern.exec(text);
  if (!m) {
    throw new BinaryError(`cannot read the version of ${program}: ${text.trim().slice(0, 200)}`);
  }
  return m[1];
}

/** Options of `resolveBinaries`. */
export interface ResolveBinariesOptions {
  /** Directories searched in order (then PATH for runc). */
  binDirs: readonly string[];
  /** Where the CNI plugins are; default /opt/cni/bin or /usr/lib/cni, whichever has ptp. */
  cniDir?: string;
}

/** Finds every program of the node in the given directories and reads its version. */
export async function resolveBinaries(o: ResolveBinariesOptions): Promise<NodeBinaries> {
  const pathDirs = (Deno.env.get("PATH") ?? "").split(":").filter(Boolean);
  const need = async (name: string, dirs: readonly string[]) => {
    const p = await find(name, dirs);
    if (!p) {
      throw new BinaryError(`no executable ${name} in ${dirs.join(", ") || "(no directory)"}`, {
        hint: "give --bin-dir DIR (repeatable) with containerd, containerd-shim-runc-v2, " +
          "kubelet, crictl, coredns and runc, or omit it to download the pinned versions",
      });
    }
    return p;
  };
  let cniDir = o.cniDir;
  if (!cniDir) {
    for (const d of ["/opt/cni/bin", "/usr/lib/cni"]) {
      if (await executable(path.join(d, "ptp"))) {
        cniDir = d;
        break;
      }
    }
  }
  for (const p of CNI_PLUGINS) {
    if (!cniDir || !(await executable(path.join(cniDir, p)))) {
      throw new BinaryError(`no CNI plugin ${p} in ${cniDir ?? "/opt/cni/bin or /usr/lib/cni"}`, {
        hint: "install the CNI plugins (Debian: containernetworking-plugins) or give --cni-bin-dir",
      });
    }
  }
  const containerd = await need("containerd", o.binDirs);
  const kubelet = await need("kubelet", o.binDirs);
  const coredns = await need("coredns", o.binDirs);
  return {
    containerd,
    shim: await need("containerd-shim-runc-v2", o.binDirs),
    ctr: await find("ctr", o.binDirs),
    kubelet,
    crictl: await need("crictl", o.binDirs),
    coredns,
    runc: await need("runc", [...o.binDirs, ...pathDirs]),
    cniDir: cniDir!,
    containerdVersion: await versionOf(containerd, ["--version"], /\bv?(\d+\.\d+\.\d+)\b/),
    kubeletVersion: await versionOf(kubelet, ["--version"], /Kubernetes v(\d+\.\d+\.\d+)/),
    corednsVersion: await versionOf(coredns, ["-version"], /CoreDNS-(\d+\.\d+\.\d+)/),
  };
}

const ARCH: Record<string, "amd64" | "arm64"> = { x86_64: "amd64", aarch64: "arm64" };

/**
 * Downloads (or reuses) the pinned node programs of this host's architecture
 * (default catalogue, or the one given) through the digest-checked cache and
 * unpacks them into `dir` (CNI plugins into `dir/cni`); returns `dir`.
 */
export async function fetchPinnedBinaries(
  o: { dir: string; cacheDir: string; log: (line: string) => void; catalog?: Catalog },
): Promise<string> {
  const arch = ARCH[Deno.build.arch];
  if (!arch) throw new BinaryError(`unsupported architecture ${Deno.build.arch}`);
  const cache = new DependencyCache({ dir: o.cacheDir, log: o.log });
  await Deno.mkdir(path.join(o.dir, "cni"), { recursive: true });
  for (const name of ["containerd", "runc", "kubelet", "crictl", "coredns", "cni-plugins"]) {
    const e = (o.catalog ?? DEFAULT_CATALOG).dependencies.find((d) =>
      d.name === name && d.arch === arch
    );
    if (!e) throw new BinaryError(`the catalogue pins no ${name} for ${arch}`);
    let file: string;
    try {
      file = (await cache.ensure({
        sha256: e.sha256,
        sha256Url: e.sha256Url,
        url: e.url,
        label: `${name} ${e.version}`,
      })).path;
    } catch (err) {
      throw new PinnedDownloadError(
        `cannot download ${name} ${e.version}: ${(err as Error).message}`,
        {
          name,
          version: e.version,
          url: e.url,
          hint: "without internet access, give --bin-dir DIR (repeatable) with locally built " +
            "programs (tests/peers/build_node_peers.sh builds the pinned versions from the Go " +
            "module proxy), or --dependency-catalog FILE with URLs this host reaches",
          cause: err,
        },
      );
    }
    const into = name === "cni-plugins" ? path.join(o.dir, "cni") : o.dir;
    if (e.url.endsWith(".tar.gz") || e.url.endsWith(".tgz")) {
      // containerd's archive keeps its programs under bin/.
      const strip = name === "containerd" ? ["--strip-components=1"] : [];
      const out = await new Deno.Command("tar", {
        args: ["-xzf", file, "-C", into, "--no-same-owner", ...strip],
        stderr: "piped",
      }).output();
      if (!out.success) {
        throw new BinaryError(`cannot unpack ${name}: ${new TextDecoder().decode(out.stderr)}`);
      }
    } else {
      await Deno.copyFile(file, path.join(into, name));
      await Deno.chmod(path.join(into, name), 0o755);
    }
  }
  return o.dir;
}

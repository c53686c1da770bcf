/**
 * What a local node changes in the files Podmin generates for a cloud node, and
 * why: only what this host cannot run as generated (no systemd as PID 1, a
 * cgroup v1 hierarchy, no CAP_SYS_RESOURCE, swap on). Each change is returned
 * with its reason so `podmin local up` prints it; nothing here reaches a cloud
 * node, whose files come from configure.sh unchanged.
 */

/** Facts about the host that decide the overrides. */
export interface HostFacts {
  /** PID 1 is systemd (cgroups can be delegated through it). */
  systemd: boolean;
  /** The unified cgroup v2 hierarchy is mounted at /sys/fs/cgroup. */
  cgroupV2: boolean;
  /** This process may lower OOM scores (CAP_SYS_RESOURCE). */
  sysResource: boolean;
  /** Swap is on. */
  swap: boolean;
}

/** One change to a generated file. */
export interface Override {
  /** Real path of the file changed. */
  file: string;
  /** What changed, as the operator reads it. */
  change: string;
  /** Why this host needs it. */
  reason: string;
}

const CAP_SYS_RESOURCE = 24n;

/** Reads the host facts from /proc and /sys. */
export async function readHostFacts(): Promise<HostFacts> {
  const read = (p: string) => Deno.readTextFile(p).catch(() => "");
  const comm = (await read("/proc/1/comm")).trim();
  const status = await read("/proc/self/status");
  const capEff = /^CapEff:\s*([0-9a-f]+)/m.exec(status)?.[1] ?? "0";
  const swaps = (await read("/proc/swaps")).trim().split("\n").slice(1).filter(Boolean);
  let cgroupV2 = false;
  try {
    await Deno.stat("/sys/fs/cgroup/cgroup.controllers");
    cgroupV2 = true;
  } catch { /* cgroup v1 or hybrid */ }
  return {
    systemd: comm === "systemd",
    cgroupV2,
    sysResource: ((BigInt(`0x${capEff}`) >> CAP_SYS_RESOURCE) & 1n) === 1n,
    swap: swaps.length > 0,
  };
}

const CONTAINERD = "/etc/containerd/config.toml";
const KUBELET = "/etc/podmin/kubelet/config.yaml";

/**
 * Applies the overrides the host needs to the generated files (real path →
 * content, changed in place) and returns them. Throws when a generated file no
 * longer has the line an override replaces, so a generator change cannot
 * silently drop an override.
 */
export function applyHostOverrides(files: Record<string, string>, host: HostFacts): Override[] {
  const applied: Override[] = [];
  const edit = (o: Override & { from: RegExp; to: string }) => {
    const text = files[o.file];
    if (text === undefined || !o.from.test(text)) {
      throw new Error(`cannot apply local override to ${o.file}: no match for ${o.from}`);
    }
    files[o.file] = text.replace(o.from, o.to);
    applied.push({ file: o.file, change: o.change, reason: o.reason });
  };
  if (!host.systemd) {
    const reason = "PID 1 is not systemd: cgroups are managed directly (cgroupfs)";
    edit({
      file: CONTAINERD,
      from: /SystemdCgroup = true/,
      to: "SystemdCgroup = false",
      change: "SystemdCgroup = false",
      reason,
    });
    edit({
      file: KUBELET,
      from: /^cgroupDriver: systemd$/m,
      to: "cgroupDriver: cgroupfs",
      change: "cgroupDriver: cgroupfs",
      reason,
    });
  }
  if (!host.sysResource) {
    edit({
      file: CONTAINERD,
      // The CRI runtime table: schema 3 (containerd 2.x) or schema 2 (1.x).
      from:
        /^\[plugins\.(?:'io\.containerd\.cri\.v1\.runtime'|"io\.containerd\.grpc\.v1\.cri")\]$/m,
      to: "$&\n  restrict_oom_score_adj = true",
      change: "restrict_oom_score_adj = true",
      reason: "no CAP_SYS_RESOURCE: containers cannot get a lower OOM score than containerd",
    });
  }
  if (!host.cgroupV2) {
    edit({
      file: KUBELET,
      from: /^kind: KubeletConfiguration$/m,
      to: "kind: KubeletConfiguration\nfailCgroupV1: false",
      change: "failCgroupV1: false",
      reason: "the host has cgroup v1 (kubelet >= 1.35 refuses it by default; nodes have v2)",
    });
  }
  if (host.swap) {
    edit({
      file: KUBELET,
      from: /^kind: KubeletConfiguration$/m,
      to: "kind: KubeletConfiguration\nfailSwapOn: false",
      change: "failSwapOn: false",
      reason: "swap is on (kubelet refuses to start with swap by default; nodes have none)",
    });
  }
  return applied;
}

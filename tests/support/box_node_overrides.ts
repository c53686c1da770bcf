/**
 * What a node machine of the harness changes in the node vmconfig makes, and why: only what a
 * container on this shared kernel, or a test without AWS's endpoints, cannot run as generated.
 * Each override is a file written into the machine before its first boot (systemd drop-ins beside
 * the product's units, which stay unchanged, and one unit), with its reason; the test prints them.
 */

import type { HostFacts } from "../../cli/local/host_overrides.ts";
import { VMCONFIG_ASSETS } from "../../vmconfig/assets.ts";

/** One file of the overrides. */
export interface NodeOverride {
  /** Real path inside the machine. */
  file: string;
  content: string;
  /** Permission bits (default 0644). */
  mode?: number;
  /** Why the machine needs it (what a real node has instead). */
  reason: string;
}

/** What the node overrides depend on. */
export interface NodeOverrideOptions {
  /** The host's facts (cli/local/host_overrides.ts `readHostFacts`). */
  host: HostFacts;
  /** Where the machine reaches S3 and SSM (moto through the VPC's host link). */
  awsEndpointUrl: string;
  /**
   * Run the agent's eBPF dataplane (default false: off). On, the machine shares the kernel's BPF
   * programs with the host, so no other test may count them while it runs (the suite runs test
   * files one at a time).
   */
  dataplane?: boolean;
}

const TUNABLES = `#!/bin/sh
# Podmin machine harness: kubelet sets vm.overcommit_memory=1, kernel.panic=10 and
# kernel.panic_on_oops=1 at start (and fails when it cannot). They are not namespaced: in this
# container they would be the host's. The machine sees private files with kubelet's values.
set -eu
dir=/run/podmin-box/sysctl
mkdir -p "$dir"
for kv in vm/overcommit_memory=1 kernel/panic=10 kernel/panic_on_oops=1; do
  key=\${kv%=*}
  file=$dir/$(echo "$key" | tr / .)
  echo "\${kv#*=}" >"$file"
  grep -q " /proc/sys/$key " /proc/self/mountinfo || mount --bind "$file" "/proc/sys/$key"
done
`;

const TUNABLES_UNIT = `# Podmin machine harness: see /etc/podmin-box/kernel-tunables.sh.
[Unit]
Description=Private kernel tunables for kubelet (podmin machine harness)
Before=kubelet.service

[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=/etc/podmin-box/kernel-tunables.sh

[Install]
WantedBy=multi-user.target
`;

const KUBELET_CONFIG = `#!/bin/sh
# Podmin machine harness: the generated kubelet configuration plus failCgroupV1: false (the same
# edit as podmin local's, cli/local/host_overrides.ts).
set -eu
mkdir -p /run/podmin-box
sed 's/^kind: KubeletConfiguration$/&\\nfailCgroupV1: false/' /etc/podmin/kubelet/config.yaml \\
  >/run/podmin-box/kubelet-config.yaml
grep -q '^failCgroupV1: false$' /run/podmin-box/kubelet-config.yaml
`;

const CONTAINERD_CONFIG = `#!/bin/sh
# Podmin machine harness: the generated containerd configuration plus restrict_oom_score_adj =
# true in the CRI runtime table (the same edit as podmin local's, cli/local/host_overrides.ts):
# without CAP_SYS_RESOURCE runc cannot give a Pod sandbox its lower OOM score and fails.
set -eu
mkdir -p /run/podmin-box
sed -E "s/^\\[plugins\\.('io\\.containerd\\.cri\\.v1\\.runtime'|\\"io\\.containerd\\.grpc\\.v1\\.cri\\")\\]$/&\\n  restrict_oom_score_adj = true/" \\
  /etc/containerd/config.toml >/run/podmin-box/containerd-config.toml
grep -q '^  restrict_oom_score_adj = true$' /run/podmin-box/containerd-config.toml
`;

/** podmin-agent.service's ExecStart line, as vmconfig installs it. */
function agentExecStart(): string {
  const line = /^ExecStart=.+$/m.exec(VMCONFIG_ASSETS["units/podmin-agent.service"])?.[0];
  if (!line) throw new Error("podmin-agent.service has no ExecStart line");
  return line;
}

/** The overrides a node machine needs on this host. */
export function nodeOverrides(o: NodeOverrideOptions): NodeOverride[] {
  const out: NodeOverride[] = [
    {
      file: "/etc/podmin-box/kernel-tunables.sh",
      content: TUNABLES,
      mode: 0o755,
      reason: "kubelet's kernel tunables are not namespaced (a VM has its own kernel)",
    },
    {
      file: "/etc/systemd/system/podmin-box-kernel-tunables.service",
      content: TUNABLES_UNIT,
      reason: "runs kernel-tunables.sh every boot, before kubelet",
    },
    {
      file: "/etc/systemd/system/podmin-agent.service.d/podmin-box.conf",
      content: `# Podmin machine harness.
[Service]
# On EC2 the SDK resolves S3's and SSM's regional names; here they are moto behind the VPC.
Environment=AWS_ENDPOINT_URL=${o.awsEndpointUrl}
${
        o.dataplane
          ? ""
          : `# The eBPF dataplane stays off: this machine shares the kernel with other tests (the dataplane
# test counts every podmin_* program) and has no Services to load it for.
ExecStart=
${agentExecStart()} --dataplane=off
`
      }`,
      reason: o.dataplane
        ? "AWS's endpoint names (moto here)"
        : "AWS's endpoint names (moto here); the dataplane off on a shared kernel",
    },
  ];
  const kubelet: string[] = [];
  if (!o.host.cgroupV2) {
    out.push({
      file: "/etc/podmin-box/kubelet-config.sh",
      content: KUBELET_CONFIG,
      mode: 0o755,
      reason: "the host has cgroup v1 (kubelet >= 1.35 refuses it by default; the AMI has v2)",
    }, {
      file: "/etc/podmin-box/kubelet.env",
      content: "KUBELET_CONFIG=/run/podmin-box/kubelet-config.yaml\n",
      reason: "kubelet reads that copy of its configuration",
    });
    kubelet.push(
      "EnvironmentFile=/etc/podmin-box/kubelet.env",
      "ExecStartPre=/etc/podmin-box/kubelet-config.sh",
    );
  }
  if (!o.host.sysResource) {
    out.push({
      file: "/etc/podmin-box/containerd-config.sh",
      content: CONTAINERD_CONFIG,
      mode: 0o755,
      reason: "the host has no CAP_SYS_RESOURCE: containers cannot get a lower OOM score",
    }, {
      file: "/etc/podmin-box/containerd.env",
      content: "CONTAINERD_CONFIG=/run/podmin-box/containerd-config.toml\n",
      reason: "containerd reads that copy of its configuration",
    }, {
      file: "/etc/systemd/system/containerd.service.d/podmin-box.conf",
      content: [
        "# Podmin machine harness: see /etc/podmin-box/containerd-config.sh.",
        "[Service]",
        "EnvironmentFile=/etc/podmin-box/containerd.env",
        "ExecStartPre=/etc/podmin-box/containerd-config.sh",
        "",
      ].join("\n"),
      reason: "containerd starts with that copy",
    });
  }
  out.push({
    file: "/etc/systemd/system/kubelet.service.d/podmin-box.conf",
    content: [
      "# Podmin machine harness.",
      "[Unit]",
      "Requires=podmin-box-kernel-tunables.service",
      "After=podmin-box-kernel-tunables.service",
      "[Service]",
      ...kubelet,
      "",
    ].join("\n"),
    reason: "kubelet starts after the private kernel tunables",
  });
  return out;
}

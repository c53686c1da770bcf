/**
 * What a node machine of the harness changes in the node vmconfig makes, and why: only what a
 * container on this shared kernel, or a test without AWS's endpoints, cannot run as generated.
 * Each override is a file written into the machine before its first boot (systemd drop-ins beside
 * the product's units, which stay unchanged, and one unit: enable `TUNABLES_UNIT`), with its
 * reason (box_overrides.ts); the test prints them.
 */

import type { HostFacts } from "../../cli/local/host_overrides.ts";
import { VMCONFIG_ASSETS } from "../../vmconfig/assets.ts";
import {
  type BoxOverride,
  privateTunables,
  requiresDropIn,
  TUNABLES_UNIT,
} from "./box_overrides.ts";

/** One file of the overrides. */
export type NodeOverride = BoxOverride;

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
    ...privateTunables({
      values: { "vm/overcommit_memory": "1", "kernel/panic": "10", "kernel/panic_on_oops": "1" },
      why: [
        "kubelet sets vm.overcommit_memory=1, kernel.panic=10 and",
        "kernel.panic_on_oops=1 at start (and fails when it cannot). They are not namespaced: in this",
        "container they would be the host's. The machine sees private files with kubelet's values.",
      ],
      before: ["kubelet.service"],
    }),
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
  out.push(
    requiresDropIn(
      "kubelet.service",
      [TUNABLES_UNIT],
      "kubelet starts after the private kernel tunables",
      kubelet,
    ),
  );
  return out;
}

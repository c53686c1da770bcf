/**
 * What a NAT64 machine of the harness changes in what the NAT kind's user-data and vmconfig make,
 * and why: only what a container on this shared kernel, or a test without AWS and without
 * Debian's mirror, cannot run as delivered. Each override is a file written into the machine
 * before its first boot (drop-ins beside the product's units, which stay unchanged, and harness
 * units: enable `NAT_BOX_UNITS`), with its reason (box_overrides.ts); the test prints them.
 *
 * The one thing the machine cannot have is Jool: its kernel module must be built for and loaded
 * into the running kernel, which the machine shares with the host. The machine loads no module
 * at all: kmod's modprobe sees the netfilter parts nat.sh needs as built in (when the running
 * kernel has them) and nothing else, so `modprobe jool` fails as on a VM without the module.
 */

import { gunzipSync } from "node:zlib";
import { USER_DATA_UNIT } from "./machine.ts";
import {
  type BoxOverride,
  privateTunables,
  requiresDropIn,
  TUNABLES_UNIT,
} from "./box_overrides.ts";

/** The harness unit that indexes the machine's kernel modules (depmod). */
export const MODULES_UNIT = "podmin-box-kernel-modules.service";

/** The harness units a NAT machine enables before its first boot. */
export const NAT_BOX_UNITS: readonly string[] = [TUNABLES_UNIT, MODULES_UNIT];

/** Where the apt-get stand-in records its calls (inside the machine). */
export const APT_GET_LOG = "/var/log/podmin-box/apt-get.log";

/** nat.sh's `modprobe` arguments before Jool: their path in a kernel tree, their Kconfig symbol. */
const NETFILTER_MODULES: Record<string, { ko: string; config: string }> = {
  nf_conntrack: { ko: "kernel/net/netfilter/nf_conntrack.ko", config: "CONFIG_NF_CONNTRACK" },
  nf_defrag_ipv4: {
    ko: "kernel/net/ipv4/netfilter/nf_defrag_ipv4.ko",
    config: "CONFIG_NF_DEFRAG_IPV4",
  },
  nf_defrag_ipv6: {
    ko: "kernel/net/ipv6/netfilter/nf_defrag_ipv6.ko",
    config: "CONFIG_NF_DEFRAG_IPV6",
  },
};

/** The running kernel, as the NAT overrides need it. */
export interface KernelFacts {
  /** `uname -r`. */
  release: string;
  /** The kernel loads modules at all (/proc/modules exists). */
  modules: boolean;
  /** Which of nat.sh's netfilter modules the running kernel has (built in or loaded). */
  netfilter: string[];
}

/** Reads the kernel facts from /proc and /sys. */
export async function readKernelFacts(): Promise<KernelFacts> {
  const exists = (p: string) => Deno.stat(p).then(() => true, () => false);
  const config = await Deno.readFile("/proc/config.gz")
    .then((b) => new TextDecoder().decode(gunzipSync(b)), () => "");
  const netfilter: string[] = [];
  for (const [name, m] of Object.entries(NETFILTER_MODULES)) {
    const builtIn = new RegExp(`^${m.config}=y$`, "m").test(config);
    if (builtIn || await exists(`/sys/module/${name}`)) netfilter.push(name);
  }
  return { release: Deno.osRelease(), modules: await exists("/proc/modules"), netfilter };
}

const APT_GET = `#!/bin/sh
# Podmin machine harness: stand-in for apt-get (configure.sh's APT_GET). It records each call and
# installs nothing: Debian's mirror is out of a test's reach, and jool-dkms could not give this
# kernel a module anyway (no headers for it in Debian; the machine shares the host's kernel).
set -eu
mkdir -p /var/log/podmin-box
echo "DEBIAN_FRONTEND=\${DEBIAN_FRONTEND:-} $*" >>${APT_GET_LOG}
`;

/** The overrides a NAT64 machine needs on this host. */
export function natOverrides(kernel: KernelFacts): BoxOverride[] {
  const missing = Object.keys(NETFILTER_MODULES).filter((m) => !kernel.netfilter.includes(m));
  if (missing.length) {
    throw new Error(`the host's kernel lacks ${missing.join(", ")}: nat.sh cannot run on it`);
  }
  const modules = `/usr/lib/modules/${kernel.release}`;
  return [
    ...privateTunables({
      values: { "net/netfilter/nf_conntrack_max": "" },
      why: [
        "nat.sh sets net.netfilter.nf_conntrack_max, which only the initial",
        "network namespace may set (a VM is that namespace; elsewhere it is read-only). The machine",
        "sees a private file, empty until nat.sh's sysctl writes it.",
      ],
      before: ["podmin-nat.service"],
    }),
    {
      file: `${modules}/modules.builtin`,
      content: kernel.netfilter.map((m) => `${NETFILTER_MODULES[m].ko}\n`).join(""),
      reason: `the machine loads no module into the shared kernel (this host's ${
        kernel.modules ? "modules are not in the machine" : "kernel loads none"
      }): nat.sh's netfilter parts, which the kernel has, listed as built in`,
    },
    {
      file: `/etc/systemd/system/${MODULES_UNIT}`,
      content: `# Podmin machine harness: kmod's indexes of ${modules}/modules.builtin.
[Unit]
Description=Kernel module indexes (podmin machine harness)
Before=podmin-nat.service

[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=/sbin/depmod ${kernel.release}

[Install]
WantedBy=multi-user.target
`,
      reason: "kmod's modprobe reads the indexes depmod makes of modules.builtin",
    },
    requiresDropIn(
      "podmin-nat.service",
      [TUNABLES_UNIT, MODULES_UNIT],
      "nat.sh starts after the private tunables and the module indexes",
    ),
    {
      file: "/etc/podmin-box/apt-get",
      content: APT_GET,
      mode: 0o755,
      reason:
        "Debian's mirror out of reach; records configure.sh's apt-get calls, installs nothing",
    },
    {
      file: `/etc/systemd/system/${USER_DATA_UNIT}.d/podmin-box.conf`,
      content: [
        "# Podmin machine harness.",
        "[Service]",
        "# EC2's API: the machine's IMDS emulator answers AttachNetworkInterface (and the VPC",
        "# hot-plugs the ENI), which moto cannot do to a machine.",
        "Environment=PODMIN_EC2_ENDPOINT=http://169.254.169.254",
        "Environment=APT_GET=/etc/podmin-box/apt-get",
        "",
      ].join("\n"),
      reason: "EC2's endpoint (the IMDS emulator answers the attach); the apt-get stand-in",
    },
  ];
}

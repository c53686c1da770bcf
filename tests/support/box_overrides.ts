/**
 * What every kind of machine of the harness may need changed on this host, and why: files written
 * into the machine before its first boot (drop-ins beside the product's units, which stay
 * unchanged, and harness units), each with its reason; the tests print them. The kinds' own
 * overrides: box_node_overrides.ts, box_nat_overrides.ts.
 */

import type { MachineFile } from "./machine.ts";

/** One file of the overrides. */
export interface BoxOverride extends MachineFile {
  /** Why the machine needs it (what a real instance has instead). */
  reason: string;
}

/** The harness unit that binds the private kernel tunables (enable it in the machine). */
export const TUNABLES_UNIT = "podmin-box-kernel-tunables.service";

/**
 * Kernel tunables that are not namespaced (in a machine they would be the shared kernel's, or
 * cannot be written at all): at every boot, before the units `before`, the machine gets a private
 * file bound over each `/proc/sys/<key>` holding `values[key]` (an empty value: nothing until the
 * machine writes it). `why`: the script's comment lines (who needs them, and why).
 */
export function privateTunables(o: {
  values: Record<string, string>;
  why: string[];
  before: string[];
}): BoxOverride[] {
  const entries = Object.entries(o.values).map(([k, v]) => `${k}=${v}`).join(" ");
  const comment = o.why.map((l, i) => `# ${i ? "" : "Podmin machine harness: "}${l}`);
  const script = `#!/bin/sh
${comment.join("\n")}
set -eu
dir=/run/podmin-box/sysctl
mkdir -p "$dir"
for kv in ${entries}; do
  key=\${kv%%=*}
  file=$dir/$(echo "$key" | tr / .)
  echo "\${kv#*=}" >"$file"
  grep -q " /proc/sys/$key " /proc/self/mountinfo || mount --bind "$file" "/proc/sys/$key"
done
`;
  const unit = `# Podmin machine harness: see /etc/podmin-box/kernel-tunables.sh.
[Unit]
Description=Private kernel tunables (podmin machine harness)
Before=${o.before.join(" ")}

[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=/etc/podmin-box/kernel-tunables.sh

[Install]
WantedBy=multi-user.target
`;
  return [
    {
      file: "/etc/podmin-box/kernel-tunables.sh",
      content: script,
      mode: 0o755,
      reason: `${Object.keys(o.values).join(", ")}: not namespaced (a VM has its own kernel)`,
    },
    {
      file: `/etc/systemd/system/${TUNABLES_UNIT}`,
      content: unit,
      reason: `binds the private tunables every boot, before ${o.before.join(", ")}`,
    },
  ];
}

/**
 * A drop-in for `unit` that needs the harness units `after` (started first, every boot), plus
 * `service` lines for its [Service] section.
 */
export function requiresDropIn(
  unit: string,
  after: string[],
  reason: string,
  service: string[] = [],
): BoxOverride {
  return {
    file: `/etc/systemd/system/${unit}.d/podmin-box.conf`,
    content: [
      "# Podmin machine harness.",
      "[Unit]",
      `Requires=${after.join(" ")}`,
      `After=${after.join(" ")}`,
      "[Service]",
      ...service,
      "",
    ].join("\n"),
    reason,
  };
}

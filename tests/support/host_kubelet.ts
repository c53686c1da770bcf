/**
 * Kubelets in this host's network namespace: kubelet's ports (10248, 10250) are fixed, so real
 * nodes on the host (`podmin local` in the node, rollout, demo tests and the node benchmarks) take
 * turns. A machine of the machine harness (tests/box) runs its kubelet in a network namespace of
 * its own and does not count.
 */

import * as path from "node:path";
import { waitFor } from "./programs.ts";

/** True while some kubelet runs in this host's network namespace (its process, or 127.0.0.1:10248 taken). */
export async function hostKubeletRunning(): Promise<boolean> {
  const ours = await Deno.readLink("/proc/self/ns/net");
  for await (const e of Deno.readDir("/proc")) {
    if (!/^\d+$/.test(e.name)) continue;
    const argv0 = (await Deno.readTextFile(`/proc/${e.name}/cmdline`).catch(() => ""))
      .split("\0")[0];
    if (path.basename(argv0) !== "kubelet") continue;
    if (await Deno.readLink(`/proc/${e.name}/ns/net`).catch(() => "") === ours) return true;
  }
  try {
    (await Deno.connect({ hostname: "127.0.0.1", port: 10248 })).close();
    return true;
  } catch {
    return false;
  }
}

/**
 * Waits while another kubelet (another test's podmin local) runs in this host's network namespace.
 * A test that restarts its kubelet leaves gaps: free means free for 10 s in a row.
 */
export async function noOtherHostKubelet(): Promise<void> {
  let freeSince: number | undefined;
  await waitFor("no other kubelet in this host's network namespace for 10 s", async () => {
    if (await hostKubeletRunning()) freeSince = undefined;
    else freeSince ??= Date.now();
    return freeSince !== undefined && Date.now() - freeSince >= 10_000;
  }, 30 * 60_000);
}

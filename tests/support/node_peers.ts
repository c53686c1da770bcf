/**
 * The node peers the real-node, Services end-to-end, DNS and boot tests run: kubelet, containerd,
 * crictl and CoreDNS at exactly the versions the default catalogue pins (pinned is tested). Their
 * directories under `$PODMIN_TEST_BIN/node/<name>-v<version>/` are derived from
 * `DEFAULT_CATALOG`, and `tests/peers/build_node_peers.sh` builds the same versions (it reads
 * them from this module when run as a script: `deno run --allow-read tests/support/node_peers.ts`
 * prints `KUBELET_VERSION=v1.36.3` and the other three as shell assignments).
 */

import * as path from "node:path";
import { DEFAULT_CATALOG } from "../../cli/setup/default_catalog.ts";

/** The node peers whose versions the catalogue pins and the tests build. */
export const NODE_PEERS = ["kubelet", "containerd", "crictl", "coredns"] as const;

/** One of `NODE_PEERS`. */
export type NodePeer = typeof NODE_PEERS[number];

/** The pinned version of a node peer (the amd64 pin; both architectures pin one version). */
export function pinnedVersion(peer: NodePeer): string {
  const versions = new Set(
    DEFAULT_CATALOG.dependencies.filter((d) => d.name === peer).map((d) => d.version),
  );
  if (versions.size !== 1) {
    throw new Error(`the default catalogue pins ${versions.size} versions of ${peer}, want 1`);
  }
  return [...versions][0];
}

/** `$PODMIN_TEST_BIN` (default /opt/podmin-test/bin), where tests/setup.sh builds the peers. */
export const TEST_BIN = Deno.env.get("PODMIN_TEST_BIN") ?? "/opt/podmin-test/bin";

/** The directory of a node peer's pinned build, e.g. `…/node/kubelet-v1.36.3`. */
export function nodePeerDir(peer: NodePeer): string {
  return path.join(TEST_BIN, "node", `${peer}-v${pinnedVersion(peer)}`);
}

/** The pinned build's program of a node peer (`…/kubelet-v1.36.3/kubelet`). */
export function nodePeerProgram(peer: NodePeer): string {
  return path.join(nodePeerDir(peer), peer);
}

/** The four pinned node peers' directories, for `podmin local up --bin-dir`. */
export const NODE_BIN_DIRS: readonly string[] = NODE_PEERS.map(nodePeerDir);

if (import.meta.main) {
  for (const peer of NODE_PEERS) {
    console.log(`${peer.toUpperCase()}_VERSION=v${pinnedVersion(peer)}`);
  }
}

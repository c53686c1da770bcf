/**
 * Pinned is tested: the kubelet, containerd, crictl and CoreDNS programs the node tests run are
 * exactly the versions the default catalogue pins for every node. The test asks each program
 * itself, so a build of another version under the pinned name fails it as well.
 */

import assert from "node:assert/strict";
import { resolveBinaries } from "../../cli/local/node_binaries.ts";
import {
  NODE_BIN_DIRS,
  NODE_PEERS,
  nodePeerDir,
  nodePeerProgram,
  pinnedVersion,
} from "../support/node_peers.ts";
import { testWith } from "../support/requirements.ts";

const files = NODE_PEERS.map((p) => new URL(`file://${nodePeerProgram(p)}`));

async function versionLine(program: string, args: string[]): Promise<string> {
  const out = await new Deno.Command(program, { args, stdout: "piped", stderr: "piped" }).output();
  const dec = new TextDecoder();
  return `${dec.decode(out.stdout)}${dec.decode(out.stderr)}`.trim();
}

testWith(
  "pinned versions: the node tests' kubelet, containerd, crictl and CoreDNS are the catalogue's pins",
  { files, tools: ["runc"] },
  async () => {
    // The versions the node tests' binaries report, read as `podmin local` reads them.
    const b = await resolveBinaries({ binDirs: [...NODE_BIN_DIRS] });
    assert.equal(b.kubeletVersion, pinnedVersion("kubelet"), `${b.kubelet} is not the pin`);
    assert.equal(b.containerdVersion, pinnedVersion("containerd"), `${b.containerd}`);
    assert.equal(b.corednsVersion, pinnedVersion("coredns"), `${b.coredns}`);
    assert.equal(b.kubelet, nodePeerProgram("kubelet"), "the node tests run the pinned build");
    const crictl = await versionLine(nodePeerProgram("crictl"), ["--version"]);
    assert.match(crictl, new RegExp(`\\bv${pinnedVersion("crictl").replaceAll(".", "\\.")}\\b`));
    assert.ok(b.crictl.startsWith(nodePeerDir("crictl")), b.crictl);
  },
);

/**
 * The node services' Go runtime settings (core/model/node_runtime_settings.ts): every systemd unit of
 * vmconfig that starts one sets them, and the pinned programs start with them (a malformed Go
 * setting stops a service at start: the programs run here with them).
 */

import assert from "node:assert/strict";
import {
  NODE_GO_ENV,
  NODE_GO_UNITS,
  nodeGoEnv,
  type NodeGoService,
} from "../../core/model/node_runtime_settings.ts";
import { VMCONFIG_ASSETS } from "../../vmconfig/assets.ts";
import { nodePeerProgram } from "../support/node_peers.ts";
import { testWith } from "../support/requirements.ts";

Deno.test("node Go runtime settings: each service's vmconfig unit sets them", () => {
  for (const [service, env] of Object.entries(NODE_GO_ENV)) {
    const unit = VMCONFIG_ASSETS[`units/${NODE_GO_UNITS[service as NodeGoService]}`];
    assert.ok(unit, `units/${NODE_GO_UNITS[service as NodeGoService]}`);
    assert.ok(Object.keys(env).length > 0, service);
    for (const [k, v] of Object.entries(env)) {
      assert.ok(unit.split("\n").includes(`Environment=${k}=${v}`), `${service}: ${k}=${v}`);
    }
  }
  assert.deepEqual(nodeGoEnv("kubelet"), NODE_GO_ENV.kubelet);
  assert.deepEqual(nodeGoEnv("coredns"), {});
  // CoreDNS has none (measured no change): its unit sets no Go setting either.
  assert.ok(!/^Environment=GO/m.test(VMCONFIG_ASSETS["units/podmin-coredns.service"]));
});

const PROGRAMS: Record<NodeGoService, { program: string; version: string[] }> = {
  kubelet: { program: nodePeerProgram("kubelet"), version: ["--version"] },
  containerd: { program: nodePeerProgram("containerd"), version: ["--version"] },
};

testWith(
  "node Go runtime settings: the pinned kubelet and containerd start with them (and refuse a malformed GOMEMLIMIT)",
  { files: Object.values(PROGRAMS).map((p) => new URL(`file://${p.program}`)) },
  async () => {
    for (const [service, { program, version }] of Object.entries(PROGRAMS)) {
      const run = (env: Record<string, string>) =>
        new Deno.Command(program, { args: version, env, stdout: "piped", stderr: "piped" })
          .output();
      const ok = await run({ ...NODE_GO_ENV[service as NodeGoService] });
      assert.equal(ok.code, 0, `${service}: ${new TextDecoder().decode(ok.stderr)}`);
      const bad = await run({ GOMEMLIMIT: "64MB-typo" });
      assert.notEqual(bad.code, 0, `${service} accepted a malformed GOMEMLIMIT`);
    }
  },
);

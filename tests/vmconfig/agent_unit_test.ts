/** The podmin-agent systemd unit's command line is one the agent accepts. */

import assert from "node:assert/strict";
import { createBucket } from "../../core/store_url.ts";
import { VMCONFIG_ASSETS } from "../../vmconfig/assets.ts";
import { agent, nodeStateDirArgs } from "../support/programs.ts";

Deno.test("vmconfig: podmin-agent.service's ExecStart runs one converging pass of the real agent", async () => {
  const unit = VMCONFIG_ASSETS["units/podmin-agent.service"];
  const exec = /^ExecStart=(\S+) (.+)$/m.exec(unit);
  assert.ok(exec, "ExecStart present");
  assert.equal(exec[1], "/usr/local/bin/podmin-agent");
  const tmp = await Deno.makeTempDir({ prefix: "podmin-unit-" });
  try {
    const env: Record<string, string> = {
      PODMIN_BUCKET: `file://${tmp}/bucket`,
      PODMIN_REGION: "us-east-1",
      PODMIN_CLUSTER: "prod",
      PODMIN_NODEGROUP: "workers",
      PODMIN_IPV6_PREFIX: "2600:1f18:1:2:a::/80",
      PODMIN_MANIFEST_DIR: `${tmp}/manifests`,
      AGENT_INTERVAL: "2s",
      AGENT_SECRETS_INTERVAL: "60s",
      PODMIN_REGISTRY_LISTEN: "127.0.0.1:0",
    };
    // systemd expands ${VAR} from the EnvironmentFile; do the same.
    const args = exec[2].split(" ").map((a) =>
      a.replace(/\$\{([A-Z0-9_]+)\}/g, (_, k: string) => {
        assert.ok(k in env, `unit uses ${k}, which the test must provide`);
        return env[k];
      })
    );
    await createBucket(env.PODMIN_BUCKET);
    const r = await agent([
      ...args,
      "--once",
      ...nodeStateDirArgs(tmp),
    ]);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /converged: 0 deployment\(s\) for NodeGroup workers/);
  } finally {
    await Deno.remove(tmp, { recursive: true });
  }
});

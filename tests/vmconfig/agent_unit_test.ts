/** The podmin-agent systemd unit's command line is one the agent accepts. */

import assert from "node:assert/strict";
import { createBucket } from "../../core/store/store_url.ts";
import { VMCONFIG_ASSETS } from "../../vmconfig/assets.ts";
import { agent, nodeStateDirArgs } from "../support/programs.ts";
import { systemdArgs } from "../support/systemd_args.ts";

for (
  const [what, caArgs, telemetryArgs] of [
    ["without --workload-ca-publish", "", ""],
    ["with --workload-ca-publish", "--workload-ca-publish=s3://trust-bundles/podmin/prod.pem", ""],
    [
      "with telemetry",
      "",
      "--fluent-bit-identity --otel-ca=s3://org-cas/otel/ca.pem",
    ],
  ]
) {
  Deno.test(`vmconfig: podmin-agent.service's ExecStart runs one converging pass of the real agent (${what})`, async () => {
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
        PODMIN_NODE_ID: "i-0123456789abcdef0",
        PODMIN_NODE_ADDRESS: "2600:1f18:1:2::10",
        PODMIN_MESH_LISTEN: "[::]:7443",
        PODMIN_DNS_DIR: `${tmp}/dns`,
        PODMIN_KUBELET_VERSION: "1.36.3",
        PODMIN_AGENT_CA_ARGS: caArgs,
        PODMIN_AGENT_TELEMETRY_ARGS: telemetryArgs,
      };
      const args = systemdArgs(exec[2], env);
      assert.equal(args.includes("--node-id=i-0123456789abcdef0"), true);
      // Every node joins the endpoint mesh on its own address and writes the Service zone.
      for (
        const a of [
          "--node-address=2600:1f18:1:2::10",
          "--mesh-listen=[::]:7443",
          "--mesh-advertise=2600:1f18:1:2::10",
          "--cluster-ca=ssm",
          `--dns-dir=${tmp}/dns`,
          "--kubelet-version=1.36.3",
        ]
      ) assert.ok(args.includes(a), a);
      assert.equal(args.some((a) => a.startsWith("--workload-ca-publish")), caArgs !== "");
      assert.equal(args.includes("--fluent-bit-identity"), telemetryArgs !== "");
      await createBucket(env.PODMIN_BUCKET);
      const r = await agent([...args, "--once", ...nodeStateDirArgs(tmp)]);
      assert.equal(r.code, 0, r.stderr);
      assert.match(r.stdout, /converged: 0 deployment\(s\) for NodeGroup workers/);
    } finally {
      await Deno.remove(tmp, { recursive: true });
    }
  });
}

/**
 * The baseline Pod security level end to end: `apply` refuses a Deployment that reaches the node
 * unless it opts out with `spec.podSecurity: privileged`, and then prints what the opt-out grants;
 * the agent refuses such a spec too when it was written into the bucket without the CLI.
 */

import assert from "node:assert/strict";
import { readStatus } from "../../agent/deployments/status.ts";
import { DEPLOYMENT_INDEX } from "../../core/bucket/bucket_layout.ts";
import {
  type DeploymentEntry,
  emptyDeploymentIndex,
  serializeDeploymentIndex,
} from "../../core/bucket/deployment_index.ts";
import { createFsBucket, FsStore } from "../../core/store/fs_store.ts";
import { type Deployment, parseResource } from "../../core/model/resources.ts";
import { encodeSpec, writeSpec } from "../../core/bucket/spec_objects.ts";
import { createBucket } from "../../core/store/store_url.ts";
import { agent, nodeAgentArgs, podmin } from "../support/programs.ts";

const yaml = (optOut: boolean) =>
  `apiVersion: podmin.dev/v1
kind: Deployment
metadata: {name: node-tool}
spec:
  nodeGroup: default
${optOut ? "  podSecurity: privileged\n" : ""}  template:
    spec:
      hostNetwork: true
      volumes: [{name: root, hostPath: {path: /}}]
      containers:
        - name: tool
          image: registry.podmin.internal/apps/tool:1
          securityContext: {privileged: true}
          volumeMounts: [{name: root, mountPath: /host}]
`;

Deno.test("pod security: apply refuses a node-reaching Deployment unless it opts out, then says what it grants", async () => {
  const tmp = await Deno.makeTempDir({ prefix: "podmin-pod-security-" });
  try {
    const bucket = `file://${tmp}/bucket`;
    await createBucket(bucket);
    await Deno.writeTextFile(`${tmp}/plain.yaml`, yaml(false));
    const refused = await podmin(["--bucket", bucket, "apply", "-f", `${tmp}/plain.yaml`]);
    assert.notEqual(refused.code, 0, refused.stdout);
    assert.match(refused.stderr, /hostNetwork: grants the node's network namespace/);
    assert.match(refused.stderr, /set spec\.podSecurity: privileged to opt out/);

    await Deno.writeTextFile(`${tmp}/opt-out.yaml`, yaml(true));
    const applied = await podmin(["--bucket", bucket, "apply", "-f", `${tmp}/opt-out.yaml`]);
    assert.equal(applied.code, 0, applied.stderr);
    assert.match(
      applied.stderr,
      /deployment default\/node-tool: spec\.podSecurity: privileged opts out of the baseline Pod security level; it grants:/,
    );
    assert.match(applied.stderr, /^ {2}hostNetwork: .*instance credentials$/m);
    assert.match(applied.stderr, /^ {2}volumes\[0\]\.hostPath: the node's files under \/$/m);
    assert.match(applied.stderr, /containers\[0\]\.securityContext\.privileged: a privileged/);
  } finally {
    await Deno.remove(tmp, { recursive: true });
  }
});

/** The normalized Deployment `parseResource` makes of the node-reaching template, opted out or not. */
function nodeReaching(o: { name: string; optOut: boolean }): Deployment {
  // parseResource refuses the baseline-violating form (as the CLI does); parse the opted-out one
  // and drop the opt-out to get the spec a writer that bypasses the CLI would store.
  const parsed = parseResource({
    apiVersion: "podmin.dev/v1",
    kind: "Deployment",
    metadata: { name: o.name },
    spec: {
      nodeGroup: "workers",
      podSecurity: "privileged",
      template: {
        spec: {
          hostNetwork: true,
          containers: [{
            name: "tool",
            image: "registry.podmin.internal/apps/tool:1",
            securityContext: { privileged: true },
          }],
        },
      },
    },
  }) as Deployment;
  if (o.optOut) return parsed;
  const { podSecurity: _, ...spec } = parsed.spec;
  return { ...parsed, spec };
}

Deno.test("pod security: the agent refuses a baseline-violating spec written straight into the bucket", async () => {
  const tmp = await Deno.makeTempDir({ prefix: "podmin-pod-security-agent-" });
  try {
    const store = new FsStore({ root: `${tmp}/bucket`, durable: false });
    await createFsBucket(`${tmp}/bucket`);
    // Written with the store, not the CLI: the spec objects and the index entries that name them.
    const deployments: DeploymentEntry[] = [];
    for (
      const d of [
        nodeReaching({ name: "rogue", optOut: false }),
        nodeReaching({ name: "tool", optOut: true }),
      ]
    ) {
      const spec = encodeSpec(d);
      await writeSpec(store, spec);
      deployments.push({
        namespace: "default",
        name: d.metadata.name,
        nodeGroup: "workers",
        spec: spec.ref,
      });
    }
    await store.put(
      DEPLOYMENT_INDEX,
      serializeDeploymentIndex({ ...emptyDeploymentIndex(), generation: 1, deployments }),
    );

    const run = await agent([
      ...nodeAgentArgs({ bucket: `file://${tmp}/bucket`, nodeGroup: "workers", base: tmp }),
      "--once",
    ]);
    const status = await readStatus(`${tmp}/state`);
    assert.ok(status, "the agent wrote its status");
    // The baseline-violating spec gets no static Pod manifest...
    await assert.rejects(
      Deno.stat(`${tmp}/manifests/podmin_default_rogue.json`),
      Deno.errors.NotFound,
      "a static Pod manifest was written for a baseline-violating spec",
    );
    // ...while the opted-out one, written the same way, does (the direct writing path works).
    await Deno.stat(`${tmp}/manifests/podmin_default_tool.json`);
    assert.deepEqual(status.written, ["podmin_default_tool.json"]);
    // The status says why.
    assert.equal(run.code, 1, `an agent that did not converge exits 1\n${run.stderr}`);
    assert.equal(status.converged, false);
    assert.deepEqual(status.pending.map((p) => p.deployment), ["default/rogue"]);
    const why = status.errors.join("\n");
    assert.match(
      why,
      /default\/rogue: .*spec\.template\.spec\.hostNetwork: grants the node's network namespace.*not allowed at the baseline Pod security level/,
    );
    assert.match(why, /spec\.template\.spec\.containers\[0\]\.securityContext\.privileged/);
    assert.match(why, /set spec\.podSecurity: privileged to opt out/);
  } finally {
    await Deno.remove(tmp, { recursive: true });
  }
});

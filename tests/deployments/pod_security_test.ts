/**
 * The baseline Pod security level end to end: `apply` refuses a Deployment that reaches the node
 * unless it opts out with `spec.podSecurity: privileged`, and then prints what the opt-out grants.
 */

import assert from "node:assert/strict";
import { createBucket } from "../../core/store_url.ts";
import { podmin } from "../support/programs.ts";

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

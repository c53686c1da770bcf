import assert from "node:assert/strict";
import { ValidationError } from "../kit/errors.ts";
import { baselineViolations } from "./pod_security.ts";
import { parseResource } from "./resources.ts";

const risky = {
  hostNetwork: true,
  hostPID: true,
  volumes: [{ name: "root", hostPath: { path: "/" } }],
  containers: [{
    name: "c",
    image: "i",
    securityContext: { privileged: true, capabilities: { add: ["NET_BIND_SERVICE", "SYS_ADMIN"] } },
    ports: [{ containerPort: 80, hostPort: 80 }],
    volumeMounts: [{ name: "root", mountPath: "/host" }],
  }],
};

const deployment = (spec: Record<string, unknown>) => ({
  apiVersion: "podmin.dev/v1",
  kind: "Deployment",
  metadata: { name: "node-tool" },
  spec: { nodeGroup: "w", template: { spec: risky }, ...spec },
});

Deno.test("pod security: the baseline refuses host namespaces, privileged, hostPath, hostPort, extra capabilities", () => {
  assert.deepEqual(baselineViolations(risky).map((v) => v.field), [
    "hostNetwork",
    "hostPID",
    "volumes[0].hostPath",
    "containers[0].securityContext.privileged",
    "containers[0].securityContext.capabilities.add",
    "containers[0].ports[0].hostPort",
  ]);
  assert.deepEqual(
    baselineViolations({ containers: [{ name: "c", image: "i", securityContext: {} }] }),
    [],
  );
  assert.throws(
    () => parseResource(deployment({})),
    (err: Error) =>
      err instanceof ValidationError &&
      /spec\.template\.spec\.hostNetwork: grants the node's network namespace.*instance credentials: not allowed at the baseline Pod security level \(set spec\.podSecurity: privileged/
        .test(err.message) &&
      /containers\[0\]\.securityContext\.privileged/.test(err.message) &&
      /volumes\[0\]\.hostPath: grants the node's files under \//.test(err.message) &&
      /the capability SYS_ADMIN/.test(err.message) && !/NET_BIND_SERVICE/.test(err.message),
  );
  assert.throws(() => parseResource(deployment({ podSecurity: "root" })), /spec\.podSecurity/);
});

Deno.test("pod security: spec.podSecurity: privileged opts out, and only it is stored", () => {
  const d = parseResource(deployment({ podSecurity: "privileged" }));
  assert.ok(d.kind === "Deployment");
  assert.equal(d.spec.podSecurity, "privileged");
  const plain = parseResource(
    deployment({ template: { spec: { containers: [{ name: "c", image: "i" }] } } }),
  );
  assert.ok(plain.kind === "Deployment");
  assert.equal("podSecurity" in plain.spec, false); // the default is not written: digests stay
});

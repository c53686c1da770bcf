import assert from "node:assert/strict";
import {
  emptyDeploymentIndex,
  parseDeploymentIndex,
  serializeDeploymentIndex,
} from "./deployment_index.ts";

const enc = (v: unknown) => new TextEncoder().encode(typeof v === "string" ? v : JSON.stringify(v));
const entry = {
  namespace: "default",
  name: "web",
  nodeGroup: "workers",
  spec: `sha256:${"b".repeat(64)}`,
};

Deno.test("deployment index: round-trips and sorts entries", () => {
  const index = emptyDeploymentIndex();
  index.deployments.push({ ...entry, name: "z" }, entry);
  const back = parseDeploymentIndex(serializeDeploymentIndex(index));
  assert.deepEqual(back.deployments.map((e) => e.name), ["web", "z"]);
});

Deno.test("deployment index: untrusted input is rejected with a reason", () => {
  const base = { apiVersion: "podmin.dev/v1", kind: "DeploymentIndex", generation: 1 };
  const cases: [unknown, RegExp][] = [
    ['{"apiVersion": "podmin.dev/v1", "kind": "Deploy', /not valid JSON/],
    [{ ...base, apiVersion: "podmin.dev/v9", deployments: [] }, /unsupported apiVersion/],
    [{ ...base, generation: -1, deployments: [] }, /generation/],
    [{ ...base, deployments: [{ ...entry, name: "../../etc" }] }, /name invalid/],
    [{ ...base, deployments: [{ ...entry, spec: "sha256:xyz" }] }, /spec must be/],
    [{ ...base, deployments: [entry, entry] }, /duplicate deployment/],
  ];
  for (const [doc, re] of cases) assert.throws(() => parseDeploymentIndex(enc(doc)), re);
});

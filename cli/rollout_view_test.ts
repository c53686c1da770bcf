import assert from "node:assert/strict";
import type { NodeDeployment, NodeRecord } from "../core/bucket/node_record.ts";
import { rolloutView } from "./rollout_view.ts";

const NEW = `sha256:${"1".repeat(64)}`;
const OLD = `sha256:${"0".repeat(64)}`;
const NOW = Date.parse("2026-12-01T00:10:00Z");
const entry = { namespace: "default", name: "web", nodeGroup: "workers", spec: NEW };
const record = (
  nodeId: string,
  d: Partial<NodeDeployment> | undefined,
  o: Partial<NodeRecord> = {},
): NodeRecord => ({
  apiVersion: "podmin.dev/v1",
  kind: "NodeRecord",
  nodeGroup: "workers",
  nodeId,
  address: "2600::1",
  podPrefix: "2600::/80",
  agentVersion: "0",
  startedAt: "2026-12-01T00:00:00Z",
  heartbeat: "2026-12-01T00:09:00Z",
  converged: true,
  deployments: d ? [{ namespace: "default", name: "web", ...d }] : [],
  ...o,
});

Deno.test("rollout view: each node's state, with kubelet's reason; stale and other groups left out", () => {
  const view = rolloutView(entry, [
    record("n1", { spec: NEW, ready: true }),
    record("n2", { spec: NEW, ready: true, rollout: { phase: "surging", from: OLD } }),
    record("n3", {
      spec: NEW,
      ready: true,
      rollout: { phase: "failed", from: OLD, reason: "web: CrashLoopBackOff" },
    }),
    record("n4", { spec: OLD, ready: true }),
    record("n5", { pending: "declared values not fetched yet" }),
    record("n6", undefined),
    record("n7", { spec: NEW }, { heartbeat: "2026-11-30T00:00:00Z" }),
    record("n8", { spec: NEW }, { nodeGroup: "edge" }),
  ], NOW);
  assert.deepEqual(view.nodes.map((n) => `${n.nodeId} ${n.state}`), [
    "n1 new",
    "n2 surging",
    "n3 failed",
    "n4 old",
    "n5 pending",
    "n6 old",
  ]);
  assert.equal(view.nodes[2].reason, "web: CrashLoopBackOff");
  assert.equal(view.upToDate, 1);
  assert.equal(view.available, 4);
  assert.equal(view.failed, true);
  assert.equal(view.complete, false);
});

Deno.test("rollout view: complete when every live node runs the spec alone and Ready", () => {
  const done = rolloutView(entry, [
    record("n1", { spec: NEW, ready: true }),
    record("n2", { spec: NEW }), // no discovery: readiness unknown
  ], NOW);
  assert.equal(done.complete, true);
  assert.equal(rolloutView(entry, [], NOW).complete, false, "no node reports: not complete");
  const notReady = rolloutView(entry, [record("n1", { spec: NEW, ready: false })], NOW);
  assert.equal(notReady.complete, false);
});

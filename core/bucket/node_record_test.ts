import assert from "node:assert/strict";
import {
  CONVERGED_RECORD_SPREAD_MS,
  CONVERGED_RECORDS_PER_S,
  convergedRecordSpreadMs,
  isStale,
  type NodeRecord,
  nodeRecordKey,
  parseNodeRecord,
  serializeNodeRecord,
  STALE_AFTER_MS,
} from "./node_record.ts";

const record: NodeRecord = {
  apiVersion: "podmin.dev/v1",
  kind: "NodeRecord",
  nodeGroup: "workers",
  nodeId: "i-0abc",
  address: "2600:1f18::10",
  podPrefix: "2600:1f18:0:1:abcd::/80",
  agentVersion: "0.1.0",
  startedAt: "2026-12-01T00:00:00.000Z",
  heartbeat: "2026-12-01T00:01:00.000Z",
  indexGeneration: 7,
  converged: false,
  deployments: [
    { namespace: "default", name: "web", spec: `sha256:${"a".repeat(64)}` },
    { namespace: "default", name: "api", pending: "no valid workload certificate yet" },
    {
      namespace: "default",
      name: "db",
      spec: `sha256:${"b".repeat(64)}`,
      rollout: {
        phase: "failed",
        from: `sha256:${"c".repeat(64)}`,
        reason: "not Ready for 5 s within 600 s: db: CrashLoopBackOff",
      },
    },
  ],
};

Deno.test("node records round-trip and are checked as untrusted input", () => {
  const key = nodeRecordKey(record);
  assert.equal(key, "dns/nodes/workers/i-0abc.json");
  assert.deepEqual(parseNodeRecord(serializeNodeRecord(record), key), record);
  const enc = (o: unknown) => new TextEncoder().encode(JSON.stringify(o));
  assert.throws(
    () => parseNodeRecord(enc(record), "dns/nodes/workers/i-other.json"),
    /names another node/,
  );
  assert.throws(() => parseNodeRecord(enc({ ...record, nodeId: "../x" }), key), /node id/);
  assert.throws(
    () =>
      parseNodeRecord(
        enc({ ...record, deployments: [{ namespace: "default", name: "web", spec: "x" }] }),
        key,
      ),
    /deployments\[0\]\.spec/,
  );
  assert.throws(
    () => parseNodeRecord(enc({ ...record, heartbeat: "yesterday" }), key),
    /heartbeat/,
  );
  assert.throws(() => parseNodeRecord(new TextEncoder().encode("{"), key), /not JSON/);
});

Deno.test("a record is stale after three missed heartbeats", () => {
  const beat = Date.parse(record.heartbeat);
  assert.equal(isStale(record, beat + STALE_AFTER_MS - 1), false);
  assert.equal(isStale(record, beat + STALE_AFTER_MS + 1), true);
});

Deno.test("node record: a problem is kept as one bounded line of printable text", () => {
  const key = "dns/nodes/workers/i-0abc.json";
  const record = {
    apiVersion: "podmin.dev/v1",
    kind: "NodeRecord",
    nodeGroup: "workers",
    nodeId: "i-0abc",
    address: "",
    podPrefix: "",
    agentVersion: "0",
    startedAt: "2026-01-01T00:00:00Z",
    heartbeat: "2026-01-01T00:00:00Z",
    converged: true,
    deployments: [],
    problem: `kubelet 1.35.1\n\x1b[31mhas no\x07 Pods API${"x".repeat(1000)}`,
  };
  const parsed = parseNodeRecord(new TextEncoder().encode(JSON.stringify(record)), key);
  assert.ok(parsed.problem!.startsWith("kubelet 1.35.1 [31mhas no Pods API"), parsed.problem ?? "");
  assert.equal(parsed.problem!.length, 512);
  const { problem: _, ...healthy } = record;
  const none = parseNodeRecord(new TextEncoder().encode(JSON.stringify(healthy)), key);
  assert.equal("problem" in none, false);
});

Deno.test("node record: a Deployment's rollout is checked as untrusted input", () => {
  const key = nodeRecordKey(record);
  const enc = (o: unknown) => new TextEncoder().encode(JSON.stringify(o));
  const withRollout = (rollout: unknown) => ({
    ...record,
    deployments: [{ namespace: "default", name: "db", rollout }],
  });
  assert.throws(() => parseNodeRecord(enc(withRollout({ phase: "done" })), key), /phase must be/);
  assert.throws(
    () => parseNodeRecord(enc(withRollout({ phase: "surging", from: "x" })), key),
    /rollout\.from must be sha256/,
  );
  const parsed = parseNodeRecord(enc(withRollout({ phase: "failed", reason: "a\nb\x1b" })), key);
  assert.equal(parsed.deployments[0].rollout?.reason, "a b ");
});

Deno.test("node record: rewrites after a change are spread so the cluster writes at a bounded rate", () => {
  assert.equal(convergedRecordSpreadMs(), CONVERGED_RECORD_SPREAD_MS, "size unknown: the minimum");
  assert.equal(convergedRecordSpreadMs(12), CONVERGED_RECORD_SPREAD_MS);
  for (const n of [1_000, 10_000]) {
    const spreadS = convergedRecordSpreadMs(n) / 1000;
    assert.ok(n / spreadS <= CONVERGED_RECORDS_PER_S, `${n} nodes: ${n / spreadS} records/s`);
  }
  assert.equal(convergedRecordSpreadMs(Number.NaN), CONVERGED_RECORD_SPREAD_MS);
});

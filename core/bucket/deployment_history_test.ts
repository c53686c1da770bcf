import assert from "node:assert/strict";
import { FsStore } from "../store/fs_store.ts";
import { deploymentHistoryKey } from "./bucket_layout.ts";
import {
  HISTORY_LIMIT,
  parseDeploymentHistory,
  readDeploymentHistory,
  recordRevision,
} from "./deployment_history.ts";

const ref = { namespace: "default", name: "web" };
const spec = (n: number) => `sha256:${n.toString(16).padStart(64, "0")}`;

Deno.test("history: revisions count up, a repeated spec is no new revision, the oldest go", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const store = new FsStore({ root: dir, durable: false });
    assert.deepEqual((await readDeploymentHistory(store, ref)).revisions, []);
    assert.equal(await recordRevision({ store, ...ref, spec: spec(1) }), 1);
    assert.equal(await recordRevision({ store, ...ref, spec: spec(1) }), 1);
    assert.equal(await recordRevision({ store, ...ref, spec: spec(2) }), 2);
    // Back to an earlier spec (an undo) is a new revision: numbers are never reused.
    assert.equal(await recordRevision({ store, ...ref, spec: spec(1) }), 3);
    for (let i = 4; i <= 14; i++) await recordRevision({ store, ...ref, spec: spec(i) });
    const h = await readDeploymentHistory(store, ref);
    assert.equal(h.revisions.length, HISTORY_LIMIT);
    assert.equal(h.revisions[0].revision, 5);
    assert.equal(h.revisions.at(-1)?.spec, spec(14));
    assert.equal(deploymentHistoryKey("default", "web"), "deployments/history/default/web.json");
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("history: read as untrusted input", () => {
  const enc = (o: unknown) => new TextEncoder().encode(JSON.stringify(o));
  const doc = {
    apiVersion: "podmin.dev/v1",
    kind: "DeploymentHistory",
    ...ref,
    revisions: [{ revision: 2, spec: spec(1), appliedAt: "2026-12-01T00:00:00Z" }],
  };
  assert.equal(parseDeploymentHistory(enc(doc), ref).revisions.length, 1);
  assert.throws(() => parseDeploymentHistory(enc(doc), { ...ref, name: "api" }), /another/);
  const twice = { ...doc, revisions: [...doc.revisions, ...doc.revisions] };
  assert.throws(() => parseDeploymentHistory(enc(twice), ref), /above the one before/);
  const badSpec = { ...doc, revisions: [{ ...doc.revisions[0], spec: "../x" }] };
  assert.throws(() => parseDeploymentHistory(enc(badSpec), ref), /sha256/);
  assert.throws(() => parseDeploymentHistory(new Uint8Array([0xff]), ref), /not valid JSON/);
});

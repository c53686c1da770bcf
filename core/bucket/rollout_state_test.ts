import assert from "node:assert/strict";
import {
  type AdmissionRequest,
  emptyRolloutState,
  haltRollout,
  parseRolloutState,
  releaseAdmission,
  requestAdmission,
  rolloutStateObject,
  setPaused,
} from "./rollout_state.ts";

const ref = { namespace: "default", name: "web" };
const S1 = `sha256:${"1".repeat(64)}`;
const S2 = `sha256:${"2".repeat(64)}`;
const req = (node: string, o: Partial<AdmissionRequest> = {}): AdmissionRequest => ({
  node,
  spec: S2,
  from: S1,
  generation: 2,
  maxUnavailable: 1,
  nonce: `${node.length.toString(16)}abcdef01`,
  expired: new Set(),
  at: "2026-01-01T00:00:00.000Z",
  ...o,
});

Deno.test("rollout state: admissions stay within the budget; release frees a slot", () => {
  let s = emptyRolloutState(ref);
  const a = requestAdmission(s, req("a", { nonce: "aaaaaaaa" }));
  assert.equal(a.verdict, "admitted");
  s = a.state!;
  assert.equal(s.spec, S2);
  assert.equal(s.from, S1);
  const b = requestAdmission(s, req("b", { nonce: "bbbbbbbb" }));
  assert.equal(b.verdict, "waiting");
  s = b.state!; // registered
  assert.deepEqual(s.nodes, ["a", "b"]);
  assert.equal(requestAdmission(s, req("b", { nonce: "bbbbbbbb" })).state, undefined, "no write");
  assert.equal(requestAdmission(s, req("a", { nonce: "aaaaaaaa" })).verdict, "admitted");
  s = releaseAdmission(s, { node: "a", spec: S2 })!;
  assert.equal(releaseAdmission(s, { node: "a", spec: S2 }), undefined);
  const b2 = requestAdmission(s, req("b", { nonce: "bbbbbbbb" }));
  assert.equal(b2.verdict, "admitted");
  // A percentage of the nodes that asked so far (never more than of the whole NodeGroup): 50 % of
  // 1, 2, 3 nodes is 1, of 4 is 2.
  let p = emptyRolloutState(ref);
  for (const n of ["a", "b", "c", "d"]) {
    p = requestAdmission(p, req(n, { maxUnavailable: "50%", nonce: `${n}${n}${n}${n}0000` }))
      .state ?? p;
  }
  assert.deepEqual(p.admitted.map((x) => x.node), ["a", "d"]);
});

Deno.test("rollout state: expired and own earlier admissions are replaced; a new spec resets", () => {
  let s = requestAdmission(emptyRolloutState(ref), req("a", { nonce: "aaaaaaaa" })).state!;
  // b may not take a's slot until a's admission is presumed dead.
  assert.equal(requestAdmission(s, req("b", { nonce: "bbbbbbbb" })).verdict, "waiting");
  const r = requestAdmission(s, req("b", { nonce: "bbbbbbbb", expired: new Set(["a/aaaaaaaa"]) }));
  assert.equal(r.verdict, "admitted");
  assert.deepEqual(r.state!.admitted.map((x) => x.node), ["b"]);
  // A restarted agent re-admits itself with a new nonce: it never counts twice.
  const again = requestAdmission(s, req("a", { nonce: "a2a2a2a2" }));
  assert.equal(again.verdict, "admitted");
  assert.deepEqual(again.state!.admitted, [{ node: "a", nonce: "a2a2a2a2", at: req("a").at }]);
  // A newer spec resets everything but pause; an older index never touches it.
  s = setPaused(s, true)!;
  const S3 = `sha256:${"3".repeat(64)}`;
  assert.equal(requestAdmission(s, req("b", { spec: S3, generation: 1 })).verdict, "stale");
  const reset = requestAdmission(s, req("b", { spec: S3, generation: 3, from: S2 }));
  assert.equal(reset.verdict, "paused");
  assert.deepEqual(reset.state!.admitted, []);
  assert.equal(reset.state!.from, S2);
  assert.equal(reset.state!.paused, true);
});

Deno.test("rollout state: a halt stops admissions; parse rejects untrusted shapes", () => {
  let s = requestAdmission(emptyRolloutState(ref), req("a", { nonce: "aaaaaaaa" })).state!;
  s = haltRollout(s, { node: "a", spec: S2, reason: "boom\nCrashLoopBackOff", at: req("a").at })!;
  assert.equal(s.halted?.reason, "boom CrashLoopBackOff");
  assert.equal(haltRollout(s, { node: "b", spec: S2, reason: "x", at: req("a").at }), undefined);
  assert.equal(requestAdmission(s, req("b", { nonce: "bbbbbbbb" })).verdict, "halted");
  const object = rolloutStateObject(ref);
  assert.deepEqual(object.parse(object.serialize(s)), s);
  const bad = (patch: Record<string, unknown>) =>
    assert.throws(
      () => parseRolloutState(new TextEncoder().encode(JSON.stringify({ ...s, ...patch })), ref),
      /dns\/rollouts\/default\/web\.json/,
    );
  bad({ name: "api" });
  bad({ extra: 1 });
  bad({ spec: "sha256:nope" });
  bad({ nodes: ["a", "a"] });
  bad({ nodes: ["../x"] });
  bad({ admitted: [{ node: "z", nonce: "aaaaaaaa", at: req("a").at }] });
  bad({ admitted: [{ node: "a", nonce: "zz", at: req("a").at }] });
  bad({ generation: -1 });
  bad({ paused: "yes" });
  assert.throws(() => parseRolloutState(new TextEncoder().encode("{"), ref), /not valid JSON/);
});

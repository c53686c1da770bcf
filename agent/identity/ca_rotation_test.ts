import assert from "node:assert/strict";
import type { X509Certificate } from "@peculiar/x509";
import {
  generateKeyPair,
  issueLeaf,
  type KeyPair,
  validateLeaf,
} from "../../core/crypto/certificates.ts";
import {
  checkCaState,
  type CheckedCaState,
  emptyWorkloadCaState,
  trustBundlePem,
  type WorkloadCaState,
} from "../../core/bucket/workload_ca_state.ts";
import {
  applyRotation,
  DEFAULT_ROTATION_POLICY,
  planRotation,
  policyProblems,
  type RotationPolicy,
  trustWindowMs,
} from "./ca_rotation.ts";
import { bundleSha256 } from "./ca_publication.ts";

const MIN = 60_000;
const HOUR = 60 * MIN;
const DAY = 24 * HOUR;
const T0 = Date.parse("2026-12-01T00:00:00Z");
const TARGET = "s3://trust-bundles/podmin/prod.pem";

const keys: KeyPair = await generateKeyPair();

/** One maintainer step at `now`: the planner's change applied and written (or nothing). */
async function step(state: WorkloadCaState, now: number, policy: RotationPolicy) {
  const checked = await checkCaState(state, keys.publicKey);
  const plan = planRotation({
    state,
    now: new Date(now),
    policy,
    bundleSha256: await bundleSha256(trustBundlePem(checked)),
  });
  if (!plan.step) return { plan, state: undefined };
  const next = await applyRotation({
    state,
    step: plan.step,
    now: new Date(now),
    policy,
    keys,
    cluster: "prod",
  });
  return { plan, state: { ...next, generation: state.generation + 1 } };
}

Deno.test("bootstrap: one next promoted at once (no leaf exists yet), then nothing to do", async () => {
  const policy = DEFAULT_ROTATION_POLICY;
  const s1 = await step(emptyWorkloadCaState(), T0, policy);
  assert.equal(s1.plan.step?.kind, "create-next");
  const next = s1.state!.certificates[0];
  assert.equal(next.role, "next");
  assert.equal(next.promoteAfter, new Date(T0).toISOString());
  assert.equal(Date.parse(next.notBefore), T0 - policy.skewMs, "backdated by the skew bound");
  assert.equal(Date.parse(next.notAfter), T0 + policy.caLifetimeMs);
  const s2 = await step(s1.state!, T0, policy);
  assert.equal(s2.plan.step?.kind, "promote");
  assert.deepEqual(s2.state!.certificates.map((c) => c.role), ["active"]);
  assert.equal(s2.state!.certificates[0].promoteAfter, undefined);
  assert.equal((await step(s2.state!, T0 + DAY, policy)).state, undefined);
});

Deno.test("with publication configured, bootstrap waits for the bundle to be published", async () => {
  const policy = { ...DEFAULT_ROTATION_POLICY, publicationTarget: TARGET };
  const s1 = (await step(emptyWorkloadCaState(), T0, policy)).state!;
  const blocked = await step(s1, T0, policy);
  assert.equal(blocked.state, undefined);
  assert.match(blocked.plan.waiting!, /not yet published to s3:\/\/trust-bundles/);
  const failed = { ...s1, publication: { target: TARGET, error: "AccessDenied", failedAt: "x" } };
  assert.match((await step(failed, T0, policy)).plan.waiting!, /failed: AccessDenied/);
  const otherSha = {
    ...s1,
    publication: { target: TARGET, publishedSha256: `sha256:${"0".repeat(64)}` },
  };
  assert.equal((await step(otherSha, T0, policy)).state, undefined, "a different bundle");
  const sha = await bundleSha256(trustBundlePem(await checkCaState(s1, keys.publicKey)));
  const elsewhere = { ...s1, publication: { target: "s3://other/x.pem", publishedSha256: sha } };
  assert.equal((await step(elsewhere, T0, policy)).state, undefined, "another target");
  const published = { ...s1, publication: { target: TARGET, publishedSha256: sha } };
  assert.equal((await step(published, T0, policy)).plan.step?.kind, "promote");
});

Deno.test("rotation times: next at a third of life left, promotion after the trust window, drop after the last leaf", async () => {
  const policy = DEFAULT_ROTATION_POLICY;
  let s = (await step(emptyWorkloadCaState(), T0, policy)).state!;
  s = (await step(s, T0, policy)).state!;
  const active = s.certificates[0];
  const life = Date.parse(active.notAfter) - Date.parse(active.notBefore);
  const renewAt = Date.parse(active.notAfter) - life / 3;
  assert.equal((await step(s, renewAt, policy)).state, undefined, "exactly a third left: not yet");
  const created = await step(s, renewAt + 1, policy);
  assert.equal(created.plan.step?.kind, "create-next");
  s = created.state!;
  const next = s.certificates.find((c) => c.role === "next")!;
  assert.equal(Date.parse(next.promoteAfter!), renewAt + 1 + policy.trustWindowMs);
  assert.equal((await step(s, renewAt + policy.trustWindowMs, policy)).state, undefined);
  const promoted = await step(s, renewAt + 1 + policy.trustWindowMs, policy);
  assert.equal(promoted.plan.step?.kind, "promote");
  s = promoted.state!;
  const retired = s.certificates.find((c) => c.role === "retired")!;
  assert.equal(retired.fingerprint, active.fingerprint);
  const dropAt = Date.parse(retired.retiredAt!) + policy.trustWindowMs + policy.leafLifetimeMs +
    policy.skewMs;
  assert.equal((await step(s, dropAt - 1, policy)).state, undefined);
  const dropped = await step(s, dropAt, policy);
  assert.deepEqual(dropped.plan.step?.kind, "drop");
  assert.deepEqual(dropped.state!.certificates.map((c) => c.role), ["active"]);
});

Deno.test("an expired active is dropped and replaced at once", async () => {
  const policy = DEFAULT_ROTATION_POLICY;
  let s = (await step(emptyWorkloadCaState(), T0, policy)).state!;
  s = (await step(s, T0, policy)).state!;
  const late = T0 + policy.caLifetimeMs + DAY; // the leader was gone for the whole renewal period
  const d = await step(s, late, policy);
  assert.equal(d.plan.step?.kind, "drop");
  assert.match(d.plan.step!.reason, /expired/);
  const c = await step(d.state!, late, policy);
  assert.equal(c.plan.step?.kind, "create-next");
  assert.equal(c.state!.certificates[0].promoteAfter, new Date(late).toISOString());
  assert.equal((await step(c.state!, late, policy)).plan.step?.kind, "promote");
});

Deno.test("policy checks and the trust window definition", () => {
  assert.deepEqual(policyProblems(DEFAULT_ROTATION_POLICY), []);
  assert.equal(policyProblems({ ...DEFAULT_ROTATION_POLICY, caLifetimeMs: 2 * HOUR }).length, 1);
  assert.equal(trustWindowMs({ refreshMs: 30_000, requestMs: 30_000, skewMs: 300_000 }), HOUR);
  assert.equal(
    trustWindowMs({ refreshMs: 2 * HOUR, requestMs: 30_000, skewMs: 300_000 }),
    2 * HOUR + 330_000,
  );
});

/** A state as written at `at`, with its checked certificates. */
interface Written {
  at: number;
  state: WorkloadCaState;
  checked: CheckedCaState;
  bundle: X509Certificate[];
}

interface Leaf {
  cert: X509Certificate;
  issuedAt: number;
  issuer: string;
}

/**
 * Walks a controllable clock through rotations: at every tick the maintainer publishes (when
 * configured; `publishFails` decides failures) and applies the planner until it has nothing to
 * do; agents issue leaves with the active certificate of every state they could hold; then the
 * invariant is checked: every leaf still valid verifies against the trust bundle of every state
 * an agent could hold (any state written within the last `agentWindowMs`, and the one before).
 */
async function walk(options: {
  policy: RotationPolicy;
  agentWindowMs: number;
  tickMs: number;
  durationMs: number;
  publishFails?: (now: number) => boolean;
}) {
  const { policy } = options;
  const history: Written[] = [];
  const published = new Set<string>(); // fingerprints that reached the external object
  const leaves: Leaf[] = [];
  const issuedBy = new Map<string, number>(); // "fp@t" → issued
  let state = emptyWorkloadCaState();
  let promotions = 0;
  let blockedTicks = 0;
  const record = async (at: number) => {
    const checked = await checkCaState(state, keys.publicKey);
    history.push({ at, state, checked, bundle: checked.retained.map((c) => c.certificate) });
  };
  for (let now = T0; now <= T0 + options.durationMs; now += options.tickMs) {
    for (let i = 0; i < 6; i++) {
      const checked = await checkCaState(state, keys.publicKey);
      const sha = await bundleSha256(trustBundlePem(checked));
      const empty = !checked.retained.length; // nothing to publish before the bootstrap
      if (policy.publicationTarget && !empty && state.publication?.publishedSha256 !== sha) {
        if (options.publishFails?.(now)) {
          state = {
            ...state,
            generation: state.generation + 1,
            publication: { target: TARGET, error: "bucket missing", failedAt: iso(now) },
          };
        } else {
          for (const c of checked.retained) published.add(c.entry.fingerprint);
          state = {
            ...state,
            generation: state.generation + 1,
            publication: { target: TARGET, publishedSha256: sha, publishedAt: iso(now) },
          };
        }
        await record(now);
      }
      const r = await step(state, now, policy);
      if (r.plan.waiting) blockedTicks++;
      if (!r.state) break;
      if (r.plan.step!.kind === "promote") {
        promotions++;
        if (policy.publicationTarget) {
          assert.ok(published.has(r.plan.step!.fingerprint), "promoted only after publication");
        }
      }
      state = r.state;
      await record(now);
    }

    // The states an agent may hold now: written within the window, and the one before those.
    const cutoff = now - options.agentWindowMs;
    const firstInWindow = history.findIndex((w) => w.at > cutoff);
    const from = firstInWindow === -1 ? history.length - 1 : Math.max(0, firstInWindow - 1);
    // (An agent with no certificate at all runs no Pod yet: it verifies nothing.)
    const held = history.slice(from).filter((w) => w.bundle.length > 0);

    // Agents issue leaves with the active certificate of the state they hold.
    for (const w of held) {
      const active = w.checked.active;
      if (!active || now >= active.certificate.notAfter.getTime()) continue;
      const id = `${active.entry.fingerprint}@${now}`;
      if (issuedBy.has(id)) continue;
      issuedBy.set(id, now);
      const { publicKey } = await generateKeyPair();
      const cert = await issueLeaf({
        ca: { certificate: active.certificate, privateKey: keys.privateKey },
        identity: { profile: "pod", cluster: "prod", namespace: "default", name: "web" },
        publicKey,
        now: new Date(now),
        lifetimeMs: policy.leafLifetimeMs,
      });
      leaves.push({ cert, issuedAt: now, issuer: active.entry.fingerprint });
    }

    // Every leaf still valid: the oldest and newest of each issuer, against every held bundle.
    const live = leaves.filter((l) => now <= l.cert.notAfter.getTime());
    const byIssuer = new Map<string, Leaf[]>();
    for (const l of live) byIssuer.set(l.issuer, [...byIssuer.get(l.issuer) ?? [], l]);
    for (const group of byIssuer.values()) {
      for (const leaf of new Set([group[0], group[group.length - 1]])) {
        for (const w of held) {
          const problems = await validateLeaf({
            certificate: leaf.cert,
            trust: w.bundle,
            profile: "pod",
            now: new Date(now),
          });
          assert.deepEqual(
            problems,
            [],
            `at ${iso(now)} a leaf issued ${iso(leaf.issuedAt)} fails against the state ` +
              `written ${iso(w.at)} (generation ${w.state.generation})`,
          );
        }
      }
    }
    // Drop leaves no longer valid (they can fail nothing any more).
    while (leaves.length && now > leaves[0].cert.notAfter.getTime()) leaves.shift();
  }
  return { promotions, blockedTicks, history, published };
}

function iso(ms: number): string {
  return new Date(ms).toISOString();
}

const SHORT_POLICY: RotationPolicy = {
  caLifetimeMs: 6 * DAY,
  trustWindowMs: HOUR,
  leafLifetimeMs: DAY,
  skewMs: 5 * MIN,
};

Deno.test("several full rotations: every valid leaf verifies against every state an agent may hold", async () => {
  const r = await walk({
    policy: SHORT_POLICY,
    agentWindowMs: HOUR,
    tickMs: 30 * MIN,
    durationMs: 14 * DAY,
  });
  assert.ok(r.promotions >= 4, `${r.promotions} promotions: bootstrap and at least 3 rotations`);
  assert.equal(r.blockedTicks, 0);
  const max = Math.max(...r.history.map((w) => w.state.certificates.length));
  assert.ok(max <= 3, "never more than active, next and one retired");
});

Deno.test("rotations with publication: blocked while publishing fails, never promoted unpublished", async () => {
  // Publication fails for a day around the second rotation's promotion (due at ~8 d).
  const failFrom = T0 + 7.9 * DAY, failTo = T0 + 9 * DAY;
  const r = await walk({
    policy: { ...SHORT_POLICY, publicationTarget: TARGET },
    agentWindowMs: HOUR,
    tickMs: 30 * MIN,
    durationMs: 13 * DAY,
    publishFails: (now) => now >= failFrom && now < failTo,
  });
  assert.ok(r.promotions >= 3, `${r.promotions} promotions`);
  assert.ok(r.blockedTicks > 0, "the failure blocked a due promotion");
  const failed = r.history.filter((w) => w.state.publication?.error);
  assert.ok(failed.length > 0, "failures are recorded in the state");
  for (let i = 1; i < r.history.length; i++) {
    const [a, b] = [r.history[i - 1], r.history[i]];
    const activeA = a.state.certificates.find((c) => c.role === "active")?.fingerprint;
    const activeB = b.state.certificates.find((c) => c.role === "active")?.fingerprint;
    if (activeB && activeB !== activeA) {
      assert.ok(b.at < failFrom || b.at >= failTo, `no promotion while publication fails`);
    }
  }
});

Deno.test("the invariant check has teeth: a planner without a trust window breaks it", async () => {
  await assert.rejects(
    walk({
      policy: { ...SHORT_POLICY, trustWindowMs: 0 },
      agentWindowMs: HOUR,
      tickMs: 30 * MIN,
      durationMs: 6 * DAY,
    }),
    /fails against the state/,
  );
});

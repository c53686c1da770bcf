/** The fault campaign's bounded subset in the test suite: every attack, fewer cases, a fixed seed. */

import assert from "node:assert/strict";
import type { AttackReport } from "./campaign.ts";
import { envFuzz } from "./env_fuzz.ts";
import { bucketObjectFuzz, resourceFuzz } from "./input_fuzz.ts";
import { killAgentAttack } from "./kill_agent.ts";
import { killCliAttack } from "./kill_cli.ts";
import { outageAttack } from "./outage.ts";
import { readsOutsideImages, registryFuzz } from "./registry_fuzz.ts";

/** Fails unless at least `min` kills landed after the program's first write and before its end. */
function assertLandedMidRun(report: AttackReport, min: number): void {
  const k = report.kills;
  assert.ok(k, `${report.name} reported no kill tally`);
  assert.ok(
    k.midRun >= min,
    `${report.name}: only ${k.midRun} of ${k.trials} kills landed mid-run (after a write, ` +
      `before completion; ${k.beforeWrite} before any write, ${k.finished} after completion); ` +
      `wanted at least ${min}`,
  );
}

Deno.test("faults: the registry oracle normalises keys before 'inside apps/'", () => {
  for (const k of ["apps/hello/_tags/1.0", "mirror/docker.io/library/x/_manifests/sha256/ab"]) {
    assert.equal(readsOutsideImages(k), false, k);
  }
  for (
    const k of [
      "deployments/index.json",
      "apps/../deployments/index.json",
      "apps/hello/../../infra/state",
      "mirror/./../services/x",
      "/deployments/index.json",
      "apps",
      "apps/..",
    ]
  ) {
    assert.equal(readsOutsideImages(k), true, k);
  }
});

for (const attack of [registryFuzz, resourceFuzz, bucketObjectFuzz]) {
  Deno.test(`faults: ${attack.name} (bounded subset)`, async () => {
    const report = await attack.run({ cases: 1_500, seed: 12, deadline: Date.now() + 60_000 });
    console.log(`  ${attack.name}: tried ${report.tried} in ${report.ms} ms`);
    assert.ok(report.tried >= 500, `only ${report.tried} cases ran`);
    assert.deepEqual(report.findings, []);
  });
}

Deno.test("faults: vmconfig-env (bounded subset: 600 files)", async () => {
  const report = await envFuzz.run({ cases: 600, seed: 12, deadline: Date.now() + 45_000 });
  console.log(`  ${envFuzz.name}: tried ${report.tried} in ${report.ms} ms`);
  assert.ok(report.tried >= 600, `only ${report.tried} cases ran`);
  assert.deepEqual(report.findings, []);
});

for (const backend of ["fs", "moto"] as const) {
  Deno.test(`faults: kill9-cli-${backend} (bounded subset: 9 trials)`, async () => {
    const attack = killCliAttack(backend, { trials: 9 });
    const report = await attack.run({ cases: 9, seed: 12, deadline: Date.now() + 50_000 });
    assert.ok(report.tried >= 6, `only ${report.tried} trials ran`);
    assert.deepEqual(report.findings, []);
    // The soundness checks mean something only after kills that hit a command mid-write.
    assertLandedMidRun(report, 2);
  });
}

Deno.test("faults: kill9-agent (bounded subset: 8 trials)", async () => {
  const report = await killAgentAttack({ trials: 8 }).run({
    cases: 8,
    seed: 12,
    deadline: Date.now() + 50_000,
  });
  assert.ok(report.tried >= 5, `only ${report.tried} trials ran`);
  assert.deepEqual(report.findings, []);
  assertLandedMidRun(report, 2);
});

Deno.test("faults: bucket-outages (3 s each of refuse, reset, black-hole)", async () => {
  const attack = outageAttack(3_000);
  const report = await attack.run({ cases: 3, seed: 12, deadline: Date.now() + 240_000 });
  assert.equal(report.tried, 3);
  assert.deepEqual(report.findings, []);
});

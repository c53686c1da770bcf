import assert from "node:assert/strict";
import { ValidationError } from "../kit/errors.ts";
import { parseResource } from "./resources.ts";
import { checkRollout, maxUnavailableNodes, ROLLOUT_DEFAULTS, rolloutSettings } from "./rollout.ts";

const template = { spec: { containers: [{ name: "web", image: "r/apps/web:1" }] } };
const deployment = (spec: Record<string, unknown>) => ({
  apiVersion: "podmin.dev/v1",
  kind: "Deployment",
  metadata: { name: "web" },
  spec: { nodeGroup: "workers", template, ...spec },
});

Deno.test("rollout: absent and all-default blocks are not stored, so the digest is unchanged", () => {
  const plain = parseResource(deployment({}));
  const spelled = parseResource(deployment({ rollout: { ...ROLLOUT_DEFAULTS } }));
  assert.deepEqual(spelled, plain);
  assert.ok(plain.kind === "Deployment" && plain.spec.rollout === undefined);
});

Deno.test("rollout: only fields that differ from the defaults are stored", () => {
  const d = parseResource(
    deployment({ rollout: { maxUnavailable: 2, minReadySeconds: 5, autoRevert: true } }),
  );
  assert.ok(d.kind === "Deployment");
  assert.deepEqual(d.spec.rollout, { maxUnavailable: 2, autoRevert: true });
  assert.deepEqual(rolloutSettings(d.spec.rollout), {
    ...ROLLOUT_DEFAULTS,
    maxUnavailable: 2,
    autoRevert: true,
  });
});

Deno.test("rollout: every bad field is named with what it accepts", () => {
  const { problems } = checkRollout({
    maxUnavailable: "0%",
    minReadySeconds: -1,
    progressDeadlineSeconds: 1.5,
    autoRevert: "yes",
    surge: 1,
    maxSurge: 1,
  });
  const byPath = Object.fromEntries(problems.map((p) => [p.path, p.message]));
  assert.match(byPath["spec.rollout.maxUnavailable"], /count of nodes|whole number.*"25%"/);
  assert.match(byPath["spec.rollout.minReadySeconds"], /from 0 to 3600/);
  assert.match(byPath["spec.rollout.progressDeadlineSeconds"], /from 1 to 86400/);
  assert.match(byPath["spec.rollout.autoRevert"], /true or false/);
  assert.match(byPath["spec.rollout.surge"], /true or false/);
  assert.match(byPath["spec.rollout.maxSurge"], /unknown field \(allowed: maxUnavailable/);
});

Deno.test("rollout: a deadline that does not exceed minReadySeconds is refused", () => {
  const { problems } = checkRollout({ minReadySeconds: 30, progressDeadlineSeconds: 30 });
  assert.equal(problems.length, 1);
  assert.match(problems[0].message, /must exceed minReadySeconds \(30 s\)/);
});

Deno.test("rollout: parseResource reports rollout problems and explains strategy", () => {
  let err: unknown;
  try {
    parseResource({
      ...deployment({ rollout: { maxUnavailable: 0 } }),
      spec: { ...deployment({ rollout: { maxUnavailable: 0 } }).spec, strategy: {} },
    });
  } catch (e) {
    err = e;
  }
  assert.ok(err instanceof ValidationError);
  assert.match(err.message, /spec\.rollout\.maxUnavailable: invalid value 0/);
  assert.match(err.message, /spec\.strategy: Podmin rolls a Deployment out with spec\.rollout/);
});

Deno.test("rollout: the budget is at least one node and at most the NodeGroup", () => {
  assert.equal(maxUnavailableNodes("25%", 2), 1); // 0.5 rounds down, but never below 1
  assert.equal(maxUnavailableNodes("25%", 8), 2);
  assert.equal(maxUnavailableNodes("100%", 3), 3);
  assert.equal(maxUnavailableNodes(5, 3), 3);
  assert.equal(maxUnavailableNodes(1, 0), 1);
});

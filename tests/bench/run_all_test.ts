/**
 * `tests/bench/run_all.ts` propagates a benchmark's own verdict: a benchmark that exits non-zero
 * makes the run fail, its verdict key is 0 and the rows using its figures are not met, even when
 * the figures themselves meet their goals. Tiny stand-in benchmarks; no timing involved.
 */

import assert from "node:assert/strict";
import * as path from "node:path";
import { BENCH_JSON_ENV } from "./bench_output.ts";
import {
  type Bench,
  BENCHES,
  expectedKeys,
  ROWS,
  rowsOf,
  runAll,
  selectBenches,
  verdictKey,
} from "./run_all.ts";

/** A stand-in benchmark: records one figure that meets its row's goal, then exits `code`. */
async function standIn(dir: string, name: string, figure: string, code: number): Promise<Bench> {
  const script = path.join(dir, `${name}.ts`);
  await Deno.writeTextFile(
    script,
    `const f = Deno.env.get(${JSON.stringify(BENCH_JSON_ENV)})!;\n` +
      `const cur = JSON.parse(await Deno.readTextFile(f));\n` +
      `await Deno.writeTextFile(f, JSON.stringify({ ...cur, ${JSON.stringify(figure)}: 1 }));\n` +
      `if (${code}) console.log("  FAIL: stand-in check");\n` +
      `Deno.exit(${code});\n`,
  );
  return { name, script };
}

Deno.test("run_all: a benchmark that exits 1 fails the run and its figures count as not met", async () => {
  const dir = await Deno.makeTempDir({ prefix: "podmin-run-all-" });
  try {
    // deploy_idle_requests: figure and peer are the same key, goal ≤ 1 request: met by 1.
    const good = await standIn(dir, "good one", "deploy_idle_requests_per_poll", 0);
    const out = path.join(dir, "results.json");
    const passing = await runAll({ smoke: true, out, benches: [good] });
    assert.deepEqual(passing.failed, []);
    assert.equal(passing.results[verdictKey("good one")], 1);
    assert.equal(passing.results.deploy_idle_requests_met, 1);

    const bad = await standIn(dir, "bad one", "deploy_idle_requests_per_poll", 1);
    const failing = await runAll({ smoke: true, out, benches: [bad] });
    assert.deepEqual(failing.failed, ["bad one"]);
    assert.equal(failing.results[verdictKey("bad one")], 0);
    assert.equal(failing.results.deploy_idle_requests_per_poll, 1, "the figure is still shown");
    assert.equal(failing.results.deploy_idle_requests_met, 0);
    const written = JSON.parse(await Deno.readTextFile(out));
    assert.equal(written[verdictKey("bad one")], 0);
    assert.equal(written.deploy_idle_requests_met, 0);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("run_all: every figure of the table has exactly one benchmark that writes it, so the smoke halves cover every row", () => {
  const figures = new Set(ROWS.flatMap((r) => [r.figure, r.peer]));
  const owners = [...figures].map((f) => ({
    f,
    n: BENCHES.filter((b) => b.keys?.some((k) => f.startsWith(k))).length,
  }));
  assert.deepEqual(owners.filter((o) => o.n !== 1), []);
  const root = BENCHES.filter((b) => b.root), rest = BENCHES.filter((b) => !b.root);
  const halves = [...rowsOf(root), ...rowsOf(rest)].map((r) => r.key).sort();
  assert.deepEqual(halves, ROWS.map((r) => r.key).sort(), "every row is filled by one half");
  assert.deepEqual(
    [...expectedKeys(root), ...expectedKeys(rest)].sort(),
    expectedKeys().sort(),
    "the halves' keys are the whole run's",
  );
});

Deno.test("run_all: --only names benchmarks as BENCHES does; an unknown one is refused with the list", () => {
  assert.deepEqual(selectBenches("mesh, pull").map((b) => b.name), ["pull", "mesh"]);
  assert.throws(() => selectBenches("mesh,nope"), /unknown benchmark "nope".*deploy spine/);
  assert.throws(() => selectBenches(""), /unknown benchmark/);
});

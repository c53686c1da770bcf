/**
 * The smoke run of a set of benchmarks (`deno task bench --smoke --only …`) as a test body: every
 * benchmark of the set passes its own checks (each exits 0: its verdict key is 1 and the run exits
 * 0), and results.json holds exactly the keys of that set (run_all's `expectedKeys`), each a finite
 * number. No timing goal is asserted (tiny sizes).
 */

import assert from "node:assert/strict";
import * as path from "node:path";
import { type Bench, expectedKeys, verdictKey } from "./run_all.ts";

/** Runs `benches` in smoke mode in a child process and asserts their verdicts and keys. */
export async function smokeRun(benches: Bench[]): Promise<void> {
  const dir = await Deno.makeTempDir({ prefix: "podmin-bench-smoke-" });
  try {
    const out = path.join(dir, "results.json");
    const run = await new Deno.Command(Deno.execPath(), {
      args: [
        "run",
        "--allow-all",
        path.join(import.meta.dirname!, "run_all.ts"),
        "--smoke",
        "--only",
        benches.map((b) => b.name).join(","),
        "--out",
        out,
      ],
      stdout: "piped",
      stderr: "piped",
    }).output();
    const log = new TextDecoder().decode(run.stdout) + new TextDecoder().decode(run.stderr);
    const results = JSON.parse(await Deno.readTextFile(out));
    // A benchmark whose own check fails (a FAIL line, a thrown error, a kill) exits non-zero:
    // its verdict is 0 and the run exits 1.
    const failedChecks = benches.map((b) => b.name).filter((n) => results[verdictKey(n)] !== 1);
    const failLines = log.split("\n").filter((l) => /FAIL/.test(l)).join("\n");
    assert.deepEqual(failedChecks, [], `benchmarks that failed their checks:\n${failLines}`);
    assert.ok(run.success, log);
    const want = expectedKeys(benches);
    const bad = want.filter((k) => typeof results[k] !== "number" || !Number.isFinite(results[k]));
    assert.deepEqual(bad, [], `keys missing or not numeric:\n${log}`);
    assert.deepEqual(Object.keys(results).sort(), want.sort());
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

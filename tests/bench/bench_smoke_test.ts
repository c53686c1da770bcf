/**
 * `deno task bench --smoke`: every benchmark runs at tiny sizes, passes its own correctness checks
 * (each exits 0: its verdict key is 1 and the run exits 0), and results.json holds every key the
 * docs/benchmarks.md names, each a finite number. No timing goal is asserted (tiny sizes).
 */

import assert from "node:assert/strict";
import * as path from "node:path";
import { testWith } from "../support/requirements.ts";
import { BENCHES, expectedKeys, verdictKey } from "./run_all.ts";
import { nodePeerProgram } from "../support/node_peers.ts";
import { ROLLOUT_TOPOLOGY_TOOLS } from "../support/rollout_topology.ts";

const COREDNS = nodePeerProgram("coredns");
const CONTAINERD = nodePeerProgram("containerd"); // the pull bench's CRI peer

testWith(
  "bench --smoke: every benchmark passes its own checks and reports every figure, ratio and verdict",
  // The dataplane benchmark needs root; the registry one compares with distribution and curl; the
  // mesh one serves its zone through a real CoreDNS; the cluster-scale and rollout ones run on
  // versitygw; the rollout requests one on real nodes.
  {
    root: true,
    tools: [
      ...new Set([
        "distribution-registry",
        "curl",
        "openssl",
        "versitygw",
        ...ROLLOUT_TOPOLOGY_TOOLS,
      ]),
    ],
    files: [new URL(`file://${COREDNS}`), new URL(`file://${CONTAINERD}`)],
  },
  async () => {
    const dir = await Deno.makeTempDir({ prefix: "podmin-bench-smoke-" });
    try {
      const out = path.join(dir, "results.json");
      const run = await new Deno.Command(Deno.execPath(), {
        args: [
          "run",
          "--allow-all",
          path.join(import.meta.dirname!, "run_all.ts"),
          "--smoke",
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
      const failedChecks = BENCHES.map((b) => b.name).filter((n) => results[verdictKey(n)] !== 1);
      const failLines = log.split("\n").filter((l) => /FAIL/.test(l)).join("\n");
      assert.deepEqual(failedChecks, [], `benchmarks that failed their checks:\n${failLines}`);
      assert.ok(run.success, log);
      const bad = expectedKeys().filter((k) =>
        typeof results[k] !== "number" || !Number.isFinite(results[k])
      );
      assert.deepEqual(bad, [], `keys missing or not numeric:\n${log}`);
      assert.deepEqual(Object.keys(results).sort(), expectedKeys().sort());
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  },
);

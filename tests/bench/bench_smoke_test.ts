/**
 * `deno task bench --smoke`: every benchmark runs at tiny sizes and results.json holds every key
 * the spec names (§10 "Benchmarks"), each a finite number. No timing is asserted.
 */

import assert from "node:assert/strict";
import * as path from "node:path";
import { testWith } from "../support/requirements.ts";
import { expectedKeys } from "./run_all.ts";
import { nodePeerProgram } from "../support/node_peers.ts";

const COREDNS = nodePeerProgram("coredns");
const CONTAINERD = nodePeerProgram("containerd"); // the pull bench's CRI peer

testWith(
  "bench --smoke: every benchmark reports every figure, ratio and verdict as a number",
  // The dataplane benchmark needs root; the registry one compares with distribution and curl; the
  // mesh one serves its zone through a real CoreDNS; the cluster-scale one runs on versitygw too.
  {
    root: true,
    tools: ["distribution-registry", "curl", "openssl", "versitygw"],
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
      assert.ok(run.success, log);
      const results = JSON.parse(await Deno.readTextFile(out));
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

/**
 * `deno task bench --smoke`, the half that needs no root (the benchmarks' own peers on free
 * loopback ports and temporary directories, so it runs in the shared lane): every one of those
 * benchmarks passes its own checks and reports every figure, ratio and verdict of its rows. The
 * root half is bench_smoke_test.ts.
 */

import { testWith } from "../support/requirements.ts";
import { nodePeerProgram } from "../support/node_peers.ts";
import { smokeRun } from "./bench_smoke.ts";
import { BENCHES } from "./run_all.ts";

testWith(
  "bench --smoke, the benchmarks that need no root: each passes its own checks and reports every figure, ratio and verdict",
  // The registry one compares with distribution and curl; the mesh one serves its zone through a
  // real CoreDNS; the cluster-scale one runs on versitygw too.
  {
    tools: ["distribution-registry", "curl", "openssl", "versitygw"],
    files: [new URL(`file://${nodePeerProgram("coredns")}`)],
  },
  () => smokeRun(BENCHES.filter((b) => !b.root)),
);

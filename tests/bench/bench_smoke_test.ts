/**
 * `deno task bench --smoke`, the half that needs root (network namespaces, eBPF, containerd, a
 * real node): every one of those benchmarks passes its own checks and reports every figure, ratio
 * and verdict of its rows. The other half runs in the shared lane (bench_smoke_shared_test.ts);
 * together they cover every benchmark and every row (run_all_test.ts).
 */

import { testWith } from "../support/requirements.ts";
import { nodePeerProgram } from "../support/node_peers.ts";
import { ROLLOUT_TOPOLOGY_TOOLS } from "../support/rollout_topology.ts";
import { smokeRun } from "./bench_smoke.ts";
import { BENCHES } from "./run_all.ts";

const COREDNS = nodePeerProgram("coredns");
const CONTAINERD = nodePeerProgram("containerd"); // the pull bench's CRI peer

testWith(
  "bench --smoke, the benchmarks that need root: each passes its own checks and reports every figure, ratio and verdict",
  // The pull benchmark compares with distribution and curl on versitygw; the rollout requests one
  // runs on real nodes.
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
  () => smokeRun(BENCHES.filter((b) => b.root)),
);

/**
 * Rollouts (issue 32, "Benchmarks"; spec §7.1 "Surge" and "Budget"), in two parts:
 *
 * - `--only sim` — time of a rollout across 3 and across 50 simulated agents
 *   (tests/bench/rollout_sim.ts: the agent's real deployments part and rollout gate on versitygw,
 *   kubelet simulated with a fixed Pod start), with a budget (`maxUnavailable`) of 1 node and of
 *   25 %, each against its lower bound waves × (Pod start + `minReadySeconds`);
 * - `--only requests` (root, a real node: run it under the host lock) — requests failed while a
 *   new image rolls out (surge, the default) on the rollout end-to-end test's topology
 *   (tests/support/rollout_topology.ts: `podmin local` as node A, a network-namespace node B with
 *   a client Pod sending TCP and UDP requests through the Service's VIP without pause), and the
 *   same run with every node replacing in place at once (`surge: false`, `maxUnavailable: 100%`:
 *   the behaviour before rollouts) as the reference.
 *
 * Without `--only` both run. Figures are printed and recorded (bench/results.json through
 * tests/bench/run_all.ts). Checks (exit 1 when one fails): every agent ends on the new spec, never
 * more agents in transition at once than the budget, the client got answers in both real-node
 * runs. Failed requests are a figure, not a check (its row's goal is 0: docs/benchmarks.md).
 *
 *   deno run -A tests/bench/rollout_bench.ts [--only sim|requests] [--cases 3/1,50/25%,…] [--smoke]
 *
 * `--smoke` (or $PODMIN_BENCH_SMOKE=1): 2 and 3 agents, a 0.2 s Pod start and minReadySeconds 0;
 * on the real node, the same two rollouts (figures present, not meaningful).
 */

import { parseArgs } from "node:util";
import { type ClientResult, RolloutTopology } from "../support/rollout_topology.ts";
import { waitFor } from "../support/programs.ts";
import { benchSmoke, recordFigures } from "./bench_output.ts";
import { type RolloutRun, simulateRollouts } from "./rollout_sim.ts";

const { values } = parseArgs({
  args: Deno.args,
  options: {
    only: { type: "string" },
    cases: { type: "string", default: "3/1,3/25%,50/1,50/25%" },
    smoke: { type: "boolean", default: false },
  },
});
const SMOKE = values.smoke || benchSmoke();
if (values.only !== undefined && values.only !== "sim" && values.only !== "requests") {
  throw new Error(`--only takes sim or requests, not ${values.only}`);
}

/**
 * The simulated rollouts: `AGENTS/BUDGET` pairs (`--cases`, default every one of the issue's). A
 * smoke run simulates 2 agents for 3 and 3 for 50 (figures keyed as 3 and 50).
 */
const CASES = values.cases.split(",").map((c) => {
  const [agents, budget] = c.split("/");
  const key = Number(agents);
  if (!Number.isSafeInteger(key) || key < 1 || !budget) {
    throw new Error(`--cases takes AGENTS/BUDGET pairs (e.g. 50/25%), not ${c}`);
  }
  return {
    key,
    agents: SMOKE ? (key >= 10 ? 3 : 2) : key,
    budget: budget.endsWith("%") ? budget : Number(budget),
  };
});
/** The simulated kubelet's Pod start, and the Deployment's minReadySeconds. */
const POD_START_MS = SMOKE ? 200 : 1_000;
const MIN_READY_SECONDS = SMOKE ? 0 : 1;

const failures: string[] = [];
const figures: Record<string, number> = {};

function fail(what: string): void {
  failures.push(what);
  console.log(`  FAIL: ${what}`);
}

async function simPart(): Promise<void> {
  const shm = await Deno.makeTempDir({ dir: "/dev/shm", prefix: "podmin-rollout-bench-" });
  try {
    console.log(
      `simulated agents on versitygw, Pod start ${POD_START_MS} ms, minReadySeconds ` +
        `${MIN_READY_SECONDS}, agent interval 2 s${SMOKE ? " (SMOKE: tiny sizes)" : ""}`,
    );
    for (const key of new Set(CASES.map((c) => c.key))) {
      const cases = CASES.filter((c) => c.key === key);
      const runs = await simulateRollouts({
        agents: cases[0].agents,
        budgets: cases.map((c) => c.budget),
        podStartMs: POD_START_MS,
        minReadySeconds: MIN_READY_SECONDS,
        workers: cases[0].agents >= 10 ? 2 : 1,
        shm,
      });
      for (const run of runs) report(run, key);
    }
  } finally {
    await Deno.remove(shm, { recursive: true }).catch(() => {});
  }
}

/** Prints one rollout, records its figures and checks it. */
function report(run: RolloutRun, key: number): void {
  const suffix = run.maxUnavailable === 1 ? "_budget_1" : "";
  figures[`rollout_${key}_agents${suffix}_s`] = run.seconds;
  figures[`rollout_${key}_agents${suffix}_lower_bound_s`] = run.lowerBoundS;
  console.log(
    `${run.agents} agents, maxUnavailable ${run.maxUnavailable} (${run.budgetNodes} node(s), ` +
      `${run.waves} waves): ${run.seconds.toFixed(1)} s; lower bound ${
        run.lowerBoundS.toFixed(1)
      } s ` +
      `(${(run.seconds / run.lowerBoundS).toFixed(2)}×); apply → first new manifest ` +
      `${run.firstStartS.toFixed(2)} s; at most ${run.maxInTransition} in transition at once ` +
      `(${run.maxInTransitionRaw} counting overlaps under 100 ms)`,
  );
  console.log(
    `  one agent's transition (median) ${run.transitionMedianS.toFixed(2)} s; a freed admission ` +
      `taken after (median) ${run.admissionGapMedianS.toFixed(2)} s; phases logged: ` +
      JSON.stringify(run.phases),
  );
  if (Object.keys(run.warnings).length) {
    console.log(`  warnings: ${JSON.stringify(run.warnings).slice(0, 600)}`);
  }
  if (run.missing) fail(`${run.missing} of ${run.agents} agents not on the new spec`);
  if (run.maxInTransition > run.budgetNodes) {
    fail(`${run.maxInTransition} agents in transition at once, budget ${run.budgetNodes}`);
  }
}

/**
 * The old Pod's `terminationGracePeriodSeconds` in both runs: the echo server ignores SIGTERM (PID
 * 1), so kubelet's default 30 s would hold a replacement in place back for 30 s.
 */
const GRACE_SECONDS = 2;
/** The rollout with the feature on: the defaults (surge, 25 %, minReadySeconds 5). */
const WITH_ROLLOUT = "{}";
/** Every node replacing in place at once: no surge, the whole NodeGroup as the budget. */
const ALL_AT_ONCE = `{surge: false, maxUnavailable: "100%"}`;

/** What one rollout on the real nodes measured. */
interface RequestsRun {
  result: ClientResult;
  failed: number;
  sent: number;
  seconds: number;
  phases: string[];
}

async function requestsPart(): Promise<void> {
  const topo = await RolloutTopology.create("podmin-rollout-bench");
  let ok = false;
  try {
    console.log("real nodes: podmin local (node A, the backend) + node B (the client)");
    await topo.pushImages();
    await topo.linkNetwork();
    await topo.startNodes();
    await topo.apply("echo:1.0", WITH_ROLLOUT, { gracePeriodSeconds: GRACE_SECONDS });
    await topo.awaitService();
    const withRollout = await rolloutDuring(topo, "echo:2.0", "v2", WITH_ROLLOUT);
    const allAtOnce = await rolloutDuring(topo, "echo:1.0", "v1", ALL_AT_ONCE);
    figures.rollout_failed_requests = withRollout.failed;
    figures.rollout_failed_requests_all_at_once = allAtOnce.failed;
    for (
      const [what, run] of [["surge (defaults)", withRollout], ["all at once", allAtOnce]] as const
    ) {
      console.log(
        `${what}: ${run.failed} of ${run.sent} requests failed (TCP ${run.result.tcp_failed}, UDP ` +
          `${run.result.udp_failed}), apply → settled ${run.seconds.toFixed(1)} s, replies from ` +
          `${run.result.versions[0]} to ${run.result.versions.at(-1)} (${
            run.result.versions.length - 1
          } change(s) of version between replies: both Pods serve during a surge), phases ` +
          `${run.phases.join(", ") || "none"}`,
      );
      if (run.result.errors.length) {
        console.log(`  first failures: ${run.result.errors.slice(0, 5).join("; ")}`);
      }
    }
    if (withRollout.result.tcp_ok === 0 || allAtOnce.result.tcp_ok === 0) {
      fail("no request answered");
    }
    ok = true;
  } catch (err) {
    await topo.dumpLogs();
    throw err;
  } finally {
    await topo.destroy(!ok);
  }
}

/**
 * Runs the client while `image` rolls out with `rollout`, until node A runs the new Pod alone and
 * the new version (`version`) answers every request of a probe, then 2 s more.
 */
async function rolloutDuring(
  topo: RolloutTopology,
  image: string,
  version: string,
  rollout: string,
): Promise<RequestsRun> {
  const before = (await topo.status())?.indexGeneration ?? 0;
  const phases = new Set<string>();
  const t0 = performance.now();
  let seconds = NaN;
  const result = await topo.clientDuring(async () => {
    await topo.apply(image, rollout, { gracePeriodSeconds: GRACE_SECONDS });
    await waitFor(`node A on ${image} alone`, async () => {
      const s = await topo.status();
      for (const r of s?.rollouts ?? []) phases.add(r.phase);
      return (s?.indexGeneration ?? 0) > before && !!s?.converged && s.written.length === 1;
    }, 240_000);
    await waitFor(`${version} answers alone`, async () => {
      const probe = await topo.clientDuring(() => new Promise((ok) => setTimeout(ok, 500)));
      return probe.tcp_ok > 0 && probe.tcp_failed + probe.udp_failed === 0 &&
        probe.versions.join() === version;
    }, 240_000);
    seconds = (performance.now() - t0) / 1000;
    await new Promise((ok) => setTimeout(ok, 2_000));
  });
  const failed = result.tcp_failed + result.udp_failed;
  return {
    result,
    failed,
    sent: failed + result.tcp_ok + result.udp_ok,
    seconds,
    phases: [...phases],
  };
}

if (values.only !== "requests") await simPart();
if (values.only !== "sim") await requestsPart();
await recordFigures(figures);
console.log(JSON.stringify(figures));
if (failures.length) {
  console.log(`FAILED: ${failures.length} check(s)`);
  Deno.exit(1);
}
Deno.exit(0);

/**
 * Cluster-scale simulation (issue 18, item 4; spec §7.9 "Cost model"): N simulated agents
 * (default 1,000, in worker processes: tests/bench/cluster_scale_worker.ts, driven by
 * tests/bench/cluster_scale_fleet.ts) on one moto, every request they make counted by a forwarder
 * in front of moto (tests/bench/counting_proxy.ts), at the product's defaults (2 s interval, 60 s
 * value refresh, 15 s coordinator lease, 10 s fallback polling). Agents are spread over NodeGroups;
 * every node runs one Deployment with 10 Parameter Store values.
 *
 * Printed, and recorded for tests/bench/run_all.ts (`bench/results.json`):
 *
 * - idle S3 GETs per minute of the whole cluster, by key (with the mesh only its coordinator
 *   polls), and Parameter Store calls per second (`GetParameters`, 10 names per call);
 * - apply → manifest written, p50/p99 over every agent and several applies (each apply adds a
 *   Deployment to every NodeGroup, so every agent writes a manifest), with apply → announcement
 *   (the mesh's share) beside it;
 * - the same after the coordinator was killed (the members fall back to jittered direct polling
 *   until a new coordinator is elected), and the share of survivors that converged;
 * - the baseline, in the same run: a subset of the same agents without the mesh (direct polling)
 *   and without batching (one `GetParameter` per value), its idle rates scaled to N by the number
 *   of agents (each agent polls on its own timers: the rates are linear in N). Its apply latency
 *   is the subset's own (not scaled), beside the same subset's with the mesh: at that size moto
 *   keeps up, so the two compare the product, not moto's throughput.
 *
 * Goals (issue 18): ≤ 60 idle GETs/min for 1,000 nodes; p99 ≤ poll + 1 s; ≤ 40 SSM calls/s;
 * fallback keeps every node converging. moto serves one request at a time per core it gets: the
 * run prints how many requests each apply cost and how fast moto served them, so a latency bound by
 * moto's throughput is told apart from the product's.
 *
 * Run: deno task bench:scale [--nodes N --workers P ...]; `--smoke` (or $PODMIN_BENCH_SMOKE=1):
 * a handful of agents, short windows and intervals (figures present, not meaningful).
 */

import * as path from "node:path";
import { parseArgs } from "node:util";
import { manifestFileName } from "../../agent/deployments/static_pod.ts";
import { applyResources } from "../../cli/desired_state.ts";
import { newCaPem } from "../../cli/setup/cluster_cas.ts";
import { generateKeyPair, privateKeyPem } from "../../core/certificates.ts";
import { valueName } from "../../core/provider_names.ts";
import { openStore } from "../../core/store_url.ts";
import { moto, putParameter } from "../support/moto.ts";
import { benchSmoke, percentile, recordFigures } from "./bench_output.ts";
import {
  appDeployment,
  type ApplyResult,
  appService,
  Fleet,
  nodeGroupOf,
} from "./cluster_scale_fleet.ts";
import { type CountingProxy, countingProxy } from "./counting_proxy.ts";
import type { WorkerStatus } from "./cluster_scale_worker.ts";

const { values } = parseArgs({
  args: Deno.args,
  options: {
    smoke: { type: "boolean", default: false },
    nodes: { type: "string" },
    workers: { type: "string" },
    groups: { type: "string" },
    "idle-s": { type: "string" },
    "baseline-nodes": { type: "string" },
    "baseline-idle-s": { type: "string" },
    applies: { type: "string" },
    "start-spread-s": { type: "string" },
  },
});
const SMOKE = values.smoke || benchSmoke();
const num = (v: string | undefined, full: number, smoke: number) =>
  v !== undefined ? Number(v) : SMOKE ? smoke : full;
const NODES = num(values.nodes, 1000, 6);
const WORKERS = Math.min(NODES, num(values.workers, 4, 2));
const GROUPS = Math.min(NODES, num(values.groups, 10, 2));
const IDLE_S = num(values["idle-s"], 120, 3);
const BASELINE_NODES = Math.min(NODES, num(values["baseline-nodes"], 100, 2));
const BASELINE_IDLE_S = num(values["baseline-idle-s"], 60, 3);
const APPLIES = num(values.applies, 5, 1);
const BASELINE_APPLIES = SMOKE ? 1 : 3;
/** Agents join over this window (a cluster does not boot in one instant; moto is one process). */
const START_SPREAD_S = num(values["start-spread-s"], 240, 0.5);
/** Product defaults: `--interval`, `--secrets-interval` (smoke: values every 2 s, to count some). */
const POLL_MS = 2_000;
const SECRETS_MS = SMOKE ? 2_000 : 60_000;
const VALUES_PER_NODE = 10;
const APPLY_TIMEOUT_MS = SMOKE ? 30_000 : 120_000;
const FALLBACK_TIMEOUT_MS = SMOKE ? 30_000 : 240_000;
const CLUSTER = "scale";
const REGION = "us-east-1";

async function until(
  what: string,
  f: () => Promise<boolean>,
  options: { timeoutMs: number; everyMs?: number; onTimeout?: "throw" | "return" },
): Promise<number | undefined> {
  const t0 = performance.now();
  while (!(await f())) {
    if (performance.now() - t0 > options.timeoutMs) {
      if (options.onTimeout === "return") return undefined;
      throw new Error(`timed out waiting for ${what}`);
    }
    await new Promise((r) => setTimeout(r, options.everyMs ?? 1_000));
  }
  return (performance.now() - t0) / 1000;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Request counts of one bucket (and of the provider APIs), by kind: `GET key`, `Target`. */
function countsOf(proxy: CountingProxy, bucket: string): Map<string, number> {
  const out = new Map<string, number>();
  for (const [what, n] of proxy.counts()) {
    const s3 = /^s3 (\S+) ([^/]*)\/(.*)$/.exec(what);
    if (s3 && s3[2] !== bucket) continue;
    const kind = s3 ? `${s3[1]} ${normalizeKey(s3[3])}` : what.replace(/^aws /, "");
    out.set(kind, (out.get(kind) ?? 0) + n);
  }
  return out;
}

/** Per-object keys folded into one line each (specs by digest, node records by node). */
function normalizeKey(key: string): string {
  return key.replace(/\/sha256\/[0-9a-f]{64}\.json$/, "/sha256/*")
    .replace(/^dns\/nodes\/.*$/, "dns/nodes/*");
}

function total(counts: Map<string, number>, prefix = ""): number {
  let n = 0;
  for (const [k, v] of counts) if (k.startsWith(prefix)) n += v;
  return n;
}

function printCounts(title: string, counts: Map<string, number>, seconds: number): void {
  console.log(`${title} (${seconds.toFixed(1)} s; requests, per minute):`);
  for (const [k, n] of [...counts].sort((a, b) => b[1] - a[1])) {
    console.log(
      `    ${k.padEnd(48)} ${String(n).padStart(7)} ${(n / seconds * 60).toFixed(1).padStart(10)}`,
    );
  }
}

/** The agents' warnings and errors by message (cumulative), most frequent first. */
function printWarnings(when: string, s: WorkerStatus): void {
  const all = Object.entries(s.warnings).sort((a, b) => b[1] - a[1]);
  const n = all.reduce((t, [, c]) => t + c, 0);
  console.log(`  warnings logged by the agents (${when}): ${n}`);
  for (const [w, c] of all.slice(0, 6)) console.log(`    ${String(c).padStart(6)}  ${w}`);
}

const stats = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return { n: s.length, p50: percentile(s, 50), p99: percentile(s, 99), max: s[s.length - 1] };
};
const fmtS = (x: number) => (Number.isFinite(x) ? `${x.toFixed(2)} s` : "not within the wait");

/** One line about an apply: latency, the mesh's share, what it cost and how fast moto served it. */
function describeApply(label: string, a: ApplyResult, counts: Map<string, number>): void {
  const st = stats(a.latenciesS);
  const an = stats(a.announcedS);
  const requests = total(counts);
  console.log(
    `  ${label}: p50 ${fmtS(st.p50)}, p99 ${fmtS(st.p99)}, max ${fmtS(st.max)} (${st.n} agents, ` +
      `${a.direct} by direct polling, ${a.missing} missing); applyResources ${fmtS(a.appliedS)}` +
      (an.n ? `; announced to ${an.n} agents: p50 ${fmtS(an.p50)}, p99 ${fmtS(an.p99)}` : "") +
      `; ${requests} requests until the last manifest (${(requests / a.spreadS).toFixed(0)}/s)`,
  );
}

/** The figures recorded (whatever was measured, also when a later phase fails). */
const figures: Record<string, number> = { cluster_scale_nodes: NODES };

const m = await moto();
const proxy = countingProxy(m.endpoint);
const shm = await Deno.makeTempDir({ dir: "/dev/shm", prefix: "podmin-scale-" });
const fleets: Fleet[] = [];
try {
  console.log(
    `cluster scale: ${NODES} agents in ${WORKERS} processes, ${GROUPS} NodeGroups, ` +
      `${VALUES_PER_NODE} Parameter Store values per node, interval ${POLL_MS} ms` +
      (SMOKE ? " (SMOKE: tiny sizes, figures not meaningful)" : ""),
  );
  // Shared material: the cluster CA and the workload CA key (tmpfs), the values (moto, direct).
  const { certPem, keyPem } = await newCaPem("podmin cluster CA scale bench");
  const clusterCaFile = path.join(shm, "cluster-ca.pem");
  const workloadKeyFile = path.join(shm, "workload-ca.key");
  await Deno.writeTextFile(clusterCaFile, certPem + keyPem);
  await Deno.writeTextFile(
    workloadKeyFile,
    await privateKeyPem((await generateKeyPair()).privateKey),
  );
  const apps = Array.from(
    { length: GROUPS },
    (_, g) => appDeployment(`app-g${g}`, nodeGroupOf(g, GROUPS), VALUES_PER_NODE),
  );
  for (const d of apps) {
    for (const s of d.spec.secrets!) {
      const podName = d.metadata.name;
      const name = valueName({ cluster: CLUSTER, namespace: "default", podName, key: s.key });
      await putParameter(name, crypto.randomUUID());
    }
  }
  /** A bucket with every NodeGroup's app and a Service each (written to moto directly). */
  const newBucket = async () => {
    const bucket = await m.createBucket();
    const store = openStore(`s3://${bucket}`, { region: REGION });
    await applyResources({
      store,
      resources: [...apps, ...apps.map((d) => appService(d.metadata.name))],
    });
    return { bucket, store };
  };
  const appFiles = Object.fromEntries(
    apps.map((d) => [d.spec.nodeGroup, manifestFileName("default", d.metadata.name)]),
  );
  const fleet = (
    o: { bucket: string; nodes: number; workers: number; mesh: boolean; prefix: string },
  ) =>
    Fleet.start({
      config: {
        bucket: o.bucket,
        cluster: CLUSTER,
        region: REGION,
        clusterCaFile,
        workloadKeyFile,
        mesh: o.mesh,
        // The baseline is the agent before issue 18: direct polling, one GetParameter per value.
        batched: o.mesh,
        pollMs: POLL_MS,
        secretsMs: SECRETS_MS,
        ...(SMOKE ? { fallbackMs: 1_000, leaseMs: 3_000 } : {}),
      },
      nodes: o.nodes,
      workers: o.workers,
      groups: GROUPS,
      prefix: o.prefix,
      shm,
      startSpreadMs: START_SPREAD_S * 1000 * o.nodes / NODES,
      env: {
        AWS_ENDPOINT_URL: proxy.endpoint,
        AWS_ACCESS_KEY_ID: "testing",
        AWS_SECRET_ACCESS_KEY: "testing",
        AWS_REGION: REGION,
      },
    });
  const startTimeoutMs = 180_000 + START_SPREAD_S * 1000;

  // --- baseline: a subset without the mesh and without batching ---------------------------------
  const base = await newBucket();
  const baseline = await fleet({
    bucket: base.bucket,
    nodes: BASELINE_NODES,
    workers: 1,
    mesh: false,
    prefix: "direct",
  });
  fleets.push(baseline);
  await until("the baseline agents converged", async () => {
    const s = await baseline.status(appFiles);
    return s.wrote === BASELINE_NODES && s.converged === BASELINE_NODES;
  }, { timeoutMs: startTimeoutMs });
  await sleep(SMOKE ? 500 : 5_000);
  proxy.reset();
  let t0 = performance.now();
  await sleep(BASELINE_IDLE_S * 1000);
  let seconds = (performance.now() - t0) / 1000;
  const baseIdle = countsOf(proxy, base.bucket);
  const scale = NODES / BASELINE_NODES;
  printCounts(`baseline: ${BASELINE_NODES} agents without the mesh, idle`, baseIdle, seconds);
  figures.cluster_idle_s3_gets_per_min_1000_nodes_direct = total(baseIdle, "GET ") / seconds * 60 *
    scale;
  figures.ssm_calls_per_s_1000_nodes_unbatched = total(baseIdle, "AmazonSSM.") / seconds * scale;
  const baseLatencies: number[] = [];
  for (let r = 0; r < BASELINE_APPLIES; r++) {
    proxy.reset();
    const a = await baseline.apply(base.store, `base${r}`, APPLY_TIMEOUT_MS);
    describeApply(`baseline apply ${r}`, a, countsOf(proxy, base.bucket));
    baseLatencies.push(...a.latenciesS);
    await sleep(Math.random() * POLL_MS);
  }
  const baseStats = stats(baseLatencies);
  figures.apply_to_manifest_p50_s_direct = baseStats.p50;
  figures.apply_to_manifest_p99_s_direct = baseStats.p99;
  printWarnings("baseline", await baseline.status());
  console.log(
    `baseline scaled to ${NODES} nodes: ` +
      `${figures.cluster_idle_s3_gets_per_min_1000_nodes_direct.toFixed(0)} S3 GETs/min, ` +
      `${figures.ssm_calls_per_s_1000_nodes_unbatched.toFixed(1)} Parameter Store calls/s; ` +
      `apply → manifest (${BASELINE_NODES} agents) p50 ${fmtS(baseStats.p50)}, p99 ${
        fmtS(baseStats.p99)
      }`,
  );
  await baseline.stop();
  fleets.pop();

  // --- the same subset with the mesh: apply latency where moto keeps up ------------------------
  const sub = await newBucket();
  const subset = await fleet({
    bucket: sub.bucket,
    nodes: BASELINE_NODES,
    workers: 1,
    mesh: true,
    prefix: "subset",
  });
  fleets.push(subset);
  await until("the subset on notifications", async () => {
    const s = await subset.status(appFiles);
    return s.wrote === BASELINE_NODES && s.fresh === BASELINE_NODES;
  }, { timeoutMs: startTimeoutMs });
  const subsetLatencies: number[] = [];
  for (let r = 0; r < BASELINE_APPLIES; r++) {
    proxy.reset();
    const a = await subset.apply(sub.store, `sub${r}`, APPLY_TIMEOUT_MS);
    describeApply(`mesh subset apply ${r}`, a, countsOf(proxy, sub.bucket));
    subsetLatencies.push(...a.latenciesS);
    await sleep(POLL_MS + Math.random() * POLL_MS);
  }
  const subsetStats = stats(subsetLatencies);
  figures.apply_to_manifest_p99_s_mesh_subset = subsetStats.p99;
  console.log(
    `the same ${BASELINE_NODES} agents with the mesh: apply → manifest p50 ${
      fmtS(subsetStats.p50)
    }, ` +
      `p99 ${fmtS(subsetStats.p99)} (direct polling: p50 ${fmtS(baseStats.p50)}, p99 ` +
      `${fmtS(baseStats.p99)})`,
  );
  await subset.stop();
  fleets.pop();

  // --- the mesh: every agent ---------------------------------------------------------------------
  const main = await newBucket();
  let t1 = performance.now();
  const mesh = await fleet({
    bucket: main.bucket,
    nodes: NODES,
    workers: WORKERS,
    mesh: true,
    prefix: "node",
  });
  fleets.push(mesh);
  let lastProgress = 0;
  await until("every agent converged and on notifications", async () => {
    const s = await mesh.status(appFiles);
    if (performance.now() - lastProgress > 30_000) {
      lastProgress = performance.now();
      console.log(
        `  ${((performance.now() - t1) / 1000).toFixed(0)} s: ${s.wrote} wrote their app, ` +
          `${s.converged} converged, ${s.connected} connected, ${s.fresh} on notifications`,
      );
    }
    return s.wrote === NODES && s.converged === NODES && s.fresh === NODES;
  }, { timeoutMs: startTimeoutMs, everyMs: 2_000 });
  let s = await mesh.status();
  console.log(
    `mesh: ${NODES} agents started over ${START_SPREAD_S} s, converged and on notifications ` +
      `after ${((performance.now() - t1) / 1000).toFixed(0)} s; coordinator ${s.coordinator}`,
  );
  printWarnings("mesh start", s);

  // Idle.
  await sleep(SMOKE ? 500 : 10_000);
  proxy.reset();
  const cpu0 = await mesh.cpuSeconds();
  t0 = performance.now();
  await sleep(IDLE_S * 1000);
  seconds = (performance.now() - t0) / 1000;
  const cpuPct = ((await mesh.cpuSeconds()) - cpu0) / seconds * 100;
  const idle = countsOf(proxy, main.bucket);
  printCounts(`mesh: ${NODES} agents, idle`, idle, seconds);
  figures.cluster_idle_s3_gets_per_min_1000_nodes = total(idle, "GET ") / seconds * 60;
  figures.ssm_calls_per_s_1000_nodes = total(idle, "AmazonSSM.") / seconds;
  const ratio = (a: number, b: number) => `${(a / b).toFixed(0)}×`;
  console.log(
    `  idle S3 GETs: ${figures.cluster_idle_s3_gets_per_min_1000_nodes.toFixed(1)}/min for the ` +
      `cluster; direct polling ${
        figures.cluster_idle_s3_gets_per_min_1000_nodes_direct.toFixed(0)
      }` +
      `/min (${
        ratio(
          figures.cluster_idle_s3_gets_per_min_1000_nodes_direct,
          figures.cluster_idle_s3_gets_per_min_1000_nodes,
        )
      })`,
  );
  console.log(
    `  Parameter Store: ${figures.ssm_calls_per_s_1000_nodes.toFixed(2)} calls/s; one call per ` +
      `value ${figures.ssm_calls_per_s_1000_nodes_unbatched.toFixed(1)}/s ` +
      `(${
        ratio(figures.ssm_calls_per_s_1000_nodes_unbatched, figures.ssm_calls_per_s_1000_nodes)
      })`,
  );
  console.log(
    `  simulator: ${cpuPct.toFixed(0)} % of a core for ${NODES} idle agents ` +
      `(${(cpuPct / NODES).toFixed(3)} % each), RSS ${(await mesh.rssMiB()).toFixed(0)} MiB in all`,
  );

  // Applies.
  const latencies: number[] = [];
  const announced: number[] = [];
  for (let r = 0; r < APPLIES; r++) {
    const before = await mesh.status();
    proxy.reset();
    const a = await mesh.apply(main.store, `r${r}`, APPLY_TIMEOUT_MS);
    describeApply(`apply ${r}`, a, countsOf(proxy, main.bucket));
    latencies.push(...a.latenciesS);
    announced.push(...a.announcedS);
    // Let the bucket traffic settle and every agent be back on notifications (a renewal stuck
    // behind an apply's reads can lose the coordinator's lease: that is printed).
    await sleep(SMOKE ? 500 : 5_000 + Math.random() * POLL_MS);
    const waited = await until(
      "notifications",
      async () => (await mesh.status()).fresh === NODES,
      { timeoutMs: 120_000, onTimeout: "return" },
    );
    s = await mesh.status();
    if (s.coordinatorTerm !== before.coordinatorTerm || waited === undefined) {
      console.log(
        `    coordinator term ${before.coordinatorTerm} → ${s.coordinatorTerm}; ${s.fresh}/${NODES} ` +
          `on notifications ${
            waited === undefined ? "after 120 s" : `after ${waited.toFixed(0)} s more`
          }`,
      );
    }
  }
  const applyStats = stats(latencies);
  const announceStats = stats(announced);
  figures.apply_to_manifest_p50_s_1000_nodes = applyStats.p50;
  figures.apply_to_manifest_p99_s_1000_nodes = applyStats.p99;
  figures.apply_to_announce_p99_s_1000_nodes = announceStats.p99;
  figures.cluster_poll_interval_s = POLL_MS / 1000;
  console.log(
    `mesh apply → manifest over ${applyStats.n} samples: p50 ${fmtS(applyStats.p50)}, p99 ` +
      `${fmtS(applyStats.p99)}, max ${fmtS(applyStats.max)}; apply → announcement p50 ` +
      `${fmtS(announceStats.p50)}, p99 ${fmtS(announceStats.p99)}`,
  );

  // Fallback: the coordinator dies; the survivors poll directly until a new one is elected.
  const crashed = await mesh.crashCoordinator();
  const tCrash = performance.now();
  const survivors = NODES - (crashed ? 1 : 0);
  await until("every survivor off notifications", async () => (await mesh.status()).fresh === 0, {
    timeoutMs: 60_000,
    everyMs: 200,
    onTimeout: "return",
  });
  proxy.reset();
  t1 = performance.now();
  const fb = await mesh.apply(main.store, "fallback", FALLBACK_TIMEOUT_MS);
  const fbCounts = countsOf(proxy, main.bucket);
  const fbStats = stats(fb.latenciesS);
  figures.apply_to_manifest_fallback_p99_s_1000_nodes = fbStats.p99;
  figures.cluster_fallback_converged_fraction = (fb.latenciesS.length - fb.missing) / survivors;
  describeApply(`coordinator ${crashed ?? "(none found)"} killed, apply`, fb, fbCounts);
  printCounts(`  requests while it spread`, fbCounts, (performance.now() - t1) / 1000);
  const healed = await until(
    "notifications again",
    async () => (await mesh.status()).fresh === survivors,
    { timeoutMs: 180_000, everyMs: 500, onTimeout: "return" },
  );
  s = await mesh.status();
  console.log(
    healed === undefined
      ? `  ${s.fresh}/${survivors} survivors on notifications 180 s after the apply spread ` +
        `(${JSON.stringify(s.disconnected)})`
      : `  every survivor back on notifications ${
        ((performance.now() - tCrash) / 1000).toFixed(0)
      }` +
        ` s after the kill (term ${s.coordinatorTerm})`,
  );
  printWarnings("mesh, whole run", s);
  await mesh.stop();
  fleets.pop();

  const met = (ok: boolean) => (ok ? "met" : "NOT met");
  const goalS = (POLL_MS + 1000) / 1000;
  const f = figures;
  console.log(`goals (${NODES} agents${NODES < 1000 ? ", fewer than 1,000" : ""}):`);
  console.log(
    `  idle S3 GETs ≤ 60/min: ${f.cluster_idle_s3_gets_per_min_1000_nodes.toFixed(1)} — ` +
      met(f.cluster_idle_s3_gets_per_min_1000_nodes <= 60),
  );
  console.log(
    `  apply → manifest p99 ≤ ${goalS} s: ${fmtS(applyStats.p99)} — ${
      met(applyStats.p99 <= goalS)
    }` +
      ` (apply → announcement p99 ${fmtS(announceStats.p99)}); ${BASELINE_NODES} agents: ` +
      `${fmtS(subsetStats.p99)} — ${met(subsetStats.p99 <= goalS)}`,
  );
  console.log(
    `  Parameter Store ≤ 40 calls/s: ${f.ssm_calls_per_s_1000_nodes.toFixed(2)} — ` +
      met(f.ssm_calls_per_s_1000_nodes <= 40),
  );
  console.log(
    `  coordinator killed, every survivor converged: ` +
      `${(f.cluster_fallback_converged_fraction * 100).toFixed(1)} % — ` +
      met(f.cluster_fallback_converged_fraction === 1),
  );
} catch (err) {
  console.log(`FAILED: ${(err as Error).stack}`);
  for (const fl of fleets) {
    const s = await Promise.race([fl.status(), sleep(5_000).then(() => undefined)]);
    if (!s) continue;
    const { warnings: _, ...summary } = s;
    console.log(`  agents at the failure: ${JSON.stringify(summary)}`);
    printWarnings("at the failure", s);
  }
  Deno.exitCode = 1;
} finally {
  await recordFigures(figures);
  for (const fl of fleets) fl.kill();
  await proxy.close();
  await m.stop();
  await Deno.remove(shm, { recursive: true });
  Deno.exit(Deno.exitCode);
}

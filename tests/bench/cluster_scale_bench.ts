/**
 * Cluster-scale simulation (issue 18, item 4; spec §7.9 "Cost model"): N simulated agents
 * (default 1,000, in worker processes: tests/bench/cluster_scale_worker.ts, driven by
 * tests/bench/cluster_scale_fleet.ts), every request they make counted, at the product's defaults
 * (2 s interval, 60 s value refresh, 15 s coordinator lease, 10 s fallback polling). Agents are
 * spread over NodeGroups; every node runs one Deployment with 10 Parameter Store values.
 *
 * It runs on two S3 peers in turn (`--s3 both`, the default; or `--s3 versitygw|moto`):
 *
 * - **versitygw** (tests/support/versitygw.ts), a real S3 server in Go that serves several
 *   thousand GETs/s here: its figures are the recorded ones. S3 requests are counted from its
 *   access log; Parameter Store stays on moto, through the counting forwarder
 *   (tests/bench/counting_proxy.ts). Its conditional writes are checked before the run.
 * - **moto** for S3 too (the issue's setup), figures recorded with the suffix `_moto`. moto
 *   serves about 300 GETs/s to one client here, and an apply makes every agent read the index: at
 *   1,000 agents moto alone takes longer than the goal allows, which the run shows by measuring
 *   the peer's GET rate first, on the agents' path.
 *
 * Printed per peer, and recorded for tests/bench/run_all.ts (`bench/results.json`):
 *
 * - idle S3 GETs per minute of the whole cluster, by key (with the mesh only its coordinator
 *   polls), and Parameter Store calls per second (`GetParameters`, 10 names per call);
 * - apply → manifest written, p50/p99 over every agent and several applies (each apply adds a
 *   Deployment to every NodeGroup, so every agent writes a manifest), with apply → announcement
 *   (the mesh's share) beside it, and what the first apply cost, by request kind;
 * - the same after the coordinator was killed (the members fall back to jittered direct polling
 *   until a new coordinator is elected), and the share of survivors that converged;
 * - the baseline, in the same run: a subset of the same agents without the mesh (direct polling)
 *   and without batching (one `GetParameter` per value), its idle rates scaled to N by the number
 *   of agents (each agent polls on its own timers: the rates are linear in N). Its apply latency
 *   is the subset's own (not scaled), beside the same subset's with the mesh.
 *
 * Goals (issue 18): ≤ 60 idle GETs/min for 1,000 nodes; p99 ≤ poll + 1 s; ≤ 40 SSM calls/s;
 * fallback keeps every node converging.
 *
 * Run: deno task bench:scale [--nodes N --workers P --s3 PEER ...] (figures merged into
 * bench/results.json, or `$PODMIN_BENCH_JSON` under run_all.ts); `--smoke` (or
 * $PODMIN_BENCH_SMOKE=1): a handful of agents, short windows and intervals (figures present, not
 * meaningful). versitygw is built by tests/setup.sh (/opt/podmin-test/bin on PATH).
 */

import * as path from "node:path";
import { parseArgs } from "node:util";
import { manifestFileName } from "../../agent/deployments/static_pod.ts";
import { applyResources } from "../../cli/desired_state.ts";
import { valueName } from "../../core/model/provider_names.ts";
import type { ObjectStore } from "../../core/store/object_store.ts";
import { S3Store } from "../../core/store/s3_store.ts";
import { openStore } from "../../core/store/store_url.ts";
import { moto, putParameter } from "../support/moto.ts";
import { checkConditionalWrites, startVersitygw } from "../support/versitygw.ts";
import {
  benchSmoke,
  median,
  percentile,
  processCpuSeconds,
  recordFigures,
} from "./bench_output.ts";
import {
  appDeployment,
  type ApplyResult,
  appService,
  Fleet,
  nodeGroupOf,
  writeFleetCaFiles,
} from "./cluster_scale_fleet.ts";
import { countingProxy } from "./counting_proxy.ts";
import { countingStore } from "../support/counting_store.ts";
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
    s3: { type: "string", default: "both" },
    only: { type: "string" },
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
/** The same on versitygw (the join costs the simulator's CPU more than the S3 server's). */
const START_SPREAD_S_FAST = num(values["start-spread-s"], 90, 0.5);
type S3PeerName = "versitygw" | "moto";
const S3_PEERS: S3PeerName[] = values.s3 === "both"
  ? ["versitygw", "moto"]
  : values.s3 === "versitygw" || values.s3 === "moto"
  ? [values.s3]
  : (() => {
    throw new Error(`--s3 takes both, versitygw or moto, not ${values.s3}`);
  })();
/** Product defaults: `--interval`, `--secrets-interval` (smoke: values every 2 s, to count some). */
const POLL_MS = 2_000;
const SECRETS_MS = SMOKE ? 2_000 : 60_000;
const VALUES_PER_NODE = 10;
const APPLY_TIMEOUT_MS = SMOKE ? 30_000 : 120_000;
const FALLBACK_TIMEOUT_MS = SMOKE ? 30_000 : 240_000;
/** `--only failover`: join every agent, kill the coordinator, count the failover; nothing else. */
const FAILOVER_ONLY = values.only === "failover";
if (values.only !== undefined && !FAILOVER_ONLY) {
  throw new Error(`--only takes failover, not ${values.only}`);
}
/** The coordinator lease the agents run with (the product default; smoke: 3 s). */
const LEASE_S = SMOKE ? 3 : 15;
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
function byKind(counts: Map<string, number>, bucket: string): Map<string, number> {
  const out = new Map<string, number>();
  for (const [what, n] of counts) {
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

/**
 * Kills the coordinator of `mesh` (no lease release) and counts the failover: kill → a new
 * coordinator (an agent holds a snapshot of a newer term), the agents' S3 requests until then per
 * survivor and lease period (by kind), and kill → every survivor connected again.
 */
async function measureFailover(o: {
  mesh: Fleet;
  peer: { reset(): Promise<void> };
  counts: () => Promise<Map<string, number>>;
  f: (key: string, value: number) => number;
}): Promise<void> {
  const { mesh } = o;
  const term0 = (await mesh.status()).coordinatorTerm;
  await o.peer.reset();
  const crashed = await mesh.crashCoordinator();
  const t0 = performance.now();
  const survivors = NODES - (crashed ? 1 : 0);
  const limitS = 20 * LEASE_S;
  const failoverS = await until(
    "a new coordinator",
    async () => (await mesh.status()).coordinatorTerm > term0,
    { timeoutMs: limitS * 1000, everyMs: 250, onTimeout: "return" },
  );
  const seconds = failoverS ?? (performance.now() - t0) / 1000;
  const leaderless = await o.counts();
  const s3 = total(leaderless) - total(leaderless, "AmazonSSM.");
  const perAgentPerLease = s3 / survivors / Math.max(1, seconds / LEASE_S);
  o.f("cluster_failover_s", failoverS ?? Infinity);
  o.f("cluster_leaderless_requests_per_agent_per_lease", perAgentPerLease);
  console.log(
    `failover: coordinator ${crashed ?? "(none found)"} killed → ` +
      (failoverS === undefined
        ? `no new coordinator within ${limitS} s`
        : `new coordinator (term > ${term0}) after ${failoverS.toFixed(1)} s = ` +
          `${(failoverS / LEASE_S).toFixed(2)} lease periods`) +
      `; while leaderless ${s3} S3 requests = ${perAgentPerLease.toFixed(3)} per agent per ` +
      `lease period (${survivors} survivors, lease ${LEASE_S} s)`,
  );
  printCounts("  requests while leaderless", leaderless, seconds);
  const joinedS = await until(
    "every survivor connected",
    async () => (await mesh.status()).connected === survivors,
    { timeoutMs: limitS * 1000, everyMs: 500, onTimeout: "return" },
  );
  const s = await mesh.status();
  console.log(
    joinedS === undefined
      ? `  ${s.connected}/${survivors} survivors connected ${limitS} s after the new coordinator ` +
        `(${JSON.stringify(s.disconnected)})`
      : `  every survivor connected ${((performance.now() - t0) / 1000).toFixed(1)} s after the ` +
        `kill (term ${s.coordinatorTerm})`,
  );
  printCounts(
    "  requests from the kill until every survivor connected",
    await o.counts(),
    (performance.now() - t0) / 1000,
  );
}

/** The figures recorded (whatever was measured, also when a later phase fails). */
const figures: Record<string, number> = { cluster_scale_nodes: NODES };

/** The figures recorded of the second peer (moto after versitygw): the goals' and its GET rate. */
const SECOND_PEER_KEYS = new Set([
  "s3_peer_gets_per_s",
  "cluster_idle_s3_gets_per_min_1000_nodes",
  "apply_to_manifest_p50_s_1000_nodes",
  "apply_to_manifest_p99_s_1000_nodes",
  "cluster_fallback_converged_fraction",
  "cluster_failover_s",
  "cluster_leaderless_requests_per_agent_per_lease",
  "cluster_requests_per_apply",
  "cluster_apply_p99",
  "cluster_runtime_aborts",
]);

/**
 * The cluster's S3 requests of one apply (spec §7.9, changes over the mesh): every request from
 * the apply until the last manifest but the node records (`PUT dns/nodes/*`, written at a bounded
 * rate after it), the provider APIs and the apply's own writes (`own`: the bench's, when the peer
 * counts them).
 */
function requestsPerApply(counts: Map<string, number>, own: number): number {
  let n = 0;
  for (const [k, v] of counts) {
    if (k.startsWith("AmazonSSM.") || k.startsWith("secretsmanager.")) continue;
    if (k.startsWith("PUT dns/nodes/")) continue;
    n += v;
  }
  return n - own;
}

/** Where the agents' S3 requests go and how they are counted. */
interface S3Peer {
  name: S3PeerName;
  /** Environment of the agents for S3 (SSM always goes to moto through the counting proxy). */
  env: Record<string, string>;
  /** A new bucket and the bench's own store on it (writes not counted as the agents'). */
  newBucket(): Promise<{ bucket: string; store: ObjectStore }>;
  /** A store on `bucket` as the agents reach it (for the peer's GET rate). */
  agentStore(bucket: string): ObjectStore;
  /** Requests since the last reset: S3 (this peer) and the provider APIs (moto, the proxy). */
  counts(): Promise<Map<string, number>>;
  reset(): Promise<void>;
  /** True when `counts` includes the bench's own requests (versitygw's access log). */
  countsOwn: boolean;
  /** CPU seconds the S3 server used so far (undefined: not measured, moto). */
  cpuSeconds(): Promise<number | undefined>;
  stop(): Promise<void>;
}

/**
 * GETs per second the peer serves to one client process on the agents' path (a 3 KiB object,
 * 32 at a time): the ceiling of an apply's fan-out, measured in the same run.
 */
async function peerGetRate(peer: S3Peer): Promise<number> {
  const { bucket, store } = await peer.newBucket();
  await store.put("rate/probe.json", new Uint8Array(3 * 1024).fill(0x61));
  const agentStore = peer.agentStore(bucket);
  const n = SMOKE ? 100 : 3_000;
  let left = n;
  const t0 = performance.now();
  await Promise.all(Array.from({ length: 32 }, async () => {
    while (left-- > 0) await agentStore.get("rate/probe.json");
  }));
  return n / ((performance.now() - t0) / 1000);
}

const m = await moto();
const proxy = countingProxy(m.endpoint);
const shm = await Deno.makeTempDir({ dir: "/dev/shm", prefix: "podmin-scale-" });
const fleets: Fleet[] = [];
const peers: S3Peer[] = [];

/** moto for S3 too, through the counting proxy (the agents' whole traffic on one moto). */
function motoPeer(): S3Peer {
  return {
    name: "moto",
    env: {},
    async newBucket() {
      const bucket = await m.createBucket();
      return { bucket, store: openStore(`s3://${bucket}`, { region: REGION }) };
    },
    agentStore: (bucket) => new S3Store({ bucket, region: REGION, endpoint: proxy.endpoint }),
    counts: () => Promise.resolve(proxy.counts()),
    countsOwn: false,
    reset: () => Promise.resolve(proxy.reset()),
    cpuSeconds: () => Promise.resolve(undefined),
    stop: () => Promise.resolve(),
  };
}

/** versitygw for S3 (counted from its access log), moto for Parameter Store. */
async function versitygwPeer(): Promise<S3Peer> {
  const g = await startVersitygw();
  // What the leases and announcements rely on, checked on this gateway before the run.
  await checkConditionalWrites(g.store(await g.createBucket()));
  return {
    name: "versitygw",
    env: { AWS_ENDPOINT_URL_S3: g.endpoint },
    async newBucket() {
      const bucket = await g.createBucket();
      return { bucket, store: g.store(bucket) };
    },
    agentStore: (bucket) => g.store(bucket),
    async counts() {
      const all = await g.counts();
      for (const [k, n] of proxy.counts()) all.set(k, (all.get(k) ?? 0) + n);
      return all;
    },
    countsOwn: true,
    async reset() {
      await g.reset();
      proxy.reset();
    },
    cpuSeconds: () => processCpuSeconds(g.pid),
    stop: () => g.stop(),
  };
}

/**
 * The whole simulation on one S3 peer; figures keyed with `suffix` (`""` for the first peer,
 * `_moto` for moto after another one).
 */
async function simulate(peer: S3Peer, suffix: string): Promise<void> {
  const f = (key: string, value: number) => {
    if (!suffix || SECOND_PEER_KEYS.has(key)) figures[`${key}${suffix}`] = value;
    return value;
  };
  const started = fleets.length;
  const stopped: Fleet[] = [];
  try {
    await simulateOn(peer, f, stopped);
  } finally {
    // Worker processes that died on their own (the runtime's abort, denoland/deno#36788).
    const all = [...stopped, ...fleets.slice(started)];
    const aborts = f("cluster_runtime_aborts", all.reduce((n, fl) => n + fl.aborts(), 0));
    console.log(`runtime aborts on ${peer.name}: ${aborts} worker process(es)`);
  }
}

/** The simulation's phases on one peer; `stopped` collects the fleets it stopped. */
async function simulateOn(
  peer: S3Peer,
  f: (key: string, value: number) => number,
  stopped: Fleet[],
): Promise<void> {
  const spreadS = peer.name === "moto" ? START_SPREAD_S : START_SPREAD_S_FAST;
  console.log(
    `\n=== S3 on ${peer.name}: ${NODES} agents in ${WORKERS} processes, ${GROUPS} NodeGroups, ` +
      `${VALUES_PER_NODE} Parameter Store values per node (moto), interval ${POLL_MS} ms` +
      (SMOKE ? " (SMOKE: tiny sizes, figures not meaningful)" : ""),
  );
  const rate = f("s3_peer_gets_per_s", await peerGetRate(peer));
  console.log(
    `${peer.name} serves ${rate.toFixed(0)} GETs/s to one client on the agents' path: ` +
      `${NODES} index GETs alone take ≥ ${(NODES / rate).toFixed(2)} s`,
  );
  // Shared material: the cluster CA and the workload CA key (tmpfs), the values (moto, direct).
  const { clusterCaFile, workloadKeyFile } = await writeFleetCaFiles(
    shm,
    "podmin cluster CA scale bench",
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
  /** A bucket with every NodeGroup's app and a Service each (written by the bench directly). */
  const newBucket = async () => {
    const { bucket, store } = await peer.newBucket();
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
      prefix: `${peer.name}-${o.prefix}`,
      shm,
      startSpreadMs: spreadS * 1000 * o.nodes / NODES,
      env: {
        AWS_ENDPOINT_URL: proxy.endpoint,
        AWS_ACCESS_KEY_ID: "testing",
        AWS_SECRET_ACCESS_KEY: "testing",
        AWS_REGION: REGION,
        ...peer.env,
      },
    });
  const startTimeoutMs = 180_000 + spreadS * 1000;
  const countsOf = async (bucket: string) => byKind(await peer.counts(), bucket);

  if (FAILOVER_ONLY) {
    const main = await newBucket();
    const t1 = performance.now();
    const mesh = await fleet({
      bucket: main.bucket,
      nodes: NODES,
      workers: WORKERS,
      mesh: true,
      prefix: "node",
    });
    fleets.push(mesh);
    await until("every agent converged and on notifications", async () => {
      const s = await mesh.status(appFiles);
      return s.wrote === NODES && s.converged === NODES && s.fresh === NODES;
    }, { timeoutMs: startTimeoutMs, everyMs: 2_000 });
    console.log(
      `mesh: ${NODES} agents on notifications after ${
        ((performance.now() - t1) / 1000).toFixed(0)
      } s`,
    );
    await sleep(SMOKE ? 500 : 10_000);
    await measureFailover({ mesh, peer, counts: () => countsOf(main.bucket), f });
    printWarnings("mesh, whole run", await mesh.status());
    await mesh.stop();
    stopped.push(fleets.pop()!);
    return;
  }

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
  await peer.reset();
  let t0 = performance.now();
  await sleep(BASELINE_IDLE_S * 1000);
  let seconds = (performance.now() - t0) / 1000;
  const baseIdle = await countsOf(base.bucket);
  const scale = NODES / BASELINE_NODES;
  printCounts(`baseline: ${BASELINE_NODES} agents without the mesh, idle`, baseIdle, seconds);
  const directGets = f(
    "cluster_idle_s3_gets_per_min_1000_nodes_direct",
    total(baseIdle, "GET ") / seconds * 60 * scale,
  );
  const unbatched = f(
    "ssm_calls_per_s_1000_nodes_unbatched",
    total(baseIdle, "AmazonSSM.") / seconds * scale,
  );
  const baseLatencies: number[] = [];
  for (let r = 0; r < BASELINE_APPLIES; r++) {
    await peer.reset();
    const a = await baseline.apply(base.store, `base${r}`, APPLY_TIMEOUT_MS);
    describeApply(`baseline apply ${r}`, a, await countsOf(base.bucket));
    baseLatencies.push(...a.latenciesS);
    await sleep(Math.random() * POLL_MS);
  }
  const baseStats = stats(baseLatencies);
  f("apply_to_manifest_p50_s_direct", baseStats.p50);
  f("apply_to_manifest_p99_s_direct", baseStats.p99);
  printWarnings("baseline", await baseline.status());
  console.log(
    `baseline scaled to ${NODES} nodes: ${directGets.toFixed(0)} S3 GETs/min, ` +
      `${unbatched.toFixed(1)} Parameter Store calls/s; apply → manifest (${BASELINE_NODES} ` +
      `agents) p50 ${fmtS(baseStats.p50)}, p99 ${fmtS(baseStats.p99)}`,
  );
  await baseline.stop();
  stopped.push(fleets.pop()!);

  // --- the same subset with the mesh ------------------------------------------------------------
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
    await peer.reset();
    const a = await subset.apply(sub.store, `sub${r}`, APPLY_TIMEOUT_MS);
    describeApply(`mesh subset apply ${r}`, a, await countsOf(sub.bucket));
    subsetLatencies.push(...a.latenciesS);
    await sleep(POLL_MS + Math.random() * POLL_MS);
  }
  const subsetStats = stats(subsetLatencies);
  f("apply_to_manifest_p99_s_mesh_subset", subsetStats.p99);
  console.log(
    `the same ${BASELINE_NODES} agents with the mesh: apply → manifest p50 ` +
      `${fmtS(subsetStats.p50)}, p99 ${fmtS(subsetStats.p99)} (direct polling: p50 ` +
      `${fmtS(baseStats.p50)}, p99 ${fmtS(baseStats.p99)})`,
  );
  await subset.stop();
  stopped.push(fleets.pop()!);

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
    `mesh: ${NODES} agents started over ${spreadS} s, converged and on notifications ` +
      `after ${((performance.now() - t1) / 1000).toFixed(0)} s; coordinator ${s.coordinator}`,
  );
  printWarnings("mesh start", s);

  // Idle.
  await sleep(SMOKE ? 500 : 10_000);
  await peer.reset();
  const cpu0 = await mesh.cpuSeconds();
  t0 = performance.now();
  await sleep(IDLE_S * 1000);
  seconds = (performance.now() - t0) / 1000;
  const cpuPct = ((await mesh.cpuSeconds()) - cpu0) / seconds * 100;
  const idle = await countsOf(main.bucket);
  printCounts(`mesh: ${NODES} agents, idle`, idle, seconds);
  const idleGets = f("cluster_idle_s3_gets_per_min_1000_nodes", total(idle, "GET ") / seconds * 60);
  const ssm = f("ssm_calls_per_s_1000_nodes", total(idle, "AmazonSSM.") / seconds);
  const ratio = (a: number, b: number) => `${(a / b).toFixed(0)}×`;
  console.log(
    `  idle S3 GETs: ${idleGets.toFixed(1)}/min for the cluster; direct polling ` +
      `${directGets.toFixed(0)}/min (${ratio(directGets, idleGets)})`,
  );
  console.log(
    `  Parameter Store: ${ssm.toFixed(2)} calls/s; one call per value ${unbatched.toFixed(1)}/s ` +
      `(${ratio(unbatched, ssm)})`,
  );
  console.log(
    `  simulator: ${cpuPct.toFixed(0)} % of a core for ${NODES} idle agents ` +
      `(${(cpuPct / NODES).toFixed(3)} % each), RSS ${(await mesh.rssMiB()).toFixed(0)} MiB in all`,
  );

  // Applies.
  const latencies: number[] = [];
  const announced: number[] = [];
  /** The cluster's requests per apply (`requestsPerApply`). */
  const requestsPerApplies: number[] = [];
  /** Simulator CPU per agent per apply, ms. */
  const applyCpuMs: number[] = [];
  for (let r = 0; r < APPLIES; r++) {
    const before = await mesh.status();
    await peer.reset();
    const [simCpu0, peerCpu0] = [await mesh.cpuSeconds(), await peer.cpuSeconds()];
    const cli = countingStore(main.store);
    const a = await mesh.apply(cli.store, `r${r}`, APPLY_TIMEOUT_MS);
    const [simCpu, peerCpu] = [
      (await mesh.cpuSeconds()) - simCpu0,
      peerCpu0 === undefined ? undefined : (await peer.cpuSeconds())! - peerCpu0,
    ];
    const counts = await countsOf(main.bucket);
    describeApply(`apply ${r}`, a, counts);
    const requests = requestsPerApply(counts, peer.countsOwn ? cli.total() : 0);
    requestsPerApplies.push(requests);
    console.log(
      `    ${requests} cluster requests (node records and the apply's own ${cli.total()} ` +
        `excluded); node records written until then: ${total(counts, "PUT dns/nodes/")}`,
    );
    // Until the last manifest (plus up to 50 ms of the await's polling): what 2 cores had to do.
    console.log(
      `    CPU until the wait ended: simulator ${simCpu.toFixed(2)} s ` +
        `(${(simCpu / NODES * 1000).toFixed(2)} ms per agent)` +
        (peerCpu === undefined ? "" : `, ${peer.name} ${peerCpu.toFixed(2)} s`) +
        `; the machine has 2 cores`,
    );
    applyCpuMs.push(simCpu / NODES * 1000);
    if (r === 0) printCounts(`    what apply 0 cost until its last manifest`, counts, a.spreadS);
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
  f("apply_to_manifest_p50_s_1000_nodes", applyStats.p50);
  f("apply_to_manifest_p99_s_1000_nodes", applyStats.p99);
  f("cluster_apply_p99", applyStats.p99);
  // The worst apply: the goal holds for each (≤ 50 at 1,000 agents).
  const perApply = f("cluster_requests_per_apply", Math.max(...requestsPerApplies));
  f("apply_to_announce_p99_s_1000_nodes", announceStats.p99);
  const cpuMs = median(applyCpuMs);
  console.log(
    `mesh apply → manifest over ${applyStats.n} samples: p50 ${fmtS(applyStats.p50)}, p99 ` +
      `${fmtS(applyStats.p99)}, max ${fmtS(applyStats.max)}; apply → announcement p50 ` +
      `${fmtS(announceStats.p50)}, p99 ${fmtS(announceStats.p99)}; the simulator's CPU per ` +
      `agent and apply ${cpuMs.toFixed(2)} ms (median): ${NODES} agents need ≥ ` +
      `${(cpuMs * NODES / 2000).toFixed(2)} s of this machine's 2 cores after the announcement`,
  );

  // Failover: the coordinator dies; counted until a new one is elected and every survivor is on it.
  await measureFailover({ mesh, peer, counts: () => countsOf(main.bucket), f });

  // Fallback: the new coordinator dies too, and an apply comes while the survivors elect the next.
  const crashed = await mesh.crashCoordinator();
  const tCrash = performance.now();
  const survivors = (await mesh.status()).alive;
  await until("every survivor off notifications", async () => (await mesh.status()).fresh === 0, {
    timeoutMs: 60_000,
    everyMs: 200,
    onTimeout: "return",
  });
  await peer.reset();
  t1 = performance.now();
  const fb = await mesh.apply(main.store, "fallback", FALLBACK_TIMEOUT_MS);
  const fbCounts = await countsOf(main.bucket);
  const fbStats = stats(fb.latenciesS);
  f("apply_to_manifest_fallback_p99_s_1000_nodes", fbStats.p99);
  const converged = f(
    "cluster_fallback_converged_fraction",
    (fb.latenciesS.length - fb.missing) / survivors,
  );
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
  stopped.push(fleets.pop()!);

  const met = (ok: boolean) => (ok ? "met" : "NOT met");
  const goalS = (POLL_MS + 1000) / 1000;
  console.log(
    `goals, S3 on ${peer.name} (${NODES} agents${NODES < 1000 ? ", fewer than 1,000" : ""}):`,
  );
  console.log(`  idle S3 GETs ≤ 60/min: ${idleGets.toFixed(1)} — ${met(idleGets <= 60)}`);
  console.log(
    `  apply → manifest p99 ≤ ${goalS} s: ${fmtS(applyStats.p99)} — ${
      met(applyStats.p99 <= goalS)
    } (apply → announcement p99 ${fmtS(announceStats.p99)}; ${peer.name} serves ` +
      `${rate.toFixed(0)} GETs/s); ${BASELINE_NODES} agents: ${fmtS(subsetStats.p99)} — ` +
      met(subsetStats.p99 <= goalS),
  );
  console.log(`  Parameter Store ≤ 40 calls/s: ${ssm.toFixed(2)} — ${met(ssm <= 40)}`);
  console.log(
    `  S3 requests per apply ≤ 50 (node records excluded): worst ${perApply} ` +
      `(${requestsPerApplies.join(", ")}) — ${met(perApply <= 50)}`,
  );
  console.log(
    `  coordinator killed, every survivor converged: ${(converged * 100).toFixed(1)} % — ` +
      met(converged === 1),
  );
}

try {
  figures.cluster_poll_interval_s = POLL_MS / 1000;
  for (const [i, name] of S3_PEERS.entries()) {
    const peer = name === "moto" ? motoPeer() : await versitygwPeer();
    peers.push(peer);
    // moto's figures take `_moto` after another peer, and in a failover-only run.
    await simulate(peer, name === "moto" && (i > 0 || FAILOVER_ONLY) ? "_moto" : "");
    await peer.stop();
    peers.pop();
  }
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
  // Run on its own (`deno task bench:scale`, not a smoke run) it keeps its figures too.
  await recordFigures(figures, {
    standalone: SMOKE ? undefined : path.join(import.meta.dirname!, "../../bench/results.json"),
  });
  for (const fl of fleets) fl.kill();
  for (const p of peers) await p.stop().catch(() => {});
  await proxy.close();
  await m.stop();
  await Deno.remove(shm, { recursive: true });
  Deno.exit(Deno.exitCode);
}

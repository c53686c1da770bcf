/**
 * Benchmark of discovery, the endpoint mesh and Service DNS (issue 14, "Bench") on moto, 50 agents
 * in one process (tests/mesh/discovery_cluster.ts: each the product's `DiscoveryMesh` on its own
 * simulated kubelet Pods API), a `DnsPublisher` at the agent's interval and a real CoreDNS 1.15.0
 * serving its zone with the Corefile vmconfig generates. Printed figures:
 *
 * 1. Pod Ready: a Pod of an existing Service turns Ready on node k (one Pods API event) → every
 *    agent has a snapshot with its address. p50/p99 over the trials; snapshot messages per change.
 * 2. New Service: `podmin apply` of a Service (the product's `applyResources`) and its Pod turning
 *    Ready at the same moment → every agent's snapshot has the address, and CoreDNS answers the
 *    Service's name with its VIP. (The zone holds Service VIPs, not endpoints: a Pod turning Ready
 *    on an existing Service changes no DNS answer, so DNS is timed from a new Service.)
 * 3. Peers in the same run: (a) the mesh replaced by every agent polling one shared endpoints
 *    object at the same interval (conditional GET; the writer PUTs it at the change) — the cheapest
 *    polling design; (b) one conditional GET round trip to moto (the bucket's floor).
 *
 * Run: deno run --allow-all tests/bench/mesh_bench.ts   (`deno task bench` runs it)
 */

import * as path from "node:path";
import { DnsPublisher } from "../../agent/dns/dns_publisher.ts";
import { Loop } from "../../agent/loop.ts";
import { RUN_FLAGS } from "../../agent/run_flags.ts";
import { DEFAULT_CLUSTER_DOMAIN } from "../../agent/services/services_view.ts";
import { parseDuration } from "../../core/kit/duration.ts";
import { silentLogger } from "../../core/kit/log.ts";
import { SERVICE_INDEX } from "../../core/bucket/bucket_layout.ts";
import { readServiceIndex } from "../../core/bucket/service_index.ts";
import { openStore } from "../../core/store/store_url.ts";
import { runGenerator } from "../../vmconfig/node_files.ts";
import { freePort, moto } from "../support/moto.ts";
import {
  applyServices,
  type ClusterAgent,
  DiscoveryCluster,
  NAMESPACE,
  podAddress,
  servicePod,
  testClusterCa,
} from "../mesh/discovery_cluster.ts";
import { benchSmoke, percentile, recordFigures } from "./bench_output.ts";
import { nodePeerProgram } from "../support/node_peers.ts";

const COREDNS = nodePeerProgram("coredns");

const SMOKE = benchSmoke();
const N = SMOKE ? 5 : 50;
const POD_TRIALS = SMOKE ? 3 : 40;
const SERVICE_TRIALS = SMOKE ? 2 : 20;
const BASELINE_TRIALS = SMOKE ? 2 : 20;
const GET_ROUNDS = SMOKE ? 10 : 200;
/** The agent's `--interval` default: Services re-read and DNS pass. */
const INTERVAL_MS = parseDuration(RUN_FLAGS.interval.default, "interval");
const WEB = `${NAMESPACE}/web`;

const ms = (x: number) => `${x.toFixed(0)} ms`;
/**
 * A random pause before a trial of a polled path: a trial that starts right after the previous one
 * ended would start at the same phase of the pollers every time (and measure one point of the
 * distribution); starting at a random phase samples all of it.
 */
const randomPhase = () => new Promise((r) => setTimeout(r, Math.random() * INTERVAL_MS));
const sorted = (xs: number[]) => [...xs].sort((a, b) => a - b);

function has(a: ClusterAgent, service: string, ip: string): boolean {
  return a.snapshot?.endpoints[service]?.includes(ip) ?? false;
}

/** AAAA of `name` from the DNS server on 127.0.0.1:`port` (a fresh resolver per query). */
async function aaaa(port: number, name: string): Promise<string[]> {
  try {
    return await Deno.resolveDns(name, "AAAA", { nameServer: { ipAddr: "127.0.0.1", port } });
  } catch {
    return []; // NXDOMAIN, or no answer yet
  }
}

const m = await moto();
const bucket = await m.createBucket();
const store = openStore(`s3://${bucket}`);
const { ca } = await testClusterCa();
const dir = await Deno.makeTempDir({ prefix: "podmin-mesh-bench-" });
let cluster: DiscoveryCluster | undefined;
let coredns: Deno.ChildProcess | undefined;
let dnsLoop: Loop | undefined;
try {
  await applyServices(store, ["web"]);
  const t0 = performance.now();
  cluster = await DiscoveryCluster.start({
    store,
    ca,
    indices: Array.from({ length: N }, (_, i) => i),
    dir,
    servicesIntervalMs: INTERVAL_MS,
    initialPods: (i) => [servicePod({ app: "web", node: i, n: 0, ready: true })],
  });
  const agents = cluster.agents;
  await cluster.until(
    "the cluster's complete snapshot",
    () => agents.every((a) => a.snapshot?.endpoints[WEB]?.length === N),
  );
  console.log(`mesh bench: ${N} agents converged in ${ms(performance.now() - t0)}`);

  // Agent 0's zone writer as `run` wires it: a pass every interval and at once whenever its
  // Services change (read on the coordinator's announcement); CoreDNS with vmconfig's Corefile.
  const dns = new DnsPublisher({
    services: agents[0].services,
    dir: path.join(dir, "dns"),
    domain: DEFAULT_CLUSTER_DOMAIN,
    log: silentLogger,
  });
  const zoneWriter = new Loop({
    name: "dns",
    intervalMs: INTERVAL_MS,
    pass: async () => ({ status: await dns.pass() }),
  });
  dnsLoop = zoneWriter;
  agents[0].services.onChange(() => zoneWriter.hint());
  dnsLoop.start();
  const dnsPort = await freePort();
  const corefile = await runGenerator({
    name: "gen_corefile",
    args: ["127.0.0.1", String(dnsPort), dns.zoneFile, DEFAULT_CLUSTER_DOMAIN, "127.0.0.1:9"],
  });
  const reload = /reload (\S+)/.exec(corefile)?.[1] ?? "?";
  await Deno.writeTextFile(path.join(dir, "Corefile"), corefile);
  coredns = new Deno.Command(COREDNS, {
    args: ["-conf", path.join(dir, "Corefile")],
    cwd: dir,
    stdout: "null",
    stderr: "null",
  }).spawn();
  const webName = `web.${NAMESPACE}.svc.${DEFAULT_CLUSTER_DOMAIN}`;
  for (let i = 0; !(await aaaa(dnsPort, webName)).length; i++) {
    if (i > 300) throw new Error("CoreDNS never answered the first Service");
    await new Promise((r) => setTimeout(r, 50));
  }

  // 1. A Pod of an existing Service turns Ready on node k.
  const podReady: number[] = [];
  const podGone: number[] = [];
  const messages: number[] = [];
  for (let t = 0; t < POD_TRIALS; t++) {
    const k = agents[(t * 7 + 3) % N];
    const pod = servicePod({ app: "web", node: k.index, n: t + 1, ready: true });
    const ip = podAddress(k.index, t + 1);
    const before = agents.reduce((n, a) => n + a.received, 0);
    const start = performance.now();
    k.pods.set(pod);
    await cluster.until(
      `trial ${t}: the Pod everywhere`,
      () => agents.every((a) => has(a, WEB, ip)),
    );
    podReady.push(Math.max(...agents.map((a) => a.arrivedAt!)) - start);
    messages.push(agents.reduce((n, a) => n + a.received, 0) - before);
    const gone = performance.now();
    k.pods.delete(pod.uid);
    await cluster.until(`trial ${t}: the Pod gone`, () => agents.every((a) => !has(a, WEB, ip)));
    podGone.push(Math.max(...agents.map((a) => a.arrivedAt!)) - gone);
  }

  // 2. A new Service and its Pod turning Ready at once: snapshots and the name through CoreDNS.
  const serviceSnapshot: number[] = [];
  const serviceDns: number[] = [];
  const serviceAnnounced: number[] = [];
  const announcedToDns: number[] = [];
  for (let t = 0; t < SERVICE_TRIALS; t++) {
    const name = `svc-${t}`;
    const k = agents[(t * 11 + 5) % N];
    await randomPhase();
    agents[0].servicesAnnouncedAt = undefined;
    await applyServices(store, [name]);
    const start = performance.now();
    k.pods.set(servicePod({ app: name, node: k.index, n: 0, ready: true }));
    const ip = podAddress(k.index, 0);
    const vip = (await readServiceIndex(store))!.services.find((s) => s.name === name)!.vip;
    const snapshots = cluster.until(
      `${name} everywhere`,
      () => agents.every((a) => has(a, `${NAMESPACE}/${name}`, ip)),
    ).then(() => Math.max(...agents.map((a) => a.arrivedAt!)) - start);
    const fqdn = `${name}.${NAMESPACE}.svc.${DEFAULT_CLUSTER_DOMAIN}`;
    const answered = (async () => {
      while (!(await aaaa(dnsPort, fqdn)).includes(vip)) {
        if (performance.now() - start > 30_000) throw new Error(`${fqdn} never answered`);
        await new Promise((r) => setTimeout(r, 10));
      }
      return performance.now() - start;
    })();
    const [s, d] = await Promise.all([snapshots, answered]);
    serviceSnapshot.push(s);
    serviceDns.push(d);
    const announcedAt = agents[0].servicesAnnouncedAt! - start;
    serviceAnnounced.push(announcedAt);
    announcedToDns.push(d - announcedAt);
  }

  // 3a. Peer: the mesh replaced by every agent polling one endpoints object at the same interval.
  const key = "bench/endpoints.json";
  let etag = (await store.put(key, new TextEncoder().encode("0"))).etag;
  const seen = agents.map(() => etag);
  const seenAt = agents.map(() => 0);
  let polling = true;
  const pollers = agents.map(async (_, i) => {
    await new Promise((r) => setTimeout(r, Math.random() * INTERVAL_MS)); // agents' phases differ
    while (polling) {
      const started = performance.now();
      try {
        const got = await store.get(key, { ifNoneMatch: seen[i] });
        if (!got.notModified && got.info.etag !== seen[i]) {
          seen[i] = got.info.etag;
          seenAt[i] = performance.now();
          cluster!.wake();
        }
      } catch { /* the next poll retries */ }
      await new Promise((r) => setTimeout(r, INTERVAL_MS - (performance.now() - started)));
    }
  });
  const baseline: number[] = [];
  for (let t = 1; t <= BASELINE_TRIALS; t++) {
    await randomPhase();
    const start = performance.now();
    etag = (await store.put(key, new TextEncoder().encode(String(t)))).etag;
    await cluster.until(`baseline ${t}`, () => seen.every((e) => e === etag));
    baseline.push(Math.max(...seenAt) - start);
  }
  polling = false;
  await Promise.all(pollers);

  // 3b. Peer: one conditional GET round trip to the bucket (304, no body).
  const index = await store.get(SERVICE_INDEX);
  const held = index.notModified ? index.etag : index.info.etag;
  const gets: number[] = [];
  for (let i = 0; i < GET_ROUNDS; i++) {
    const start = performance.now();
    await store.get(SERVICE_INDEX, { ifNoneMatch: held });
    gets.push(performance.now() - start);
  }

  const p = (xs: number[], q: number) => percentile(sorted(xs), q);
  const perChange = messages.reduce((a, b) => a + b, 0) / messages.length;
  console.log(
    `\nmesh bench${SMOKE ? " (SMOKE: tiny sizes)" : ""}: ${N} agents on moto, one process\n` +
      `  intervals: Pods API event-driven (WatchPods); Services index polled every ${
        ms(2 * INTERVAL_MS)
      } ` +
      `by the coordinator and announced (agents read it on the announcement) and DNS zone pass every ${
        ms(INTERVAL_MS)
      } (agent --interval default ` +
      `${RUN_FLAGS.interval.default}); mesh broadcast coalescing 20 ms, heartbeat 5 s; CoreDNS file ` +
      `plugin reload ${reload}; baseline pollers every ${ms(INTERVAL_MS)}\n` +
      `  Pod Ready → all ${N} snapshots (${POD_TRIALS} trials): p50 ${ms(p(podReady, 50))}, ` +
      `p99 ${ms(p(podReady, 99))} (goal p99 ≤ 1000 ms: ${
        p(podReady, 99) <= 1000 ? "met" : "NOT met"
      }); ` +
      `Pod deleted → gone everywhere p50 ${ms(p(podGone, 50))}, p99 ${ms(p(podGone, 99))}; ` +
      `${perChange.toFixed(1)} snapshot messages per change (${N} agents)\n` +
      `  new Service + Pod Ready (${SERVICE_TRIALS} trials): all snapshots p50 ${
        ms(p(serviceSnapshot, 50))
      }, ` +
      `p99 ${ms(p(serviceSnapshot, 99))}; the snapshot announcing the new services index reaches ` +
      `agent 0 p50 ${ms(p(serviceAnnounced, 50))}, p99 ${ms(p(serviceAnnounced, 99))} (the ` +
      `coordinator polls it every ${ms(2 * INTERVAL_MS)}); from that snapshot CoreDNS answers ` +
      `the name p50 ${ms(p(announcedToDns, 50))}, p99 ${ms(p(announcedToDns, 99))} (goal p99 ≤ ` +
      `1000 ms: ${p(announcedToDns, 99) <= 1000 ? "met" : "NOT met"}); from the apply p50 ${
        ms(p(serviceDns, 50))
      }, p99 ${ms(p(serviceDns, 99))}\n` +
      `  peer, every agent polling one endpoints object (${BASELINE_TRIALS} trials): p50 ${
        ms(p(baseline, 50))
      }, ` +
      `p99 ${ms(p(baseline, 99))} → mesh faster by ${
        (p(baseline, 99) / p(podReady, 99)).toFixed(1)
      }× at p99\n` +
      `  peer, one conditional GET to moto (${GET_ROUNDS} rounds): p50 ${
        p(gets, 50).toFixed(1)
      } ms → Pod Ready p50 = ${(p(podReady, 50) / p(gets, 50)).toFixed(1)} GET round trips`,
  );
  await recordFigures({
    mesh_agents: N,
    mesh_pod_ready_p50_ms: p(podReady, 50),
    mesh_pod_ready_p99_ms: p(podReady, 99),
    mesh_snapshots_per_change: perChange,
    mesh_new_service_snapshot_p99_ms: p(serviceSnapshot, 99),
    mesh_new_service_dns_p50_ms: p(serviceDns, 50),
    mesh_new_service_dns_p99_ms: p(serviceDns, 99),
    mesh_services_announced_p99_ms: p(serviceAnnounced, 99),
    mesh_snapshot_to_dns_p50_ms: p(announcedToDns, 50),
    mesh_snapshot_to_dns_p99_ms: p(announcedToDns, 99),
    mesh_services_poll_interval_ms: 2 * INTERVAL_MS,
    mesh_dns_poll_plus_reload_ms: 2 * INTERVAL_MS + parseDuration(reload, "reload"),
    mesh_coredns_reload_ms: parseDuration(reload, "reload"),
    mesh_poll_baseline_p50_ms: p(baseline, 50),
    mesh_poll_baseline_p99_ms: p(baseline, 99),
    mesh_moto_get_p50_ms: p(gets, 50),
  });
} finally {
  await dnsLoop?.stop();
  if (coredns) {
    coredns.kill("SIGTERM");
    await coredns.status;
  }
  await cluster?.stop();
  await Deno.remove(dir, { recursive: true });
}
Deno.exit(0);

/**
 * Benchmark of the eBPF Service dataplane (root; builds its own network
 * namespaces and removes them). Prints figures, asserts nothing.
 *
 *   sudo deno run -A tests/bench/dataplane_bench.ts [--seconds 1.5] [--rounds 8] [--concurrency 4]
 *     [--cost-rounds 5] [--cost-seconds 0.3] [--smoke] [--only host-sockets]
 *
 * 1. TCP connect + request + reply + close, client Pod → node → backend Pod:
 *    directly to the backend, through the eBPF VIP, and through an nftables
 *    DNAT rule set doing the same job (kube-proxy nftables style: a vmap of
 *    per-endpoint chains) — rate and p50/p99 latency; phases interleaved in
 *    rotating order over several rounds, ratios taken within each round.
 * 2. Map programming time for 10,000 Services × 10 backends (initial fill and
 *    incremental changes).
 * 3. Per-packet program latency (BPF_PROG_TEST_RUN, kernel-measured) of new
 *    flows and of established flows with 1 vs 10,000 Services.
 * 4. Cost per new-flow and per established packet apart from the client, at 1,
 *    1,000 and 10,000 Services, eBPF vs kube-proxy's nftables and iptables modes
 *    (`dataplane_cost.ts`).
 * 5. Host processes: program time per connection (kernel run-time statistics, every dataplane
 *    program summed) of a node process's connections to a VIP (socket path: connect6 once,
 *    then nothing) against a Pod's (packet path: tc on every packet), with a node process's
 *    direct connections to the backend as the floor; and the host's connection rate through the
 *    VIP vs direct.
 */

import { Buffer } from "node:buffer";
import { parseArgs } from "node:util";
import { formatIpv6, parseIpv6 } from "../../core/model/ipv6.ts";
import { enableRunTimeStats, programInfo } from "../../ffi/bpf_info.ts";
import { Driver, nftIn, nsRun, Topology } from "../support/dataplane_topology.ts";
import { benchSmoke, recordFigures } from "./bench_output.ts";
import { measureDataplaneCost } from "./dataplane_cost.ts";

const { values: opts } = parseArgs({
  options: {
    seconds: { type: "string", default: "1.5" },
    rounds: { type: "string", default: "8" },
    concurrency: { type: "string", default: "4" },
    "cost-rounds": { type: "string", default: "5" },
    "cost-seconds": { type: "string", default: "0.3" },
    /** "host-sockets": section 5 only. */
    only: { type: "string" },
  },
});
const SECONDS = Number(opts.seconds);
const ROUNDS = Number(opts.rounds);
const CONCURRENCY = Number(opts.concurrency);

const POD_PREFIX = "fd00:a::1:0:0:0/80";
const CLIENT = "fd00:a::1:0:0:10";
const HOST = "fd00:ff::1"; // the node's own address (host processes)
const BACKEND = "fd00:a::1:0:0:11";
const VIP = "fd00:504d::10";
const NFT_VIP = "fd00:504e::10"; // outside the eBPF service CIDR
const CIDR = "fd00:504d::/112";

interface BenchOut {
  count: number;
  errors: number;
  seconds: number;
  latenciesUs: number[];
}

function percentile(sorted: number[], p: number): number {
  if (!sorted.length) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
}

function snapshot(services: { vip: string; backends: string[] }[]) {
  return {
    apiVersion: "podmin.dev/v1",
    kind: "ServiceSnapshot",
    serviceCIDR: CIDR,
    services: services.map((s, i) => ({
      namespace: "bench",
      name: `svc-${i}`,
      vip: s.vip,
      ports: [{ port: 80, targetPort: 8080, protocol: "TCP" }],
      backends: s.backends,
    })),
  };
}

const EMPTY = { apiVersion: "podmin.dev/v1", kind: "ServiceSnapshot", services: [] };

const NFT_RULES = `table ip6 pmbench {
  chain ep0 {
    meta l4proto tcp dnat to [${BACKEND}]:8080
  }
  chain prerouting {
    type nat hook prerouting priority dstnat; policy accept;
    ip6 daddr ${NFT_VIP} tcp dport 80 numgen random mod 1 vmap { 0 : goto ep0 }
  }
}
`;

/** An Ethernet + IPv6 + TCP SYN frame (checksums are not looked at by the program's lookups). */
function synFrame(src: bigint, dst: bigint, sport: number, dport: number): string {
  const f = new Uint8Array(14 + 40 + 20);
  const d = new DataView(f.buffer);
  f.set([2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2, 0x86, 0xdd]);
  f[14] = 0x60;
  d.setUint16(18, 20);
  f[20] = 6;
  f[21] = 64;
  for (let i = 0; i < 16; i++) {
    f[22 + i] = Number((src >> BigInt(8 * (15 - i))) & 0xffn);
    f[38 + i] = Number((dst >> BigInt(8 * (15 - i))) & 0xffn);
  }
  d.setUint16(54, sport);
  d.setUint16(56, dport);
  f[66] = 5 << 4;
  f[67] = 0x02;
  return Buffer.from(f).toString("base64");
}

function stats(ns: number[]) {
  const s = [...ns].sort((a, b) => a - b);
  const mean = s.reduce((a, b) => a + b, 0) / Math.max(1, s.length);
  return { mean, p50: percentile(s, 50), p99: percentile(s, 99) };
}

const fmt = (n: number, d = 1) => (Number.isFinite(n) ? n.toFixed(d) : "-");

async function main() {
  const topo = Topology.create("pdb");
  try {
    console.log("setting up namespaces…");
    const node = await topo.node("node");
    const client = await topo.pod(node, "client", "vcl", CLIENT);
    const backend = await topo.pod(node, "backend", "vbe", BACKEND);
    for (
      const [k, v] of [["net.ipv4.ip_local_port_range", "1024 65000"], [
        "net.ipv4.tcp_tw_reuse",
        "1",
      ]]
    ) {
      await nsRun(client.ns, "sysctl", ["-q", "-w", `${k}=${v}`]);
    }
    await topo.startPeer(backend.ns, ["serve", "be", "8080", "5353"]);
    await nsRun(node, "ip", ["-6", "addr", "add", `${HOST}/128`, "dev", "lo", "nodad"]);
    const driver = new Driver(topo, node, POD_PREFIX);
    const one = snapshot([{ vip: VIP, backends: [BACKEND] }]);

    if (opts.only === "host-sockets") {
      await hostSocketCost(topo, driver, node, client.ns, one);
      await driver.call({ op: "close" });
      return;
    }

    // --- 1. connection rate and latency -----------------------------------
    // Phases are interleaved and their order rotated every round; ratios are
    // taken within a round (same background load) and their median reported.
    type Phase = "direct" | "ebpf VIP" | "nftables VIP";
    const phases: Phase[] = ["direct", "ebpf VIP", "nftables VIP"];
    const totals = new Map<
      Phase,
      { count: number; seconds: number; lat: number[]; errors: number }
    >();
    const rounds: Record<Phase, { rate: number; p50: number }>[] = [];
    const run = async (phase: Phase) => {
      const [host, port] = phase === "direct"
        ? [BACKEND, 8080]
        : phase === "ebpf VIP"
        ? [VIP, 80]
        : [NFT_VIP, 80];
      if (phase === "ebpf VIP") await driver.call({ op: "apply", snapshot: one });
      if (phase === "nftables VIP") await nftIn(node, NFT_RULES);
      const out = JSON.parse(
        await topo.peer(client.ns, [
          "bench",
          host,
          String(port),
          String(SECONDS),
          String(CONCURRENCY),
        ]),
      ) as BenchOut;
      if (phase === "ebpf VIP") await driver.call({ op: "apply", snapshot: EMPTY });
      if (phase === "nftables VIP") await nftIn(node, "delete table ip6 pmbench\n");
      const t = totals.get(phase) ?? { count: 0, seconds: 0, lat: [], errors: 0 };
      t.count += out.count;
      t.seconds += out.seconds;
      t.errors += out.errors;
      t.lat.push(...out.latenciesUs);
      totals.set(phase, t);
      return { rate: out.count / out.seconds, p50: stats(out.latenciesUs).p50 };
    };
    console.log(
      `TCP connect+request+close, ${ROUNDS} rounds × ${SECONDS}s per phase, concurrency ${CONCURRENCY}…`,
    );
    for (let r = 0; r < ROUNDS; r++) {
      const round = {} as Record<Phase, { rate: number; p50: number }>;
      for (let i = 0; i < phases.length; i++) {
        const phase = phases[(i + r) % phases.length];
        round[phase] = await run(phase);
      }
      rounds.push(round);
    }
    const median = (xs: number[]) => percentile([...xs].sort((a, b) => a - b), 50);
    const ratio = (a: Phase, b: Phase, k: "rate" | "p50") =>
      median(rounds.map((r) => r[a][k] / r[b][k]));
    console.log(
      "\nphase           conn/s    p50 µs   p99 µs   errors   rate vs direct   p50 vs direct  (median of per-round ratios)",
    );
    for (const phase of phases) {
      const t = totals.get(phase)!;
      const l = stats(t.lat);
      console.log(
        `${phase.padEnd(14)} ${fmt(t.count / t.seconds, 0).padStart(7)} ${fmt(l.p50).padStart(9)} ${
          fmt(l.p99).padStart(8)
        } ${String(t.errors).padStart(8)}   ${
          fmt(ratio(phase, "direct", "rate"), 3).padStart(14)
        }   ${fmt(ratio(phase, "direct", "p50"), 3).padStart(13)}`,
      );
    }
    const rateOf = (phase: Phase) => totals.get(phase)!.count / totals.get(phase)!.seconds;
    await recordFigures({
      dataplane_ebpf_conn_per_s: rateOf("ebpf VIP"),
      dataplane_nftables_conn_per_s: rateOf("nftables VIP"),
      dataplane_ebpf_vs_nftables_rate: ratio("ebpf VIP", "nftables VIP", "rate"),
    });
    console.log(
      `ebpf VIP vs nftables VIP (median of per-round ratios): rate ×${
        fmt(ratio("ebpf VIP", "nftables VIP", "rate"), 3)
      }, p50 latency ×${fmt(ratio("ebpf VIP", "nftables VIP", "p50"), 3)}`,
    );

    // --- 5. host processes: socket path vs packet path, per connection --------------
    await hostSocketCost(topo, driver, node, client.ns, one);

    // --- 2. map programming ---------------------------------------------------
    console.log("\nmap programming, 10,000 Services × 10 backends…");
    const vipBase = parseIpv6("fd00:504d::");
    const beBase = parseIpv6("fd00:b::");
    const big = Array.from({ length: 10_000 }, (_, i) => ({
      vip: formatIpv6(vipBase + BigInt(i + 1)),
      backends: Array.from({ length: 10 }, (_, j) => formatIpv6(beBase + BigInt(i * 16 + j + 1))),
    }));
    const t0 = performance.now();
    const initial = await driver.call<{ ms: number; backendWrites: number; svcWrites: number }>(
      { op: "apply", snapshot: snapshot(big) },
      300_000,
    );
    const initialWall = performance.now() - t0;
    console.log(
      `  initial fill: ${initial.svcWrites} Service ports + ${initial.backendWrites} backend slots in ${
        fmt(initial.ms)
      } ms (dataplane), ${
        fmt(initialWall)
      } ms incl. snapshot transfer and validation; programs load included`,
    );
    const noChange = await driver.call<{ ms: number }>(
      { op: "apply", snapshot: snapshot(big) },
      300_000,
    );
    console.log(`  same snapshot again (diff only): ${fmt(noChange.ms)} ms`);
    const oneLess = structuredClone(big);
    oneLess[4242].backends.splice(3, 1);
    const inc = await driver.call<
      { ms: number; backendWrites: number; backendDeletes: number; conntrackDeleted: number }
    >(
      { op: "apply", snapshot: snapshot(oneLess) },
      300_000,
    );
    console.log(
      `  one backend removed: ${
        fmt(inc.ms)
      } ms (${inc.backendWrites} slot writes, ${inc.backendDeletes} deletes, conntrack scan included)`,
    );
    const hundred = structuredClone(big);
    for (let i = 0; i < 100; i++) {
      hundred[i * 97].backends.push(formatIpv6(beBase + BigInt(10_000_000 + i)));
    }
    const inc100 = await driver.call<{ ms: number; backendWrites: number }>(
      { op: "apply", snapshot: snapshot(hundred) },
      300_000,
    );
    console.log(
      `  a backend added to 100 Services: ${
        fmt(inc100.ms)
      } ms (${inc100.backendWrites} slot writes)`,
    );
    const full = await driver.call<{ ms: number }>({
      op: "apply",
      snapshot: snapshot(hundred),
      full: true,
    }, 300_000);
    console.log(
      `  full convergence pass (read back 10k + 100k entries, re-check filters): ${
        fmt(full.ms)
      } ms`,
    );

    // --- 3. per-packet lookup latency ------------------------------------------
    console.log(
      "\nper-packet program time (BPF_PROG_TEST_RUN, kernel-measured, 20,000 packets each, fresh maps)…",
    );
    const clientBase = parseIpv6("fd00:c::");
    const frames = (services: number) =>
      Array.from(
        { length: 20_000 },
        (_, i) =>
          synFrame(
            clientBase + BigInt(i),
            vipBase + BigInt((i * 7919) % services + 1),
            1024 + i,
            80,
          ),
      );
    const measure = async (services: number, label: string) => {
      const packets = frames(services);
      const first = await driver.call<{ durations: number[]; retvals: number[] }>({
        op: "testrun",
        packets,
      });
      // The same packets again: their flows are now in conntrack.
      const again = await driver.call<{ durations: number[] }>({ op: "testrun", packets });
      const a = stats(first.durations), b = stats(again.durations);
      console.log(
        `  ${label.padEnd(20)} new flow: p50 ${fmt(a.p50, 0)} ns p99 ${
          fmt(a.p99, 0)
        }   established: p50 ${fmt(b.p50, 0)} ns p99 ${fmt(b.p99, 0)}   (verdicts ${
          first.retvals.join(",")
        })`,
      );
      return { a, b };
    };
    const load = async (services: { vip: string; backends: string[] }[]) => {
      await driver.call({ op: "apply", snapshot: EMPTY }); // unload: empty conntrack
      await driver.call({ op: "apply", snapshot: snapshot(services) }, 300_000);
    };
    await load(big.slice(0, 1));
    // Floor: a frame the program dismisses at once (not IPv6) — the harness's own cost.
    const arp = Buffer.from(
      new Uint8Array(60).fill(0, 0).map((_, i) => (i === 12 ? 8 : i === 13 ? 6 : 0)),
    )
      .toString("base64");
    const floor = stats(
      (await driver.call<{ durations: number[] }>({
        op: "testrun",
        packets: Array(20_000).fill(arp),
      }))
        .durations,
    );
    console.log(`  test-run floor (non-IPv6 frame): p50 ${fmt(floor.p50, 0)} ns`);
    const passThrough = frames(1).map((f) => {
      const b = Buffer.from(f, "base64");
      b[38] = 0x20; // destination outside the service CIDR
      return b.toString("base64");
    });
    const other = stats(
      (await driver.call<{ durations: number[] }>({ op: "testrun", packets: passThrough }))
        .durations,
    );
    console.log(`  non-Service TCP packet (passed):   p50 ${fmt(other.p50, 0)} ns`);
    const small = await measure(1, "1 loaded, 1 hot");
    await load(big);
    const hot = await measure(1, "10k loaded, 1 hot");
    const spread = await measure(10_000, "10k loaded, all hot");
    console.log(
      `  same traffic, 10,000 vs 1 Service loaded (p50): new flow ×${
        fmt(hot.a.p50 / small.a.p50, 3)
      }, established ×${fmt(hot.b.p50 / small.b.p50, 3)}`,
    );
    console.log(
      `  traffic spread over all 10,000 (cache misses included, p50): new flow ×${
        fmt(spread.a.p50 / small.a.p50, 3)
      }, established ×${fmt(spread.b.p50 / small.b.p50, 3)}`,
    );
    await recordFigures({
      dataplane_new_flow_1_ns: small.a.p50,
      dataplane_new_flow_10k_hot_ns: hot.a.p50,
      dataplane_new_flow_10k_spread_ns: spread.a.p50,
      dataplane_established_1_ns: small.b.p50,
      dataplane_established_10k_hot_ns: hot.b.p50,
      dataplane_established_10k_spread_ns: spread.b.p50,
    });
    await driver.call({ op: "apply", snapshot: EMPTY });
    await driver.call({ op: "close" });
  } finally {
    await topo.destroy();
  }

  // --- 4. cost per packet apart from the client ---------------------------------
  const smoke = benchSmoke();
  await recordFigures(
    await measureDataplaneCost({
      sizes: [1, 1_000, 10_000],
      rounds: Number(opts["cost-rounds"]),
      seconds: Number(opts["cost-seconds"]),
      newFlows: smoke ? 2_000 : 50_000,
      estFrames: smoke ? 5_000 : 200_000,
      flows: smoke ? 100 : 1_000,
    }),
  );
}

/**
 * Section 5: dataplane program time per connection, from the kernel's run-time statistics of
 * every dataplane program (tc ingress/egress, connect6, sendmsg6, recvmsg6), in three phases
 * interleaved over ROUNDS rounds: a node process to the backend directly (the tc programs only
 * pass packets), a node process to the VIP (connect6 translates the socket once), a Pod to the
 * VIP (tc translates every packet both ways).
 */
async function hostSocketCost(
  topo: Topology,
  driver: Driver,
  node: string,
  clientNs: string,
  one: unknown,
): Promise<void> {
  type Phase = "host direct" | "host VIP (socket)" | "Pod VIP (packet)";
  const phases: Phase[] = ["host direct", "host VIP (socket)", "Pod VIP (packet)"];
  await driver.call({ op: "apply", snapshot: one });
  const st = await driver.call<{
    programs: { name: string; id: number }[];
    sockets?: { attached: boolean; programs: Record<string, number>; error?: string };
  }>({ op: "status" });
  if (!st.sockets?.attached) {
    console.log(`\nhost processes: socket programs not attached (${st.sockets?.error}); skipped`);
    await driver.call({ op: "apply", snapshot: EMPTY });
    return;
  }
  const ids = [...st.programs.map((p) => p.id), ...Object.values(st.sockets.programs)];
  const connectId = st.sockets.programs.podmin_connect6;
  const sample = () => {
    let ns = 0, runs = 0, connectNs = 0, connectRuns = 0;
    for (const id of ids) {
      const i = programInfo(id);
      if (!i) continue;
      ns += i.runTimeNs;
      runs += i.runCount;
      if (id === connectId) [connectNs, connectRuns] = [i.runTimeNs, i.runCount];
    }
    return { ns, runs, connectNs, connectRuns };
  };
  const totals = new Map<Phase, { conns: number; seconds: number; ns: number; runs: number }>();
  let connect = { ns: 0, runs: 0 };
  const rates: Record<Phase, number>[] = [];
  const stop = enableRunTimeStats();
  console.log(
    `\nhost processes vs Pods through a VIP, ${ROUNDS} rounds × ${SECONDS}s per phase, concurrency ${CONCURRENCY} (kernel run-time stats)…`,
  );
  try {
    for (let r = 0; r < ROUNDS; r++) {
      const round = {} as Record<Phase, number>;
      for (let i = 0; i < phases.length; i++) {
        const phase = phases[(i + r) % phases.length];
        const [ns, host, port] = phase === "host direct"
          ? [node, BACKEND, 8080]
          : phase === "host VIP (socket)"
          ? [node, VIP, 80]
          : [clientNs, VIP, 80];
        const before = sample();
        const out = JSON.parse(
          await topo.peer(ns, ["bench", host, String(port), String(SECONDS), String(CONCURRENCY)]),
        ) as BenchOut;
        const after = sample();
        const t = totals.get(phase) ?? { conns: 0, seconds: 0, ns: 0, runs: 0 };
        t.conns += out.count;
        t.seconds += out.seconds;
        t.ns += after.ns - before.ns;
        t.runs += after.runs - before.runs;
        totals.set(phase, t);
        if (phase === "host VIP (socket)") {
          connect = {
            ns: connect.ns + after.connectNs - before.connectNs,
            runs: connect.runs + after.connectRuns - before.connectRuns,
          };
        }
        round[phase] = out.count / out.seconds;
      }
      rates.push(round);
    }
  } finally {
    stop();
    await driver.call({ op: "apply", snapshot: EMPTY });
  }
  const median = (xs: number[]) => percentile([...xs].sort((a, b) => a - b), 50);
  console.log(
    "phase               conn/s   program runs/conn   program ns/conn   rate vs host direct",
  );
  const perConn = (p: Phase) => totals.get(p)!.ns / Math.max(1, totals.get(p)!.conns);
  for (const p of phases) {
    const t = totals.get(p)!;
    console.log(
      `${p.padEnd(18)} ${fmt(t.conns / t.seconds, 0).padStart(7)} ${
        fmt(t.runs / Math.max(1, t.conns), 1).padStart(19)
      } ${fmt(perConn(p), 0).padStart(17)} ${
        fmt(median(rates.map((r) => r[p] / r["host direct"])), 3).padStart(21)
      }`,
    );
  }
  const connectNs = connect.ns / Math.max(1, connect.runs);
  const socketCost = perConn("host VIP (socket)") - perConn("host direct");
  const packetCost = perConn("Pod VIP (packet)") - perConn("host direct");
  const vipConns = totals.get("host VIP (socket)")!.conns;
  console.log(
    `  connect6: ${fmt(connectNs, 0)} ns per run, ${
      fmt(connect.runs / Math.max(1, vipConns), 2)
    } runs per connection (the hook is machine-wide: other processes' connects run it too and leave at the netns check)`,
  );
  console.log(
    `  program time per connection: socket path ×${
      fmt(perConn("host VIP (socket)") / perConn("Pod VIP (packet)"), 3)
    } of the packet path; above the floor (tc passing the backend's packets, connect6 finding no VIP): socket path ${
      fmt(socketCost, 0)
    } ns, packet path ${
      fmt(packetCost, 0)
    } ns (the Pod's connection also crosses its own veth, whose tc programs count in the packet path)`,
  );
  await recordFigures({
    dataplane_host_sock_connect6_ns: connectNs,
    dataplane_host_sock_ns_per_conn: perConn("host VIP (socket)"),
    dataplane_pod_packet_ns_per_conn: perConn("Pod VIP (packet)"),
    dataplane_host_direct_ns_per_conn: perConn("host direct"),
    dataplane_host_vip_vs_direct_rate: median(
      rates.map((r) => r["host VIP (socket)"] / r["host direct"]),
    ),
  });
}

if (import.meta.main) {
  if (Deno.uid() !== 0) {
    console.error("the dataplane benchmark needs root (network namespaces, eBPF, nftables)");
    Deno.exit(1);
  }
  await main();
}

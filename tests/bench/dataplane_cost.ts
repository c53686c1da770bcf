/**
 * Dataplane cost per packet, measured apart from any client (issue 15): what the eBPF dataplane
 * adds to a packet's path through a node, against kube-proxy's nftables mode (verdict maps) and
 * its iptables mode (a chain per Service, in nft syntax), at 1, 1,000 and 10,000 Services.
 *
 * Three identical nodes (a node namespace with a sender Pod and a sink Pod, `ptp` style): A runs
 * the eBPF dataplane, B kube-proxy's nftables-mode rules, C its iptables-mode rules
 * (`kube_proxy_rules.ts`), each Service a UDP port with two endpoints on the sink Pod. A C sender
 * (`frame_sender.c`, pinned to one CPU) writes UDP frames into its veth through an AF_PACKET
 * socket; the node's whole receive path (tc, netfilter, routing, forwarding to the sink's veth)
 * runs as softirq work on the sender's return from each send, on that CPU. The sink drops the
 * frames at its ingress and counts them: a run in which any frame did not arrive translated (at
 * the endpoints' port) fails the benchmark rather than give a figure.
 *
 * A packet's cost is the CPU time on that CPU per frame: the sender thread's (this kernel has no
 * IRQ time accounting, so softirq work run in its context is charged to it) plus that CPU's
 * ksoftirqd; on a kernel with IRQ time accounting, the send's wall time on the pinned CPU
 * instead. The dataplane's cost is that minus the
 * same frames sent straight to the sink on node A with nothing loaded, measured in the same
 * round; rounds rotate the order of the phases; medians over rounds. "New flow": every frame a
 * new 5-tuple (conntrack and the eBPF flow table emptied before each run). "Established": 1,000
 * flows sent once untimed, then frames cycling over them.
 */

import { formatIpv6, parseIpv6 } from "../../core/model/ipv6.ts";
import { Driver, LineProcess, nftIn, nsRun, sh, Topology } from "../support/dataplane_topology.ts";
import { median } from "./bench_output.ts";
import {
  IPTABLES_MODE_TABLE,
  iptablesModeRules,
  NFTABLES_MODE_TABLE,
  nftablesModeRules,
  type RuleService,
} from "./kube_proxy_rules.ts";

const POD_PREFIX = "fd00:a::1:0:0:0/80";
const SENDER = "fd00:a::1:0:0:20";
const SINKS = ["fd00:a::1:0:0:30", "fd00:a::1:0:0:31"];
const SERVICE_CIDR = "fd00:504d::/112";
const VIP_BASE = "fd00:504d::"; // Service k (0-based) is VIP_BASE + 1 + k, as the sender writes
const PORT = 80;
const TARGET_PORT = 8080;

/** How much to send. */
export interface CostOptions {
  /** Service counts measured. */
  sizes: number[];
  rounds: number;
  /** Bound of one timed send. */
  seconds: number;
  /** Frames (new flows) per new-flow run; kept under the eBPF flow table's 131,072 entries. */
  newFlows: number;
  /** Frames per established run. */
  estFrames: number;
  /** Established flows. */
  flows: number;
}

type System = "direct" | "ebpf" | "nft-maps" | "nft-chains";
type Mode = "new" | "est";

/** One node of the benchmark. */
interface CostNode {
  ns: string;
  sender: string;
  sink: string;
  /** MAC of the sender's host-side veth (the frames' destination). */
  gatewayMac: string;
}

interface SendResult {
  sent: number;
  wall_ns: number;
  cpu_ns: number;
  softirqd_ns: number;
}

const root = new URL("../../", import.meta.url).pathname;

async function linkMac(ns: string, dev: string): Promise<string> {
  const [link] = JSON.parse(await nsRun(ns, "ip", ["-j", "link", "show", dev]));
  return link.address;
}

/** Whether this kernel charges softirq time apart from the task it interrupted. */
async function irqTimeAccounting(): Promise<boolean> {
  const out = await sh("sh", ["-c", "zcat /proc/config.gz 2>/dev/null || true"]);
  return /^CONFIG_IRQ_TIME_ACCOUNTING=y$/m.test(out);
}

/** The benchmark's Services: `count` UDP ports, two endpoints each (the sink Pod). */
function services(count: number): RuleService[] {
  const base = parseIpv6(VIP_BASE);
  return Array.from({ length: count }, (_, k) => ({
    vip: formatIpv6(base + BigInt(k + 1)),
    port: PORT,
    protocol: "udp" as const,
    targetPort: TARGET_PORT,
    endpoints: SINKS,
  }));
}

function snapshot(list: RuleService[]) {
  return {
    apiVersion: "podmin.dev/v1",
    kind: "ServiceSnapshot",
    serviceCIDR: SERVICE_CIDR,
    services: list.map((s, k) => ({
      namespace: "bench",
      name: `svc${k}`,
      vip: s.vip,
      ports: [{ port: s.port, targetPort: s.targetPort, protocol: "UDP" }],
      backends: s.endpoints,
    })),
  };
}

const EMPTY = { apiVersion: "podmin.dev/v1", kind: "ServiceSnapshot", services: [] };

/** Builds a node: sender Pod, sink Pod with both endpoint addresses, a counting drop. */
async function buildNode(topo: Topology, tag: string): Promise<CostNode> {
  const ns = await topo.node(`cost${tag}`);
  const sender = await topo.pod(ns, `snd${tag}`, "vsnd", SENDER);
  const sink = await topo.pod(ns, `snk${tag}`, "vsnk", SINKS[0]);
  await nsRun(sink.ns, "ip", ["-6", "addr", "add", `${SINKS[1]}/128`, "dev", "eth0", "nodad"]);
  await topo.route(ns, `${SINKS[1]}/128`, "dev", "vsnk");
  // Static neighbours: no neighbour discovery in the measured path.
  const sinkMac = await linkMac(sink.ns, "eth0");
  for (const addr of SINKS) {
    await nsRun(ns, "ip", [
      "-6",
      "neigh",
      "replace",
      addr,
      "lladdr",
      sinkMac,
      "dev",
      "vsnk",
      "nud",
      "permanent",
    ]);
  }
  await nftIn(
    sink.ns,
    `table netdev sink {
  counter delivered {}
  chain in {
    type filter hook ingress device eth0 priority 0; policy accept;
    ip6 nexthdr udp udp dport ${TARGET_PORT} counter name delivered drop
    ip6 nexthdr udp drop
  }
}
`,
  );
  return { ns, sender: sender.ns, sink: sink.ns, gatewayMac: await linkMac(ns, "vsnd") };
}

async function delivered(node: CostNode): Promise<number> {
  const out = JSON.parse(
    await nsRun(node.sink, "nft", ["-j", "list", "counter", "netdev", "sink", "delivered"]),
  );
  for (const item of out.nftables) if (item.counter) return item.counter.packets;
  throw new Error("no counter in the sink");
}

/**
 * Starts `frame_sender reflect` in the sink Pod; resolves, once `count` frames were answered
 * (or 10 s passed), to the number answered (`answered`).
 */
async function startReflector(
  ns: string,
  sender: string,
  count: number,
): Promise<{ answered: Promise<number> }> {
  const lp = new LineProcess(
    new Deno.Command("nsenter", {
      args: [`--net=/run/netns/${ns}`, sender, "reflect", "eth0", String(count), "10"],
      stdin: "piped",
      stdout: "piped",
      stderr: "piped",
    }).spawn(),
  );
  const ready = await lp.readLine(10_000).catch((err) => String(err));
  if (ready !== "ready") throw new Error(`reflector: ${ready} ${await lp.stderr()}`);
  const answered = (async () => {
    const result = JSON.parse(await lp.readLine(15_000)).reflected as number;
    await lp.end();
    await lp.proc.status;
    await lp.proc.stderr.cancel().catch(() => {});
    return result;
  })();
  return { answered };
}

async function conntrackFlush(node: CostNode, sender: string): Promise<void> {
  await nsRun(node.ns, sender, ["ct-flush"]);
  const left = Number(
    (await nsRun(node.ns, "cat", ["/proc/sys/net/netfilter/nf_conntrack_count"])).trim(),
  );
  if (left > 0) throw new Error(`conntrack of ${node.ns} still holds ${left} entries`);
}

/**
 * Measures and prints the dataplane cost table; returns the figures (docs/benchmarks.md:
 * `dataplane_cost_*`).
 */
export async function measureDataplaneCost(o: CostOptions): Promise<Record<string, number>> {
  const build = await Deno.makeTempDir({ prefix: "podmin-dp-cost-" });
  const topo = Topology.create("pdc");
  try {
    const sender = `${build}/frame_sender`;
    await sh("cc", ["-O2", "-Wall", "-o", sender, `${root}tests/bench/frame_sender.c`]);
    const useWall = await irqTimeAccounting();
    const cpu = navigator.hardwareConcurrency - 1;
    const nodes = {
      a: await buildNode(topo, "a"),
      b: await buildNode(topo, "b"),
      c: await buildNode(topo, "c"),
    };
    const driver = new Driver(topo, nodes.a.ns, POD_PREFIX);
    let salt = 0;

    /** Runs the sender in `node`'s sender Pod; checks every frame reached the sink. */
    const sendOnce = async (
      node: CostNode,
      target: { services: number; mode: Mode | "warm" },
    ): Promise<SendResult> => {
      const direct = target.services === 0;
      const before = await delivered(node);
      const r: SendResult = JSON.parse(
        await nsRun(node.sender, sender, [
          "send",
          "eth0",
          node.gatewayMac,
          SENDER,
          direct ? SINKS[0] : VIP_BASE,
          String(target.services),
          String(direct ? TARGET_PORT : PORT),
          target.mode,
          String(o.flows),
          String(target.mode === "new" ? o.newFlows : o.estFrames),
          String(o.seconds),
          String(target.mode === "est" ? salt : ++salt),
          String(cpu),
        ]),
      );
      // A frame that did not arrive translated was not measured doing the job: no figure then.
      const arrived = (await delivered(node)) - before;
      if (arrived !== r.sent) {
        throw new Error(
          `${node.ns}: ${r.sent} frames sent (${target.mode}, ${target.services} Services), ${arrived} reached the sink's port ${TARGET_PORT}`,
        );
      }
      return r;
    };

    /**
     * One timed send through `node`; returns CPU ns per frame. Established flows are first sent
     * once and answered by the sink, so conntrack holds them as replied (ESTABLISHED), as a
     * connection's later packets find them.
     */
    const send = async (
      node: CostNode,
      target: { services: number; mode: Mode },
    ): Promise<number> => {
      if (target.mode === "est") {
        const reflector = await startReflector(node.sink, sender, o.flows);
        await sendOnce(node, { ...target, mode: "warm" });
        const answered = await reflector.answered;
        if (answered < o.flows) {
          throw new Error(`the sink answered ${answered} of ${o.flows} flows`);
        }
      }
      const r = await sendOnce(node, target);
      // Wall time already holds what ksoftirqd ran on the pinned CPU meanwhile.
      return (useWall ? r.wall_ns : r.cpu_ns + r.softirqd_ns) / r.sent;
    };

    console.log(
      `\ndataplane cost per packet, apart from the client (UDP frames from a pinned sender, CPU ${cpu}; ${
        useWall ? "wall time: this kernel accounts IRQ time apart" : "CPU time incl. softirq"
      }), ${o.rounds} rounds…`,
    );
    // The three nodes must cost the same with nothing loaded for the comparison to hold.
    const bare: Record<string, number[]> = { a: [], b: [], c: [] };
    for (let r = 0; r < o.rounds; r++) {
      for (const k of ["a", "b", "c"] as const) {
        bare[k].push(await send(nodes[k], { services: 0, mode: "new" }));
      }
    }
    console.log(
      `  nothing loaded, straight to the sink, per packet: node A ${
        median(bare.a).toFixed(0)
      } ns, B ${median(bare.b).toFixed(0)} ns, C ${median(bare.c).toFixed(0)} ns`,
    );

    const figures: Record<string, number> = { dataplane_cost_direct_ns: median(bare.a) };
    const systems: System[] = ["direct", "ebpf", "nft-maps", "nft-chains"];
    for (const size of o.sizes) {
      const list = services(size);
      const cluster = { podCidr: POD_PREFIX, serviceCidr: SERVICE_CIDR };
      const loadMs = async (ns: string, scripts: string[]) => {
        const t0 = performance.now();
        for (const s of scripts) await nftIn(ns, s);
        return performance.now() - t0;
      };
      const mapsMs = await loadMs(nodes.b.ns, nftablesModeRules(list, cluster));
      const chainsMs = await loadMs(nodes.c.ns, iptablesModeRules(list, cluster));
      const ebpfMs: number[] = [];
      const cost: Record<System, Record<Mode, number[]>> = {
        direct: { new: [], est: [] },
        ebpf: { new: [], est: [] },
        "nft-maps": { new: [], est: [] },
        "nft-chains": { new: [], est: [] },
      };
      const run = async (system: System) => {
        for (const mode of ["new", "est"] as Mode[]) {
          let c: number;
          if (system === "direct") {
            c = await send(nodes.a, { services: 0, mode });
          } else if (system === "ebpf") {
            // Loaded for each run: the flow table starts empty, as conntrack does.
            const t0 = performance.now();
            await driver.call({ op: "apply", snapshot: snapshot(list) }, 300_000);
            ebpfMs.push(performance.now() - t0);
            c = await send(nodes.a, { services: size, mode });
            await driver.call({ op: "apply", snapshot: EMPTY });
          } else {
            const node = system === "nft-maps" ? nodes.b : nodes.c;
            await conntrackFlush(node, sender);
            c = await send(node, { services: size, mode });
          }
          cost[system][mode].push(c);
        }
      };
      for (let r = 0; r < o.rounds; r++) {
        for (let i = 0; i < systems.length; i++) await run(systems[(i + r) % systems.length]);
      }
      await nftIn(nodes.b.ns, `delete table ip6 ${NFTABLES_MODE_TABLE}\n`);
      await nftIn(nodes.c.ns, `delete table ip6 ${IPTABLES_MODE_TABLE}\n`);
      await conntrackFlush(nodes.b, sender);
      await conntrackFlush(nodes.c, sender);

      // Added cost: each run minus the same round's direct run of the same mode.
      const added = (system: System, mode: Mode) =>
        median(cost[system][mode].map((c, r) => c - cost.direct[mode][r]));
      console.log(
        `  ${size} Service${size === 1 ? "" : "s"} (load: eBPF ${
          median(ebpfMs).toFixed(0)
        } ms, nftables maps ${mapsMs.toFixed(0)} ms, chains ${
          chainsMs.toFixed(0)
        } ms); added ns per packet over direct (direct: new ${
          median(cost.direct.new).toFixed(0)
        }, established ${median(cost.direct.est).toFixed(0)}):`,
      );
      for (const system of ["ebpf", "nft-maps", "nft-chains"] as System[]) {
        const key = system.replace("-", "_");
        const n = added(system, "new"), e = added(system, "est");
        figures[`dataplane_cost_new_${key}_ns_${size}`] = n;
        figures[`dataplane_cost_est_${key}_ns_${size}`] = e;
        console.log(
          `    ${system.padEnd(11)} new flow ${n.toFixed(0).padStart(7)}   established ${
            e.toFixed(0).padStart(6)
          }`,
        );
      }
    }
    await driver.call({ op: "close" }).catch(() => {});
    return figures;
  } finally {
    await topo.destroy();
    await Deno.remove(build, { recursive: true }).catch(() => {});
  }
}

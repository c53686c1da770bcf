/**
 * GOAWAY soak (issue 33 item 3, spec §7.9): mesh nodes on loopback, each the product's `MeshNode`
 * in its own process (tests/bench/goaway_soak_node.ts) over one filesystem bucket, while the
 * coordinator comes and goes: each cycle waits until every node holds the current coordinator's
 * snapshot, then ends the coordinator's process — in turn a graceful stop (SIGTERM: `stop()`), the
 * product's crash path (SIGUSR1: `crash()`) and a kill (SIGKILL) — waits until every other node is
 * on a newer term (its member reconnected to the new coordinator) and starts the node again. Every
 * exit the soak did not ask for is an abort (Deno's HTTP/2 client aborts with 134 or SIGSEGV on
 * some GOAWAYs: denoland/deno#36788); the soak counts them, prints the child's last words and
 * restarts it.
 *
 * Run: `deno task bench:goaway-soak [--duration 30m] [--nodes 5] [--lease 3s]` (not in CI).
 * Prints cycles, reconnects (a member's snapshots from a newer term: it connected to the new
 * coordinator), streams the members opened (attempts included), aborts, and the takeover time
 * after each kind of exit.
 */

import * as path from "node:path";
import { parseArgs } from "node:util";
import { newCaPem } from "../../cli/setup/cluster_cas.ts";
import { readCoordinatorRecord } from "../../agent/mesh/coordinator_record.ts";
import { parseDuration } from "../../core/kit/duration.ts";
import { createFsBucket } from "../../core/store/fs_store.ts";
import { openStore } from "../../core/store/store_url.ts";
import { benchSmoke, percentile, recordFigures } from "./bench_output.ts";
import type { SoakNodeConfig } from "./goaway_soak_node.ts";

/** How a cycle ends the coordinator's process. */
type Ending = "stop" | "crash" | "kill";
const ENDINGS: Ending[] = ["stop", "crash", "kill"];
const SIGNAL: Record<Ending, Deno.Signal> = { stop: "SIGTERM", crash: "SIGUSR1", kill: "SIGKILL" };

/** One node process and what it printed. */
interface NodeProcess {
  id: string;
  child: Deno.ChildProcess;
  /** Term of its newest snapshot (0: none yet). */
  term: number;
  /** Streams its member opened (the latest count it printed). */
  streams: number;
  /** Terms it received snapshots of (each after the first: a reconnect to a new coordinator). */
  terms: number;
  /** The ending the soak asked for, if any. */
  asked?: Ending;
  stderr: string[];
  exit?: Deno.CommandStatus;
}

const args = parseArgs({
  args: Deno.args,
  options: {
    duration: { type: "string", default: benchSmoke() ? "20s" : "30m" },
    nodes: { type: "string", default: "5" },
    lease: { type: "string", default: "3s" },
  },
});
const durationMs = parseDuration(args.values.duration, "--duration");
const nodeCount = Number(args.values.nodes);
const leaseMs = parseDuration(args.values.lease, "--lease");
if (!Number.isInteger(nodeCount) || nodeCount < 2) {
  throw new Error(`--nodes ${args.values.nodes}: at least 2 (a coordinator and a member)`);
}

const dir = await Deno.makeTempDir({ prefix: "podmin-goaway-soak-" });
await createFsBucket(path.join(dir, "bucket"));
const bucket = `file://${path.join(dir, "bucket")}`;
const store = openStore(bucket);
const { certPem, keyPem } = await newCaPem("podmin cluster CA soak");
const nodes = new Map<string, NodeProcess>();
const waiters = new Set<() => void>();
const wake = () => {
  for (const w of [...waiters]) w();
};
const aborts: string[] = [];
/** Of processes that ended: streams opened beyond each one's first, terms beyond the first. */
let pastStreams = 0;
let pastReconnects = 0;

async function lines(stream: ReadableStream<Uint8Array<ArrayBuffer>>, on: (l: string) => void) {
  let rest = "";
  for await (const chunk of stream.pipeThrough(new TextDecoderStream())) {
    const parts = (rest + chunk).split("\n");
    rest = parts.pop() ?? "";
    for (const p of parts) if (p) on(p);
  }
}

async function spawn(id: string): Promise<void> {
  const file = path.join(dir, `${id}.json`);
  const config: SoakNodeConfig = { nodeId: id, bucket, caPem: certPem + keyPem, leaseMs };
  await Deno.writeTextFile(file, JSON.stringify(config));
  const child = new Deno.Command(Deno.execPath(), {
    args: ["run", "--allow-all", new URL("./goaway_soak_node.ts", import.meta.url).pathname, file],
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const n: NodeProcess = { id, child, term: 0, streams: 0, terms: 0, stderr: [] };
  nodes.set(id, n);
  const out = lines(child.stdout, (l) => {
    try {
      const e = JSON.parse(l) as { event: string; term?: number; streams?: number };
      if (e.event === "snapshot") {
        if ((e.term ?? 0) > n.term) n.terms++;
        n.term = Math.max(n.term, e.term ?? 0);
        n.streams = Math.max(n.streams, e.streams ?? 0);
      }
    } catch { /* not an event */ }
    wake();
  });
  const err = lines(child.stderr, (l) => n.stderr.push(l).valueOf() > 20 && n.stderr.shift());
  void child.status.then(async (status) => {
    await Promise.all([out, err]);
    n.exit = status;
    pastStreams += Math.max(0, n.streams - 1);
    pastReconnects += Math.max(0, n.terms - 1);
    // A node asked to stop before its signal handler was installed ends by SIGTERM: the soak's doing.
    const expected = n.asked === "kill"
      ? status.signal === "SIGKILL"
      : n.asked !== undefined && (status.code === 0 || status.signal === SIGNAL[n.asked]);
    if (!expected) {
      aborts.push(
        `${id}: exit ${status.code}${status.signal ? ` (${status.signal})` : ""}` +
          `${n.asked ? ` after ${n.asked}` : ""}: ${n.stderr.slice(-3).join(" | ")}`,
      );
      console.log(`ABORT ${aborts.at(-1)}`);
      if (nodes.get(id) === n && !stopping) await spawn(id);
    }
    wake();
  });
}

/** Resolves once `f()` holds (checked on every event); false after `timeoutMs`. */
function until(f: () => boolean, timeoutMs: number): Promise<boolean> {
  if (f()) return Promise.resolve(true);
  return new Promise((resolve) => {
    const timer = setTimeout(() => {
      waiters.delete(check);
      resolve(false);
    }, timeoutMs);
    const check = () => {
      if (!f()) return;
      clearTimeout(timer);
      waiters.delete(check);
      resolve(true);
    };
    waiters.add(check);
  });
}

const live = () => [...nodes.values()].filter((n) => n.exit === undefined);
let stopping = false;
const takeover: Record<Ending, number[]> = { stop: [], crash: [], kill: [] };
let cycles = 0;
let stalls = 0;
const t0 = performance.now();
// Interrupted: the node processes go too.
for (const signal of ["SIGINT", "SIGTERM"] as const) {
  Deno.addSignalListener(signal, () => {
    stopping = true;
    for (const n of live()) n.child.kill("SIGKILL");
    Deno.exit(130);
  });
}
for (let i = 0; i < nodeCount; i++) await spawn(`node-${i}`);
console.log(
  `goaway soak: ${nodeCount} nodes, lease ${leaseMs} ms, for ${
    (durationMs / 60_000).toFixed(1)
  } min`,
);

while (performance.now() - t0 < durationMs) {
  // Every node on one term, and the record naming that term's coordinator.
  const agreed = () => {
    const all = live();
    return all.length === nodeCount && all[0].term > 0 && all.every((n) => n.term === all[0].term);
  };
  if (!await until(agreed, 5 * leaseMs + 30_000)) {
    stalls++;
    continue;
  }
  const record = await readCoordinatorRecord(store).catch(() => undefined);
  if (!record || record.term !== live()[0].term) continue; // a newer term meanwhile: wait again
  const ending = ENDINGS[cycles % ENDINGS.length];
  const leaving = nodes.get(record.nodeId);
  if (!leaving) continue;
  const term = record.term;
  const started = performance.now();
  leaving.asked = ending;
  leaving.child.kill(SIGNAL[ending]);
  const others = () => live().filter((n) => n !== leaving);
  const moved = await until(
    () => others().length > 0 && others().every((n) => n.term > term),
    5 * leaseMs + 30_000,
  );
  if (moved) takeover[ending].push(performance.now() - started);
  else stalls++;
  await until(() => leaving.exit !== undefined, 30_000);
  if (nodes.get(leaving.id) === leaving) await spawn(leaving.id);
  cycles++;
  if (cycles % 20 === 0) {
    console.log(
      `  ${((performance.now() - t0) / 60_000).toFixed(1)} min: ${cycles} cycles, ` +
        `${aborts.length} aborts`,
    );
  }
}

stopping = true;
for (const n of live()) {
  n.asked = "stop";
  n.child.kill("SIGTERM");
}
await until(() => live().length === 0, 30_000);
for (const n of live()) n.child.kill("SIGKILL");
await Deno.remove(dir, { recursive: true }).catch(() => {});

const reconnects = pastReconnects;
const streams = pastStreams;
const p = (xs: number[], q: number) => percentile([...xs].sort((a, b) => a - b), q);
console.log(
  `goaway soak: ${((performance.now() - t0) / 60_000).toFixed(1)} min, ${cycles} cycles ` +
    `(coordinator stopped, crashed, killed in turn), ${reconnects} member reconnects to a new ` +
    `coordinator (${streams} streams opened in all, failed attempts included), ` +
    `${aborts.length} aborts, ${stalls} cycles without convergence`,
);
for (const e of ENDINGS) {
  const xs = takeover[e];
  if (xs.length) {
    console.log(
      `  ${e}: every other node on a newer term after p50 ${p(xs, 50).toFixed(0)} ms, ` +
        `p95 ${p(xs, 95).toFixed(0)} ms, max ${
          Math.max(...xs).toFixed(0)
        } ms (${xs.length} cycles)`,
    );
  }
}
for (const a of aborts) console.log(`  abort: ${a}`);
await recordFigures({
  goaway_soak_minutes: (performance.now() - t0) / 60_000,
  goaway_soak_cycles: cycles,
  goaway_soak_reconnects: reconnects,
  goaway_soak_streams: streams,
  goaway_soak_aborts: aborts.length,
});
Deno.exit(aborts.length ? 1 : 0);

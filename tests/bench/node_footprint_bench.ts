/**
 * The node footprint (issue 35): a real node brought up with `podmin local up` (the pinned
 * kubelet, containerd and CoreDNS, the agent as nodes run it — its bundle, with mesh, DNS and
 * dataplane) running N small Pods (N Deployments of the demo image, one Service each; 20, 2 in a
 * smoke run). Reports RSS and PSS (/proc/PID/smaps_rollup) of every node service — agent, kubelet,
 * containerd, every containerd-shim-runc-v2 of the node, CoreDNS — and each one's idle CPU over a
 * window (/proc/PID/stat utime+stime deltas), their sum against the memory the generated kubelet
 * config reserves (systemReserved).
 *
 *   deno run -A tests/bench/node_footprint_bench.ts [--pods N] [--window S]
 *
 * Needs root and the pinned node peers (tests/support/node_peers.ts). Waits until no other
 * kubelet runs in the host's network namespace (kubelet's ports are fixed) and always runs `local down --purge`.
 */

import * as path from "node:path";
import { parseArgs } from "node:util";
import { readState } from "../../cli/local/local_node.ts";
import { writeDemoImageLayout } from "../../cli/local/demo_image.ts";
import { REGISTRY_HOSTNAME } from "../../core/model/image_ref.ts";
import { freePort } from "../support/moto.ts";
import { NODE_BIN_DIRS } from "../support/node_peers.ts";
import { waitFor } from "../support/programs.ts";
import { noOtherHostKubelet } from "../support/host_kubelet.ts";
import { benchSmoke, recordFigures } from "./bench_output.ts";
import { shippedAgent } from "./shipped_agent.ts";

const CLI = new URL("../../cli/main.ts", import.meta.url).pathname;
const TICKS_PER_S = 100; // USER_HZ on Linux
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const smoke = benchSmoke();
const args = parseArgs({
  args: Deno.args,
  options: { pods: { type: "string" }, window: { type: "string" } },
}).values;
const PODS = Number(args.pods ?? (smoke ? 2 : 20));
const WINDOW_S = Number(args.window ?? (smoke ? 3 : 60));
const SETTLE_S = smoke ? 2 : 30;

async function run(argv: string[], env?: Record<string, string>): Promise<string> {
  const out = await new Deno.Command(argv[0], {
    args: argv.slice(1),
    env,
    stdout: "piped",
    stderr: "piped",
  }).output();
  const text = new TextDecoder().decode(out.stdout) + new TextDecoder().decode(out.stderr);
  if (!out.success) throw new Error(`${argv.join(" ")} exited ${out.code}:\n${text}`);
  return text;
}

const podmin = (a: string[]) => run([Deno.execPath(), "run", "-q", "--allow-all", CLI, ...a]);

/** RSS and PSS of a process in MiB (smaps_rollup). */
async function memory(pid: number): Promise<{ rss: number; pss: number }> {
  const t = await Deno.readTextFile(`/proc/${pid}/smaps_rollup`);
  const kib = (k: string) => Number(new RegExp(`^${k}:\\s+(\\d+) kB`, "m").exec(t)?.[1] ?? NaN);
  return { rss: kib("Rss") / 1024, pss: kib("Pss") / 1024 };
}

/** utime + stime of a process, in seconds. */
async function cpuSeconds(pid: number): Promise<number> {
  const stat = await Deno.readTextFile(`/proc/${pid}/stat`);
  const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return (Number(f[11]) + Number(f[12])) / TICKS_PER_S; // fields 14 and 15
}

/** PIDs of the containerd shims in the mount namespace `mnt` (readlink of /proc/PID/ns/mnt). */
async function shims(mnt: string): Promise<number[]> {
  const out: number[] = [];
  for await (const e of Deno.readDir("/proc")) {
    if (!/^\d+$/.test(e.name)) continue;
    const cmd = await Deno.readTextFile(`/proc/${e.name}/cmdline`).catch(() => "");
    if (path.basename(cmd.split("\0")[0]) !== "containerd-shim-runc-v2") continue;
    if (await Deno.readLink(`/proc/${e.name}/ns/mnt`).catch(() => "") === mnt) {
      out.push(Number(e.name));
    }
  }
  return out;
}

function manifest(n: number): string {
  const docs: string[] = [];
  for (let i = 0; i < n; i++) {
    docs.push(`apiVersion: podmin.dev/v1
kind: Deployment
metadata: {name: fp${i}}
spec:
  nodeGroup: default
  template:
    metadata: {labels: {app: fp${i}}}
    spec:
      terminationGracePeriodSeconds: 1
      containers:
        - name: app
          image: ${REGISTRY_HOSTNAME}/apps/demo:1.0
          args: ["serve", "8080"]
---
apiVersion: podmin.dev/v1
kind: Service
metadata: {name: fp${i}}
spec:
  selector: {app: fp${i}}
  ports: [{name: http, port: 80, targetPort: 8080}]`);
  }
  return docs.join("\n---\n") + "\n";
}

const work = await Deno.makeTempDir({ prefix: "podmin-footprint-" });
const stateDir = path.join(work, "state");
const bucket = `file://${path.join(stateDir, "bucket")}`;
let up = false;
let failed = false;
try {
  const agent = await shippedAgent(work);
  const wrapper = path.join(work, "podmin-agent");
  await Deno.writeTextFile(
    wrapper,
    `#!/bin/sh\nexec ${agent.argv.map((a) => `'${a}'`).join(" ")} "$@"\n`,
  );
  await Deno.chmod(wrapper, 0o755);

  await noOtherHostKubelet();
  up = true;
  await podmin([
    "local",
    "up",
    "--state-dir",
    stateDir,
    "--pod-prefix",
    "fd00:706d:6e:35::/80",
    "--registry-port",
    String(await freePort()),
    "--agent-binary",
    wrapper,
    ...NODE_BIN_DIRS.flatMap((d) => ["--bin-dir", d]),
  ]);
  const state = (await readState(stateDir))!;
  const layout = await writeDemoImageLayout({ dir: path.join(work, "demo"), version: "1.0" });
  await podmin(["--bucket", bucket, "push", `oci:${layout}:1.0`, "apps/demo:1.0"]);
  await Deno.writeTextFile(path.join(work, "fp.yaml"), manifest(PODS));
  await podmin(["--bucket", bucket, "apply", "-f", path.join(work, "fp.yaml")]);
  const t0 = performance.now();
  await waitFor(`${PODS} Pods Ready`, async () => {
    const out = await run([
      "nsenter",
      `--mount=${state.mountNs}`,
      "--",
      wrapper,
      "pods",
      "-o",
      "json",
    ]).catch(() => "");
    const pods = out.trim().split("\n").filter((l) => l.startsWith("{")).map((l) => JSON.parse(l));
    return pods.filter((p) => /^fp\d+-/.test(p.name) && p.ready).length >= PODS;
  }, 15 * 60_000);
  console.log(`${PODS} Pods Ready after ${((performance.now() - t0) / 1000).toFixed(1)} s`);
  await sleep(SETTLE_S * 1000);

  const mnt = await Deno.readLink(`/proc/${state.daemons.containerd!.pid}/ns/mnt`);
  const shimPids = await shims(mnt);
  if (shimPids.length < PODS) throw new Error(`${shimPids.length} shims for ${PODS} Pods`);
  const services: Record<string, number[]> = {
    agent: [state.daemons["podmin-agent"]!.pid],
    kubelet: [state.daemons.kubelet!.pid],
    containerd: [state.daemons.containerd!.pid],
    coredns: [state.daemons.coredns!.pid],
    shims: shimPids,
  };
  const cpu0: Record<string, number> = {};
  for (const [n, pids] of Object.entries(services)) {
    cpu0[n] = (await Promise.all(pids.map(cpuSeconds))).reduce((a, b) => a + b, 0);
  }
  const w0 = performance.now();
  await sleep(WINDOW_S * 1000);
  const wall = (performance.now() - w0) / 1000;
  const rows: Record<string, { rss: number; pss: number; cpu: number }> = {};
  for (const [n, pids] of Object.entries(services)) {
    const mem = await Promise.all(pids.map(memory));
    const cpu = (await Promise.all(pids.map(cpuSeconds))).reduce((a, b) => a + b, 0);
    rows[n] = {
      rss: mem.reduce((a, m) => a + m.rss, 0),
      pss: mem.reduce((a, m) => a + m.pss, 0),
      cpu: ((cpu - cpu0[n]) / wall) * 100,
    };
  }
  const config = await Deno.readTextFile(
    path.join(stateDir, "node/etc/podmin/kubelet/config.yaml"),
  );
  const reserved = /^systemReserved:\n(?:\s+.*\n)*?\s+memory:\s*(\d+)Mi\b/m.exec(config);
  if (!reserved) throw new Error(`no systemReserved memory in the kubelet config:\n${config}`);
  const reservedMib = Number(reserved[1]);
  const sum = Object.values(rows).reduce((a, r) => a + r.rss, 0);
  const sumPss = Object.values(rows).reduce((a, r) => a + r.pss, 0);
  const sumCpu = Object.values(rows).reduce((a, r) => a + r.cpu, 0);
  console.log(`node services with ${PODS} Pods, idle CPU over ${wall.toFixed(0)} s:`);
  for (const [n, r] of Object.entries(rows)) {
    const count = services[n].length > 1 ? ` (${services[n].length})` : "";
    console.log(
      `  ${(n + count).padEnd(14)} RSS ${r.rss.toFixed(1).padStart(6)} MiB  PSS ${
        r.pss.toFixed(1).padStart(6)
      } MiB  CPU ${r.cpu.toFixed(2).padStart(5)} %`,
    );
  }
  console.log(
    `  ${"sum".padEnd(14)} RSS ${sum.toFixed(1).padStart(6)} MiB  PSS ${
      sumPss.toFixed(1).padStart(6)
    } MiB  CPU ${sumCpu.toFixed(2).padStart(5)} %   reserved: ${reservedMib} MiB`,
  );
  if (!(sum > 0) || !(reservedMib > 0)) throw new Error("no figures");
  await recordFigures({
    node_services_rss_mib: sum,
    node_services_pss_mib: sumPss,
    node_reserved_mib: reservedMib,
    agent_node_rss_mib: rows.agent.rss,
    agent_node_idle_cpu_pct: rows.agent.cpu,
    node_services_idle_cpu_pct: sumCpu,
  });
} catch (err) {
  failed = true;
  console.error(`FAIL node footprint: ${(err as Error).stack ?? err}`);
} finally {
  if (up) {
    await podmin(["local", "down", "--state-dir", stateDir, "--purge"]).catch((e) => {
      failed = true;
      console.error(`FAIL local down: ${e.message}`);
    });
  }
  await Deno.remove(work, { recursive: true }).catch(() => {});
}
if (failed) Deno.exit(1);

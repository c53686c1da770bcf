/**
 * Benchmark of the deploy spine on moto (S3 wire protocol), printed figures:
 *
 * 1. apply → manifest-on-disk latency, p50/p99 over 100 applies, against the
 *    agent's poll interval (the floor: a change waits for the next poll).
 * 2. With 1,000 Deployments in the index: requests and body bytes of a cold
 *    pass and of an idle poll (must be one not-modified GET, 0 body bytes).
 * 3. With 1,000 Deployments and 1,000 Services: the RSS (median of samples every 2 s over the
 *    idle window) and idle CPU of the agent as
 *    shipped (tests/bench/shipped_agent.ts: the bundle with the runtime settings), against
 *    the same agent polling an empty bucket, and the bundle without the settings for reference.
 *    The same agent once more as nodes run it: with the endpoint mesh (`--mesh-listen`, a cluster
 *    CA, a simulated kubelet Pods API), which loads gRPC, TLS and the certificate library.
 *
 * Run: deno task bench:deploy
 */

import * as path from "node:path";
import { DeploymentsPass } from "../../agent/deployments/deployments_pass.ts";
import { SecretsSync } from "../../agent/secrets/secrets_sync.ts";
import { AwsValueProvider } from "../../agent/secrets/value_provider.ts";
import { applyResources } from "../../cli/desired_state.ts";
import { newCaPem } from "../../cli/setup/cluster_cas.ts";
import { silentLogger } from "../../core/kit/log.ts";
import type { ObjectStore } from "../../core/store/object_store.ts";
import { parseResource, type Resource } from "../../core/model/resources.ts";
import { S3Store } from "../../core/store/s3_store.ts";
import { moto } from "../support/moto.ts";
import { LineProcess } from "../support/dataplane_topology.ts";
import { meshAgentArgs, nodeAgentArgs, spawnAgent, waitFor } from "../support/programs.ts";
import { benchSmoke, processCpuSeconds, recordFigures } from "./bench_output.ts";
import { shippedAgent } from "./shipped_agent.ts";

const POLL_MS = 250;
const SMOKE = benchSmoke();
const APPLIES = SMOKE ? 5 : 100;
const BIG = SMOKE ? 100 : 1000;
/**
 * Idle window over which an agent's CPU is measured, at the default 2 s interval (in a smoke run
 * long enough for one pass: an agent measured at 0 % would leave its ratio rows without a value).
 */
const IDLE_WINDOW_MS = SMOKE ? 2_500 : 30_000;
/** How long a converged agent settles before it is measured, and its RSS sampling interval. */
const SETTLE_MS = SMOKE ? 500 : 3_000;
const RSS_SAMPLE_MS = SMOKE ? 500 : 2_000;

function deployment(name: string, nodeGroup: string, image: string): Resource {
  return parseResource({
    apiVersion: "podmin.dev/v1",
    kind: "Deployment",
    metadata: { name },
    spec: {
      nodeGroup,
      template: {
        spec: { containers: [{ name: "main", image, ports: [{ containerPort: 8080 }] }] },
      },
    },
  });
}

function service(name: string, app: string): Resource {
  return parseResource({
    apiVersion: "podmin.dev/v1",
    kind: "Service",
    metadata: { name },
    spec: { selector: { app }, ports: [{ port: 80, targetPort: 8080 }] },
  });
}

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)];
}

/** An ObjectStore decorator that counts requests and body bytes received. */
function counting(inner: ObjectStore) {
  const c = { requests: 0, notModified: 0, bytes: 0 };
  const store: ObjectStore = {
    url: inner.url,
    async get(key, o) {
      c.requests++;
      const r = await inner.get(key, o);
      if (r.notModified) c.notModified++;
      else c.bytes += r.body.byteLength;
      return r;
    },
    head: (k) => (c.requests++, inner.head(k)),
    put: (k, b, o) => (c.requests++, inner.put(k, b, o)),
    putStream: (k, b, o) => (c.requests++, inner.putStream(k, b, o)),
    getStream: (k, o) => (c.requests++, inner.getStream(k, o)),
    delete: (k, o) => (c.requests++, inner.delete(k, o)),
    list: (p) => (c.requests++, inner.list(p)),
  };
  return { store, c, reset: () => Object.assign(c, { requests: 0, notModified: 0, bytes: 0 }) };
}

async function rssKiB(pid: number): Promise<number> {
  const status = await Deno.readTextFile(`/proc/${pid}/status`);
  return Number(/VmRSS:\s+(\d+)/.exec(status)![1]);
}

const m = await moto();
const tmp = await Deno.makeTempDir({ prefix: "podmin-bench-" });
try {
  // --- 1. latency --------------------------------------------------------------
  const bucket = await m.createBucket();
  const store = new S3Store({ bucket, region: "us-east-1" });
  const dir = path.join(tmp, "lat");
  const agentArgs = (b: string, d: string, ms: number) => [
    ...nodeAgentArgs({ bucket: `s3://${b}`, nodeGroup: "workers", base: d }),
    "--interval",
    `${ms}ms`,
    "--registry-listen",
    "off",
  ];
  const child = spawnAgent(agentArgs(bucket, dir, POLL_MS));
  // The new spec's manifest: in place, or a surge slot beside the old one (podmin_default_web.<hex>.json).
  const manifests = path.join(dir, "manifests");
  const holds = async (needle: string) => {
    for await (const e of Deno.readDir(manifests)) {
      if (!/^podmin_default_web(\.[0-9a-f]{8})?\.json$/.test(e.name)) continue;
      if ((await Deno.readTextFile(path.join(manifests, e.name))).includes(needle)) return true;
    }
    return false;
  };
  const latencies: number[] = [];
  try {
    for (let i = 0; i < APPLIES; i++) {
      const image = `registry.podmin.internal/apps/web:${i}`;
      const started = performance.now();
      await applyResources({ store, resources: [deployment("web", "workers", image)] });
      await waitFor("manifest", async () => {
        try {
          return await holds(`apps/web:${i}"`);
        } catch {
          return false;
        }
      }, 30_000);
      latencies.push(performance.now() - started);
      // Desynchronise from the poll phase so samples cover it uniformly.
      await new Promise((r) => setTimeout(r, Math.random() * POLL_MS));
    }
  } finally {
    child.kill("SIGTERM");
    await child.output();
  }
  latencies.sort((a, b) => a - b);
  const p50 = percentile(latencies, 50), p99 = percentile(latencies, 99);
  console.log(
    `apply → manifest on disk, ${APPLIES} applies, poll interval ${POLL_MS} ms (the floor):`,
  );
  console.log(`  p50 ${p50.toFixed(0)} ms (${(p50 / POLL_MS).toFixed(2)}× interval)`);
  console.log(`  p99 ${p99.toFixed(0)} ms (${(p99 / POLL_MS).toFixed(2)}× interval)`);
  console.log(
    `  min ${latencies[0].toFixed(0)} ms, max ${latencies[latencies.length - 1].toFixed(0)} ms`,
  );

  // --- 2. idle poll with 1,000 deployments ---------------------------------------
  const big = await m.createBucket();
  const bigStore = new S3Store({ bucket: big, region: "us-east-1" });
  const resources = Array.from(
    { length: BIG },
    (_, i) =>
      deployment(
        `d${i}`,
        i % 50 === 0 ? "workers" : `group-${i % 7}`,
        `registry.podmin.internal/apps/d${i}:1`,
      ),
  );
  await applyResources({ store: bigStore, resources });
  const indexBytes = (await bigStore.head("deployments/index.json")).size;
  const counted = counting(bigStore);
  const loop = new DeploymentsPass({
    store: counted.store,
    nodeGroup: "workers",
    manifestDir: path.join(tmp, "idle", "manifests"),
    secretsDir: path.join(tmp, "idle", "secrets"),
    tlsDir: path.join(tmp, "idle", "tls"),
    secrets: new SecretsSync({
      cluster: "bench",
      secretsDir: path.join(tmp, "idle", "secrets"),
      provider: new AwsValueProvider({ region: "us-east-1" }),
      refreshMs: 60_000,
      log: silentLogger,
    }),
    log: silentLogger,
  });
  await loop.pass();
  const cold = { ...counted.c };
  counted.reset();
  const IDLE = 20;
  for (let i = 0; i < IDLE; i++) await loop.pass();
  const idle = { ...counted.c };
  console.log(
    `${BIG} deployments in the index (${indexBytes} bytes; ${BIG / 50} for this NodeGroup):`,
  );
  console.log(`  cold pass: ${cold.requests} requests, ${cold.bytes} body bytes`);
  console.log(
    `  idle poll: ${(idle.requests / IDLE).toFixed(2)} requests, ${
      (idle.notModified / IDLE).toFixed(2)
    } not-modified, ` +
      `${(idle.bytes / IDLE).toFixed(0)} body bytes (${
        ((idle.bytes / IDLE) / indexBytes).toFixed(3)
      }× the index)`,
  );
  if (idle.requests !== IDLE || idle.notModified !== IDLE || idle.bytes !== 0) {
    console.log("  FAIL: an idle poll must be exactly one not-modified GET");
    Deno.exitCode = 1;
  }

  // --- 3. RSS and idle CPU of the shipped agent at the default interval ------------
  // BIG Services beside the BIG Deployments (each selecting one Deployment's Pods).
  await applyResources({
    store: bigStore,
    resources: Array.from({ length: BIG }, (_, i) => service(`s${i}`, `d${i}`)),
  });
  const shipped = await shippedAgent(tmp);
  const unset = { argv: shipped.argv.filter((a) => !a.startsWith("--v8-flags")), env: {} };
  const empty = await m.createBucket();
  const rss: number[] = [];
  const cpuPct: number[] = [];
  // As nodes run it: the endpoint mesh with a cluster CA (key on tmpfs) and a kubelet Pods API.
  const caDir = await Deno.makeTempDir({ dir: "/dev/shm", prefix: "podmin-bench-ca-" });
  const caFile = path.join(caDir, "cluster-ca.pem");
  const ca = await newCaPem("podmin bench cluster CA");
  await Deno.writeTextFile(caFile, `${ca.certPem}\n${ca.keyPem}`, { mode: 0o600 });
  const podsSocket = path.join(tmp, "pods.sock");
  const pods = new LineProcess(
    new Deno.Command(Deno.execPath(), {
      args: ["run", "-A", path.join(import.meta.dirname!, "pods_api_child.ts"), podsSocket],
      stdin: "piped",
      stdout: "piped",
      stderr: "null",
    }).spawn(),
  );
  if ((await pods.readLine(30_000)) !== "ready") throw new Error("pods_api_child did not start");
  const nodeArgs = meshAgentArgs({ nodeId: "bench-node", caFile, podsSocket });
  const runs: [string, string, typeof shipped, string[]][] = [
    [empty, "rss-empty", shipped, []],
    [big, "rss-big", shipped, []],
    [big, "rss-big-unset", unset, []],
    [big, "rss-big-node", shipped, nodeArgs],
  ];
  for (const [b, d, how, extra] of runs) {
    const a = new Deno.Command(how.argv[0], {
      args: [...how.argv.slice(1), ...agentArgs(b, path.join(tmp, d), 2000), ...extra],
      env: how.env,
      stdin: "null",
      stdout: "null",
      stderr: "null",
    }).spawn();
    try {
      await waitFor("status", async () => {
        try {
          return JSON.parse(await Deno.readTextFile(path.join(tmp, d, "state", "status.json")))
            .converged;
        } catch {
          return false;
        }
      }, 30_000);
      await new Promise((r) => setTimeout(r, SETTLE_MS)); // settled
      const c0 = await processCpuSeconds(a.pid);
      const t0 = performance.now();
      // RSS moves by a few MiB with each collection: the median of samples (every 2 s).
      const samples: number[] = [];
      while (performance.now() - t0 < IDLE_WINDOW_MS) {
        await new Promise((r) => setTimeout(r, RSS_SAMPLE_MS));
        samples.push(await rssKiB(a.pid));
      }
      cpuPct.push(
        ((await processCpuSeconds(a.pid)) - c0) / ((performance.now() - t0) / 1000) * 100,
      );
      samples.sort((x, y) => x - y);
      rss.push(samples[Math.floor((samples.length - 1) / 2)]);
    } finally {
      a.kill("SIGTERM");
      await a.output();
    }
  }
  console.log(
    `agent RSS (bundle, runtime settings; median of ${RSS_SAMPLE_MS / 1000} s samples): ${
      (rss[1] / 1024).toFixed(1)
    } MiB with ${BIG} ` +
      `deployments + ${BIG} services vs ${(rss[0] / 1024).toFixed(1)} MiB with none (${
        (rss[1] / rss[0]).toFixed(2)
      }×); without the settings ${(rss[2] / 1024).toFixed(1)} MiB`,
  );
  console.log(
    `as nodes run it (endpoint mesh, cluster CA, Pods API): RSS ${
      (rss[3] / 1024).toFixed(1)
    } MiB, idle CPU ${cpuPct[3].toFixed(2)} % of a core`,
  );
  await pods.end();
  await pods.proc.status;
  await Deno.remove(caDir, { recursive: true });
  console.log(
    `agent idle CPU (2 s interval, ${IDLE_WINDOW_MS / 1000} s window): ${
      cpuPct[1].toFixed(2)
    } % of a core with ${BIG} deployments + ${BIG} services vs ${
      cpuPct[0].toFixed(2)
    } % with none; without the settings ${cpuPct[2].toFixed(2)} %`,
  );
  await recordFigures({
    deploy_apply_p50_ms: p50,
    deploy_apply_p99_ms: p99,
    deploy_poll_interval_ms: POLL_MS,
    deploy_idle_requests_per_poll: idle.requests / IDLE,
    deploy_idle_body_bytes_per_poll: idle.bytes / IDLE,
    deploy_agent_rss_mib: rss[1] / 1024,
    deploy_agent_rss_empty_mib: rss[0] / 1024,
    deploy_agent_idle_cpu_pct: cpuPct[1],
    deploy_agent_idle_cpu_empty_pct: cpuPct[0],
    deploy_agent_rss_unset_mib: rss[2] / 1024,
    deploy_agent_idle_cpu_unset_pct: cpuPct[2],
    deploy_agent_rss_node_mib: rss[3] / 1024,
    deploy_agent_idle_cpu_node_pct: cpuPct[3],
  });
} catch (err) {
  // An exit in `finally` alone would swallow the error and exit 0.
  console.log(`  FAIL: ${(err as Error).stack}`);
  Deno.exitCode = 1;
} finally {
  await Deno.remove(tmp, { recursive: true });
  Deno.exit();
}

/**
 * The cluster-scale benchmark's fleet: worker processes of simulated agents
 * (tests/bench/cluster_scale_worker.ts) sharing one cluster, driven over their stdin/stdout
 * (JSON lines), their answers summed. Also the resources every simulated cluster runs.
 */

import * as path from "node:path";
import { manifestFileName } from "../../agent/deployments/static_pod.ts";
import { applyResources } from "../../cli/desired_state.ts";
import { newCaPem } from "../../cli/setup/cluster_cas.ts";
import { generateKeyPair, privateKeyPem } from "../../core/crypto/certificates.ts";
import type { ObjectStore } from "../../core/store/object_store.ts";
import { type Deployment, parseResource, type Service } from "../../core/model/resources.ts";
import { processCpuSeconds } from "./bench_output.ts";
import { WorkerChannel } from "./worker_channel.ts";
import type {
  AwaitResult,
  WorkerConfig,
  WorkerRequest,
  WorkerStatus,
} from "./cluster_scale_worker.ts";

/** The NodeGroup of agent `i` among `groups`. */
/**
 * The fleet's shared key material in `dir` (tmpfs for the bench): a new cluster CA (certificate and
 * key) and a workload CA key, as the agents' `file:` flags read them.
 */
export async function writeFleetCaFiles(
  dir: string,
  commonName: string,
): Promise<{ clusterCaFile: string; workloadKeyFile: string }> {
  const { certPem, keyPem } = await newCaPem(commonName);
  const clusterCaFile = path.join(dir, "cluster-ca.pem");
  const workloadKeyFile = path.join(dir, "workload-ca.key");
  await Deno.writeTextFile(clusterCaFile, certPem + keyPem);
  await Deno.writeTextFile(
    workloadKeyFile,
    await privateKeyPem((await generateKeyPair()).privateKey),
  );
  return { clusterCaFile, workloadKeyFile };
}

export function nodeGroupOf(i: number, groups: number): string {
  return `group-${i % groups}`;
}

/** A one-container Deployment of `nodeGroup` labelled `app: name`, with `secrets` SSM values. */
export function appDeployment(name: string, nodeGroup: string, secrets = 0): Deployment {
  return parseResource({
    apiVersion: "podmin.dev/v1",
    kind: "Deployment",
    metadata: { name, labels: { app: name } },
    spec: {
      nodeGroup,
      ...(secrets
        ? { secrets: Array.from({ length: secrets }, (_, k) => ({ key: `v${k}`, from: "ssm" })) }
        : {}),
      template: {
        metadata: { labels: { app: name } },
        spec: { containers: [{ name: "main", image: `r/apps/${name}:1` }] },
      },
    },
  }) as Deployment;
}

/** A Service selecting `app: name`. */
export function appService(name: string): Service {
  return parseResource({
    apiVersion: "podmin.dev/v1",
    kind: "Service",
    metadata: { name },
    spec: { selector: { app: name }, ports: [{ port: 80, targetPort: 8080, protocol: "TCP" }] },
  }) as Service;
}

/** Sums counters by name. */
function merge(all: Record<string, number>[]): Record<string, number> {
  const out: Record<string, number> = {};
  for (const c of all) for (const [k, n] of Object.entries(c)) out[k] = (out[k] ?? 0) + n;
  return out;
}

/** One worker process of simulated agents and its command channel. */
class Worker extends WorkerChannel<WorkerRequest> {
  constructor(configFile: string, env: Record<string, string>) {
    super({
      script: path.join(import.meta.dirname!, "cluster_scale_worker.ts"),
      args: [configFile],
      env,
    });
  }
}

/** What one apply measured. */
export interface ApplyResult {
  /** Apply start → each alive agent's manifest written, s (`Infinity`: not written in time). */
  latenciesS: number[];
  missing: number;
  /** Agents that were not on notifications when they wrote (direct polling). */
  direct: number;
  /** Apply start → the first snapshot announcing the new index, s, per agent on the mesh. */
  announcedS: number[];
  /** How long `applyResources` itself took, s. */
  appliedS: number;
  /** Apply start → the last manifest (or the timeout), s. */
  spreadS: number;
}

/** Options of `Fleet.start`. */
export interface FleetOptions {
  /** Everything of `WorkerConfig` but the agents, the directory and the spread. */
  config: Omit<WorkerConfig, "agents" | "dir" | "startSpreadMs">;
  nodes: number;
  workers: number;
  groups: number;
  /** Node ids are `<prefix>-<i>`. */
  prefix: string;
  /** tmpfs directory of the worker configs and the agents' files. */
  shm: string;
  /** The agents of all workers join over this window. */
  startSpreadMs: number;
  env: Record<string, string>;
}

/** Worker processes sharing one cluster. */
export class Fleet {
  readonly #workers: Worker[] = [];
  readonly #groups: number;

  private constructor(groups: number) {
    this.#groups = groups;
  }

  /** Spawns the workers and starts every agent (agents spread over the workers round-robin). */
  static async start(o: FleetOptions): Promise<Fleet> {
    const fleet = new Fleet(o.groups);
    for (let w = 0; w < o.workers; w++) {
      const agents = [];
      for (let i = w; i < o.nodes; i += o.workers) {
        agents.push({ nodeId: `${o.prefix}-${i}`, nodeGroup: nodeGroupOf(i, o.groups) });
      }
      const config: WorkerConfig = {
        ...o.config,
        agents,
        dir: path.join(o.shm, o.prefix),
        startSpreadMs: o.startSpreadMs,
      };
      const file = path.join(o.shm, `${o.prefix}-worker-${w}.json`);
      await Deno.writeTextFile(file, JSON.stringify(config));
      fleet.#workers.push(new Worker(file, o.env));
    }
    await Promise.all(fleet.#workers.map((w) => w.send({ cmd: "start" })));
    return fleet;
  }

  /** Every worker's status, summed; `expect`: the manifest file each NodeGroup must have. */
  async status(expect?: Record<string, string>): Promise<WorkerStatus> {
    const all = await Promise.all(
      this.#workers.map((w) => w.send<WorkerStatus>({ cmd: "status", expect })),
    );
    const sum = (k: keyof WorkerStatus) => all.reduce((n, s) => n + (s[k] as number), 0);
    return {
      alive: sum("alive"),
      connected: sum("connected"),
      fresh: sum("fresh"),
      wrote: sum("wrote"),
      converged: sum("converged"),
      coordinator: all.find((s) => s.coordinator)?.coordinator,
      coordinatorTerm: Math.max(0, ...all.map((s) => s.coordinatorTerm ?? 0)),
      notified: sum("notified"),
      fallback: sum("fallback"),
      warnings: merge(all.map((s) => s.warnings)),
      disconnected: merge(all.map((s) => s.disconnected)),
    };
  }

  /** The manifest file of Deployment `<label>-g<g>` per NodeGroup. */
  files(label: string): Record<string, string> {
    const files: Record<string, string> = {};
    for (let g = 0; g < this.#groups; g++) {
      files[nodeGroupOf(g, this.#groups)] = manifestFileName("default", `${label}-g${g}`);
    }
    return files;
  }

  /**
   * Applies one new Deployment `<label>-g<g>` per NodeGroup (every agent must write one
   * manifest) and waits for every alive agent's, up to `timeoutMs`.
   */
  async apply(store: ObjectStore, label: string, timeoutMs: number): Promise<ApplyResult> {
    const resources = Array.from(
      { length: this.#groups },
      (_, g) => appDeployment(`${label}-g${g}`, nodeGroupOf(g, this.#groups)),
    );
    const files = this.files(label);
    const now = () => performance.timeOrigin + performance.now();
    const t0 = now();
    await applyResources({ store, resources });
    const appliedS = (now() - t0) / 1000;
    const all = await Promise.all(
      this.#workers.map((w) => w.send<AwaitResult>({ cmd: "await", t0, files, timeoutMs })),
    );
    const missing = all.reduce((n, r) => n + r.missing, 0);
    const latenciesS = all.flatMap((r) => r.latenciesMs).map((ms) => ms / 1000);
    return {
      latenciesS: [...latenciesS, ...Array(missing).fill(Infinity)],
      missing,
      direct: all.reduce((n, r) => n + r.direct, 0),
      announcedS: all.flatMap((r) => r.announcedMs).map((ms) => ms / 1000),
      appliedS,
      spreadS: missing ? timeoutMs / 1000 : Math.max(0, ...latenciesS),
    };
  }

  /** Kills the agent that coordinates (no goodbye, no lease release); its node id. */
  async crashCoordinator(): Promise<string | undefined> {
    const all = await Promise.all(
      this.#workers.map((w) => w.send<{ crashed?: string }>({ cmd: "crash" })),
    );
    return all.find((r) => r.crashed)?.crashed;
  }

  /** CPU seconds the worker processes used so far. */
  async cpuSeconds(): Promise<number> {
    let s = 0;
    for (const w of this.#workers) s += await processCpuSeconds(w.child.pid);
    return s;
  }

  /** Resident memory of the worker processes. */
  async rssMiB(): Promise<number> {
    let kib = 0;
    for (const w of this.#workers) {
      const status = await Deno.readTextFile(`/proc/${w.child.pid}/status`);
      kib += Number(/VmRSS:\s+(\d+)/.exec(status)![1]);
    }
    return kib / 1024;
  }

  /** Members leave first (no client session open when a server closes), then servers stop. */
  async stop(): Promise<void> {
    await Promise.all(this.#workers.map((w) => w.send({ cmd: "leave" })));
    await Promise.all(this.#workers.map((w) => w.send({ cmd: "stop" })));
    await Promise.all(this.#workers.map((w) => w.child.status));
  }

  /**
   * Worker processes that exited on their own with a failure (exit 134 or a SIGSEGV of the
   * runtime, denoland/deno#36788): each takes its agents down.
   */
  aborts(): number {
    return this.#workers.filter((w) => w.aborted).length;
  }

  /** Kills every worker (after a failure). */
  kill(): void {
    for (const w of this.#workers) w.kill();
  }
}

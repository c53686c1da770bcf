/**
 * One process of simulated agents for tests/bench/cluster_scale_bench.ts. A simulated agent is
 * `podmin-agent run`'s wiring (agent/run_command.ts) with the product's own pieces, minus what
 * needs a real node: a `MeshNode` (real TLS 1.3 mutual gRPC, cluster-CA node certificate, the
 * coordinator lease, announcers of the deployments index, the services index and the CA state),
 * the deployments loop (`DeploymentsPass` gated by an `IndexNotifier`, manifests on tmpfs), a
 * gated `ServicesView`, a `SecretsSync` through the real `AwsValueProvider`, the identity-ca loop
 * (only the coordinator and disconnected agents contend) and the node record writer. Left out:
 * status files, the registry, telemetry, DNS, the dataplane, kubelet's Pods API (reports carry no
 * endpoints) and Pod certificates (no `CaView`: nothing reads the CA state but the identity loop).
 *
 * Without `mesh` the same agents poll directly, as without `--mesh-listen`; without `batched` their
 * provider has no `fetchMany` (one `GetParameter` per value, as before issue 18).
 *
 * Protocol: the config file is the first argument; commands arrive as JSON lines on stdin, every
 * answer is one stdout line `@@<json>` with the command's `id`.
 */

import * as path from "node:path";
import { DeploymentsPass } from "../../agent/deployments/deployments_pass.ts";
import type { AgentStatus } from "../../agent/deployments/status.ts";
import { fileCaKey } from "../../agent/identity/ca_key.ts";
import { IDENTITY_DEFAULTS, identityCaLoop } from "../../agent/identity/identity_loop.ts";
import { Loop } from "../../agent/loop.ts";
import { ANNOUNCED_HINT_DELAY_MS, IndexNotifier } from "../../agent/index_notifier.ts";
import { etagPoller, indexPoller } from "../../agent/mesh/index_poller.ts";
import { MeshNode } from "../../agent/mesh/mesh_node.ts";
import { type ClusterCa, parseClusterCa } from "../../agent/mesh/node_tls.ts";
import { NodeRecordWriter } from "../../agent/node/node_record_writer.ts";
import { SecretsSync } from "../../agent/secrets/secrets_sync.ts";
import { AwsValueProvider, type ValueProvider } from "../../agent/secrets/value_provider.ts";
import { ServicesView } from "../../agent/services/services_view.ts";
import { SERVICE_INDEX, WORKLOAD_CA_STATE } from "../../core/bucket/bucket_layout.ts";
import { parseDuration } from "../../core/kit/duration.ts";
import { LIMITS } from "../../core/kit/limits.ts";
import type { Logger } from "../../core/kit/log.ts";
import { HEARTBEAT_MS } from "../../core/bucket/node_record.ts";
import { RecordPacer } from "../../agent/node/record_pacer.ts";
import type { ObjectStore } from "../../core/store/object_store.ts";
import { openStore } from "../../core/store/store_url.ts";
import { WORKLOAD_CA_STATE_MAX_BYTES } from "../../core/bucket/workload_ca_state.ts";
import { reply, serveCommands, startSpread } from "./worker_channel.ts";

/** What a worker runs. */
export interface WorkerConfig {
  bucket: string;
  cluster: string;
  region: string;
  /** PEM of the cluster CA (certificate and key) on tmpfs. */
  clusterCaFile: string;
  /** PEM of the workload CA key on tmpfs. */
  workloadKeyFile: string;
  /** tmpfs directory of the agents' manifests, values and state. */
  dir: string;
  agents: { nodeId: string; nodeGroup: string }[];
  mesh: boolean;
  batched: boolean;
  /** Agent interval (`--interval`, default 2 s). */
  pollMs: number;
  /** `--secrets-interval` (default 60 s). */
  secretsMs: number;
  /** Overrides of the product defaults (smoke runs only). */
  fallbackMs?: number;
  leaseMs?: number;
  /** Agents start spread evenly over this window. */
  startSpreadMs: number;
}

/** A command from the bench (without its `id`). */
export type WorkerRequest =
  | { cmd: "start" }
  | { cmd: "status"; expect?: Record<string, string> }
  | { cmd: "await"; t0: number; files: Record<string, string>; timeoutMs: number }
  | { cmd: "crash" }
  | { cmd: "leave" }
  | { cmd: "stop" };

/** A command as sent: the request and the id its answer carries. */
export type WorkerCommand = WorkerRequest & { id: number };

/** The answer to `status`. */
export interface WorkerStatus {
  alive: number;
  /** Agents whose member stream is up. */
  connected: number;
  /** Agents on notifications of the index and of the services index (mesh only). */
  fresh: number;
  /** Agents that wrote the `expect`ed manifest of their NodeGroup. */
  wrote: number;
  /** Agents whose last deployments pass was converged. */
  converged: number;
  coordinator?: string;
  /** The highest snapshot term an agent holds. */
  coordinatorTerm: number;
  notified: number;
  fallback: number;
  /** Warnings and errors logged since the start, by message. */
  warnings: Record<string, number>;
  /** Agents whose member stream is down, by the member's last connection error. */
  disconnected: Record<string, number>;
}

/** The answer to `await`: apply → manifest written, ms, per agent that wrote it. */
export interface AwaitResult {
  latenciesMs: number[];
  /** Alive agents that had not written their manifest when the wait timed out. */
  missing: number;
  /** Of the agents that wrote, how many were not on notifications then (direct polling). */
  direct: number;
  /** Apply → the first snapshot announcing an index ETag new since `t0`, ms, per agent. */
  announcedMs: number[];
}

const AGENT_RETRY = { attempts: 1, baseMs: 100, maxMs: 2000 } as const;
const CA_STATE_REFRESH_MS = 30_000;

/** Wall-clock milliseconds with sub-millisecond resolution (comparable across processes). */
export function nowMs(): number {
  return performance.timeOrigin + performance.now();
}

/** One simulated agent. */
class SimAgent {
  readonly nodeId: string;
  readonly nodeGroup: string;
  /** Manifest file → when it was last written, and whether the agent was on notifications. */
  readonly written = new Map<string, { at: number; notified: boolean }>();
  /** Warnings and errors logged, by message. */
  readonly warnings = new Map<string, number>();
  /** When a snapshot announced each new index ETag. */
  readonly announced = new Map<string, number>();
  converged = false;
  alive = true;
  readonly notifier?: IndexNotifier;
  readonly servicesNotifier?: IndexNotifier;
  readonly mesh?: MeshNode;
  readonly #loops: Loop<unknown>[];
  readonly #identity: ReturnType<typeof identityCaLoop>;

  constructor(o: {
    config: WorkerConfig;
    agent: { nodeId: string; nodeGroup: string };
    store: ObjectStore;
    provider: ValueProvider;
    ca: ClusterCa;
  }) {
    const { config, store, provider } = o;
    const { nodeId, nodeGroup } = o.agent;
    this.nodeId = nodeId;
    this.nodeGroup = nodeGroup;
    const log = this.#logger();
    const base = path.join(config.dir, nodeId);
    const connected = () => this.mesh?.member.connected() ?? false;
    const notified = (object: "index" | "services") =>
      config.mesh
        ? new IndexNotifier({
          object,
          connected,
          fallbackMs: config.fallbackMs,
          // As MeshLink: no fallback poll while a lost coordinator's successor is due.
          hold: () => this.mesh?.electing() ?? false,
        })
        : undefined;
    const notifier = this.notifier = notified("index");
    const servicesNotifier = this.servicesNotifier = notified("services");
    const services = new ServicesView({
      store,
      intervalMs: config.pollMs,
      gate: servicesNotifier && ((held) => servicesNotifier.shouldRead(held)),
    });
    const deployments = new DeploymentsPass({
      store,
      nodeGroup,
      shouldReadIndex: notifier && ((held) => notifier.shouldRead(held)),
      manifestDir: path.join(base, "manifests"),
      secretsDir: path.join(base, "secrets"),
      tlsDir: path.join(base, "tls"),
      secrets: new SecretsSync({
        cluster: config.cluster,
        secretsDir: path.join(base, "secrets"),
        provider,
        refreshMs: config.secretsMs,
        log,
      }),
      log,
    });
    const d = (text: string) => parseDuration(text);
    const identity = this.#identity = identityCaLoop({
      store,
      cluster: config.cluster,
      nodeId,
      keySource: fileCaKey(config.workloadKeyFile),
      region: config.region,
      retry: AGENT_RETRY,
      intervalMs: d(IDENTITY_DEFAULTS.interval),
      leaseMs: d(IDENTITY_DEFAULTS.lease),
      caLifetimeMs: d(IDENTITY_DEFAULTS.caLifetime),
      trustWindowMs: d(IDENTITY_DEFAULTS.trustWindow),
      clockSkewMs: d(IDENTITY_DEFAULTS.clockSkew),
      stateDir: path.join(base, "state"),
      // As run_command: with the mesh only its coordinator and a few disconnected agents contend.
      contend: config.mesh ? () => this.mesh?.contends() ?? true : undefined,
      log,
    });
    let lastGeneration: number | undefined;
    const record = new NodeRecordWriter({
      store,
      nodeGroup,
      nodeId,
      summary: () => ({ ...deployments.summary(), converged: this.converged }),
    });
    const recordLoop = new Loop({
      name: "node-record",
      intervalMs: HEARTBEAT_MS,
      log,
      pass: async () => (await record.write(), {}),
    });
    const pacer = new RecordPacer({ nodes: () => this.mesh?.member.snapshot?.nodes });
    const deploymentsLoop = new Loop<AgentStatus>({
      name: "deployments",
      intervalMs: config.pollMs,
      maxBackoffMs: 30_000,
      hintDelayMs: ANNOUNCED_HINT_DELAY_MS,
      log,
      pass: async () => {
        // The mesh's Services refresh (DiscoveryMesh: every interval) or Pod certificates' (every
        // pass): gated by the notifier with the mesh.
        await services.refresh(Date.now());
        const { status, unavailable } = await deployments.pass();
        return { status, backOff: unavailable };
      },
      status: (status) => {
        const changed = status.converged !== this.converged ||
          status.indexGeneration !== lastGeneration;
        this.converged = status.converged;
        lastGeneration = status.indexGeneration;
        // As nodePart: paced by the cluster's size, a bounded cluster-wide rate (§7.9).
        const delayMs = changed ? pacer.delayMs(performance.now()) : undefined;
        if (delayMs !== undefined) recordLoop.hint({ delayMs });
      },
    });
    this.#loops = [deploymentsLoop as Loop<unknown>, recordLoop, identity.loop as Loop<unknown>];
    if (config.mesh) {
      this.mesh = new MeshNode({
        store,
        cluster: config.cluster,
        nodeGroup,
        nodeId,
        ca: o.ca,
        listen: "127.0.0.1:0",
        advertiseHost: "127.0.0.1",
        leaseMs: config.leaseMs,
        announce: {
          index: { poll: indexPoller(store) },
          services: {
            poll: etagPoller(store, { key: SERVICE_INDEX, maxBytes: LIMITS.indexBytes }),
            everyMs: 2 * config.pollMs,
          },
          caState: {
            poll: etagPoller(store, {
              key: WORKLOAD_CA_STATE,
              maxBytes: WORKLOAD_CA_STATE_MAX_BYTES,
            }),
            everyMs: CA_STATE_REFRESH_MS,
          },
        },
        pollMs: config.pollMs,
        onSnapshot: (snapshot) => {
          const etag = snapshot.index?.etag;
          if (etag !== undefined && !this.announced.has(etag)) this.announced.set(etag, nowMs());
          if (notifier) deployments.offer(snapshot);
          if (notifier?.onSnapshot(snapshot, deployments.indexEtag)) deploymentsLoop.hint();
          if (servicesNotifier?.onSnapshot(snapshot, services.etag)) {
            void services.refresh(Date.now());
          }
        },
        log,
      });
    }
  }

  /** Records manifest writes (the latency probe) and counts warnings. */
  #logger(): Logger {
    const warn = (msg: string, fields?: Record<string, unknown>) => {
      const what = `${msg}: ${String(fields?.error ?? fields?.errors ?? "").slice(0, 160)}`;
      this.warnings.set(what, (this.warnings.get(what) ?? 0) + 1);
    };
    return {
      debug: () => {},
      info: (msg, fields) => {
        if (msg === "manifest written") {
          this.written.set(String(fields?.file), {
            at: nowMs(),
            notified: !!this.notifier?.fresh(),
          });
        }
      },
      warn,
      error: warn,
    };
  }

  async start(): Promise<void> {
    for (const loop of this.#loops) loop.start();
    await this.mesh?.start();
  }

  /** The agent dies: no goodbye, no lease release. */
  crash(): void {
    this.alive = false;
    this.mesh?.crash();
    for (const loop of this.#loops) void loop.stop();
  }

  /** First step of a clean stop: the member leaves (before any server closes: GOAWAY). */
  async leave(): Promise<void> {
    await Promise.all(this.#loops.map((l) => l.stop()));
    this.mesh?.member.stop();
  }

  async stop(): Promise<void> {
    if (this.alive) await this.mesh?.stop().catch(() => {});
    this.alive = false;
  }

  fresh(): boolean {
    return !!this.notifier?.fresh() && !!this.servicesNotifier?.fresh();
  }
}

async function main(configFile: string): Promise<void> {
  const config: WorkerConfig = JSON.parse(await Deno.readTextFile(configFile));
  const store = openStore(`s3://${config.bucket}`, { region: config.region, retry: AGENT_RETRY });
  const aws = new AwsValueProvider({ region: config.region });
  // Without batching: the provider as before issue 18 (one GetParameter per value).
  const provider: ValueProvider = config.batched ? aws : { fetch: (f, n) => aws.fetch(f, n) };
  const ca = await parseClusterCa(await Deno.readTextFile(config.clusterCaFile));
  const agents = config.agents.map((agent) => new SimAgent({ config, agent, store, provider, ca }));

  const handle = async (c: WorkerCommand): Promise<void> => {
    switch (c.cmd) {
      case "start": {
        await startSpread(agents, config.startSpreadMs);
        return reply(c.id, {});
      }
      case "status": {
        const alive = agents.filter((a) => a.alive);
        const coordinator = alive.find((a) => a.mesh?.coordinator);
        const status: WorkerStatus = {
          alive: alive.length,
          connected: alive.filter((a) => a.mesh?.member.connected()).length,
          fresh: alive.filter((a) => a.fresh()).length,
          wrote: alive.filter((a) => c.expect && a.written.has(c.expect[a.nodeGroup])).length,
          converged: alive.filter((a) => a.converged).length,
          coordinator: coordinator?.nodeId,
          coordinatorTerm: Math.max(0, ...alive.map((a) => a.mesh?.member.snapshot?.term ?? 0)),
          notified: alive.reduce((n, a) => n + (a.notifier?.counts.notified ?? 0), 0),
          fallback: alive.reduce((n, a) => n + (a.notifier?.counts.fallback ?? 0), 0),
          warnings: {},
          disconnected: {},
        };
        for (const a of agents) {
          for (const [w, n] of a.warnings) status.warnings[w] = (status.warnings[w] ?? 0) + n;
        }
        for (const a of alive) {
          if (!a.mesh || a.mesh.member.connected()) continue;
          const why = String(a.mesh.member.state.lastError ?? "no error yet").slice(0, 120);
          status.disconnected[why] = (status.disconnected[why] ?? 0) + 1;
        }
        return reply(c.id, status);
      }
      case "await": {
        const deadline = Date.now() + c.timeoutMs;
        const done = (a: SimAgent) => a.written.has(c.files[a.nodeGroup]);
        while (agents.some((a) => a.alive && !done(a)) && Date.now() < deadline) {
          await new Promise((r) => setTimeout(r, 50));
        }
        const wrote = agents.filter((a) => a.alive && done(a));
        const result: AwaitResult = {
          latenciesMs: wrote.map((a) => a.written.get(c.files[a.nodeGroup])!.at - c.t0),
          missing: agents.filter((a) => a.alive && !done(a)).length,
          direct: wrote.filter((a) => !a.written.get(c.files[a.nodeGroup])!.notified).length,
          announcedMs: agents.flatMap((a) => {
            const first = Math.min(...[...a.announced.values()].filter((t) => t >= c.t0));
            return Number.isFinite(first) ? [first - c.t0] : [];
          }),
        };
        return reply(c.id, result);
      }
      case "crash": {
        const coordinator = agents.find((a) => a.alive && a.mesh?.coordinator);
        coordinator?.crash();
        return reply(c.id, { crashed: coordinator?.nodeId });
      }
      case "leave":
        await Promise.all(agents.map((a) => a.leave()));
        return reply(c.id, {});
      case "stop":
        await Promise.all(agents.map((a) => a.stop()));
        reply(c.id, {});
        Deno.exit(0);
    }
  };

  await serveCommands(handle);
}

if (import.meta.main) await main(Deno.args[0]);

/**
 * One process of simulated agents for the rollout benchmark (tests/bench/rollout_sim.ts). A
 * simulated agent is the agent's real deployments part (`deploymentsPart`: the deployments pass
 * in its loop, the rollout gate on the bucket, the kubelet Pods API watch that hints a pass on
 * every Pod event, the recheck at the end of a Ready streak) with its `--node-id`, at the agent's
 * interval, against a real S3 server; kubelet is simulated (tests/bench/sim_kubelet.ts: the
 * manifest's Pod is Ready a fixed Pod start time after the manifest appears) behind a Pods API
 * stand-in on a unix socket. No mesh (the budget does not use it), no values, no certificates.
 *
 * Protocol (tests/bench/worker_channel.ts): the config file is the first argument; commands are
 * JSON lines on stdin, each answered by one stdout line `@@<json>` with its `id`.
 */

import * as path from "node:path";
import { deploymentsPart } from "../../agent/deployments/part.ts";
import { type AgentHub, Hub } from "../../agent/part.ts";
import { SecretsSync } from "../../agent/secrets/secrets_sync.ts";
import { AwsValueProvider } from "../../agent/secrets/value_provider.ts";
import type { Logger } from "../../core/kit/log.ts";
import { S3Store } from "../../core/store/s3_store.ts";
import { PodsApiServer } from "../support/pods_api_server.ts";
import { VERSITYGW_CREDENTIALS } from "../support/versitygw.ts";
import { type SeenManifest, SimKubelet } from "./sim_kubelet.ts";
import { reply, serveCommands, startSpread } from "./worker_channel.ts";

/** What a worker runs. */
export interface RolloutWorkerConfig {
  /** The S3 endpoint (versitygw, root credentials). */
  endpoint: string;
  bucket: string;
  /** tmpfs directory of the agents' files. */
  dir: string;
  nodeGroup: string;
  /** Node ids of this worker's agents. */
  nodes: string[];
  /** The agents' `--interval`. */
  intervalMs: number;
  /** Manifest seen → Pod Ready in the simulated kubelet. */
  podStartMs: number;
  /** Agents start spread evenly over this window (their passes are not in step). */
  startSpreadMs: number;
}

/** A command from the bench (without its `id`). */
export type RolloutWorkerRequest =
  | { cmd: "start" }
  | { cmd: "await"; image: string; timeoutMs: number }
  | { cmd: "stop" };

/** One agent's move to an image, as its simulated kubelet saw it (wall-clock ms). */
export interface AgentMove {
  node: string;
  /** The first manifest of the image appeared. */
  enterMs?: number;
  /** Only manifests of the image remain (the old Pod's removed). */
  leaveMs?: number;
}

/** The answer to `await`. */
export interface AwaitMoves {
  moves: AgentMove[];
  /** Warnings and errors the agents logged, by message. */
  warnings: Record<string, number>;
  /** Rollout phases the agents logged (`surging`, `waiting`, …), counted. */
  phases: Record<string, number>;
}

/** Wall-clock milliseconds with sub-millisecond resolution (comparable across processes). */
export function nowMs(): number {
  return performance.timeOrigin + performance.now();
}

interface AgentOptions {
  config: RolloutWorkerConfig;
  node: string;
  store: S3Store;
  log: Logger;
}

/** One simulated agent and its kubelet. */
class Agent {
  readonly node: string;
  /** Image → when its first manifest appeared, and when it alone remained. */
  readonly entered = new Map<string, number>();
  readonly alone = new Map<string, number>();
  readonly #part: ReturnType<typeof deploymentsPart>;
  readonly #kubelet: SimKubelet;
  readonly #server: PodsApiServer;

  private constructor(o: AgentOptions, server: PodsApiServer) {
    this.node = o.node;
    this.#server = server;
    const base = path.join(o.config.dir, o.node);
    const manifestDir = path.join(base, "manifests");
    this.#kubelet = new SimKubelet({
      dir: manifestDir,
      server,
      podStartMs: o.config.podStartMs,
      onScan: (seen) => this.observe(seen),
    });
    const hub: AgentHub = new Hub();
    this.#part = deploymentsPart({
      context: { store: o.store, hub, stateDir: path.join(base, "state"), log: o.log },
      nodeGroup: o.config.nodeGroup,
      intervalMs: o.config.intervalMs,
      manifestDir,
      secretsDir: path.join(base, "secrets"),
      tlsDir: path.join(base, "tls"),
      secrets: new SecretsSync({
        cluster: "rollout-bench",
        secretsDir: path.join(base, "secrets"),
        provider: new AwsValueProvider({ region: "us-east-1" }),
        refreshMs: 60_000,
        log: o.log,
      }),
      podsApiSocket: server.socket,
      nodeId: o.node,
    });
  }

  /** An agent whose Pods API stand-in listens on `<dir>/<node>/pods.sock`. */
  static async create(o: AgentOptions): Promise<Agent> {
    const base = path.join(o.config.dir, o.node);
    await Deno.mkdir(base, { recursive: true });
    return new Agent(o, await PodsApiServer.start(path.join(base, "pods.sock")));
  }

  /** Records when each image's first manifest appeared and when it alone remained. */
  observe(seen: SeenManifest[]): void {
    const at = nowMs();
    const images = new Set(seen.map((m) => m.image));
    for (const image of images) if (!this.entered.has(image)) this.entered.set(image, at);
    if (images.size === 1) {
      const [only] = images;
      if (!this.alone.has(only)) this.alone.set(only, at);
    }
  }

  async start(): Promise<void> {
    await this.#kubelet.start();
    await this.#part.start?.();
  }

  async stop(): Promise<void> {
    await this.#part.stop?.();
    this.#kubelet.stop();
    await this.#server.stop();
  }
}

async function main(configFile: string): Promise<void> {
  const config: RolloutWorkerConfig = JSON.parse(await Deno.readTextFile(configFile));
  const store = new S3Store({
    bucket: config.bucket,
    region: "us-east-1",
    endpoint: config.endpoint,
    credentials: () => Promise.resolve(VERSITYGW_CREDENTIALS),
  });
  const warnings = new Map<string, number>();
  const phases = new Map<string, number>();
  const count = (m: Map<string, number>, k: string) => m.set(k, (m.get(k) ?? 0) + 1);
  const log: Logger = {
    debug: () => {},
    info: (msg, fields) => {
      if (msg === "rollout") count(phases, String(fields?.phase));
    },
    warn: (msg, fields) => count(warnings, `${msg}: ${String(fields?.error ?? "").slice(0, 160)}`),
    error: (msg, fields) => count(warnings, `${msg}: ${String(fields?.error ?? "").slice(0, 160)}`),
  };
  const agents: Agent[] = [];
  for (const node of config.nodes) agents.push(await Agent.create({ config, node, store, log }));

  await serveCommands<RolloutWorkerRequest & { id: number }>(async (c) => {
    switch (c.cmd) {
      case "start": {
        await startSpread(agents, config.startSpreadMs);
        return reply(c.id, {});
      }
      case "await": {
        const deadline = Date.now() + c.timeoutMs;
        while (agents.some((a) => !a.alone.has(c.image)) && Date.now() < deadline) {
          await new Promise((r) => setTimeout(r, 50));
        }
        const answer: AwaitMoves = {
          moves: agents.map((a) => ({
            node: a.node,
            enterMs: a.entered.get(c.image),
            leaveMs: a.alone.get(c.image),
          })),
          warnings: Object.fromEntries(warnings),
          phases: Object.fromEntries(phases),
        };
        warnings.clear();
        phases.clear();
        return reply(c.id, answer);
      }
      case "stop":
        await Promise.all(agents.map((a) => a.stop()));
        reply(c.id, {});
        Deno.exit(0);
    }
  });
}

if (import.meta.main) await main(Deno.args[0]);

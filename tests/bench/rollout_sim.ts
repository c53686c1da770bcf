/**
 * The rollout benchmark's simulated cluster (issue 32, "Benchmarks"): N simulated agents
 * (tests/bench/rollout_sim_worker.ts: the agent's real deployments part with its rollout gate,
 * kubelet simulated with a fixed Pod start) on versitygw, one NodeGroup, one Deployment. Each
 * rollout applies a new image with a budget (`maxUnavailable`) and measures apply → every agent on
 * the new spec (its kubelet stand-in sees only the new Pod's manifest), against the lower bound
 * waves × (Pod start + `minReadySeconds`), waves = ⌈N / budget in nodes⌉. It also measures how
 * many agents were in transition at once (first manifest of the new image → the old one removed,
 * as the kubelet stand-ins saw it), which must stay within the budget.
 */

import * as path from "node:path";
import { applyResources } from "../../cli/desired_state.ts";
import { maxUnavailableNodes } from "../../core/model/rollout.ts";
import type { ObjectStore } from "../../core/store/object_store.ts";
import { rolloutDeployment } from "../support/fixtures.ts";
import { median } from "./bench_output.ts";
import { checkConditionalWrites, startVersitygw, type Versitygw } from "../support/versitygw.ts";
import {
  type AgentMove,
  type AwaitMoves,
  nowMs,
  type RolloutWorkerConfig,
  type RolloutWorkerRequest,
} from "./rollout_sim_worker.ts";
import { WorkerChannel } from "./worker_channel.ts";

/** The Deployment's NodeGroup in `rolloutDeployment` (tests/support/fixtures.ts). */
const NODE_GROUP = "workers";
/** The agent's default `--interval`. */
const INTERVAL_MS = 2_000;
/**
 * Overlaps of two agents' transitions shorter than this are not counted against the budget: a
 * handover releases its admission and removes the old manifest in the same pass, and the kubelet
 * stand-in sees the removal a few milliseconds later.
 */
export const OVERLAP_SLACK_MS = 100;

/** What one rollout measured. */
export interface RolloutRun {
  agents: number;
  maxUnavailable: number | string;
  /** The budget in nodes for the whole NodeGroup. */
  budgetNodes: number;
  waves: number;
  /** Apply → every agent on the new spec, s. */
  seconds: number;
  /** waves × (Pod start + minReadySeconds), s. */
  lowerBoundS: number;
  /** Apply → the first agent's new manifest, s. */
  firstStartS: number;
  /** Most agents in transition at once (overlaps shorter than `OVERLAP_SLACK_MS` not counted). */
  maxInTransition: number;
  /** The same with every overlap counted. */
  maxInTransitionRaw: number;
  /** Median of one agent's transition (first new manifest → old one removed), s. */
  transitionMedianS: number;
  /**
   * Median wait of an agent after the first wave: the last transition that ended before its own
   * began → its begin, s (the time a freed admission takes to be taken).
   */
  admissionGapMedianS: number;
  /** Agents not on the new spec at the timeout. */
  missing: number;
  warnings: Record<string, number>;
  phases: Record<string, number>;
}

/** Options of `simulateRollouts`. */
export interface SimOptions {
  agents: number;
  budgets: (number | string)[];
  podStartMs: number;
  minReadySeconds: number;
  /** Worker processes (agents spread round-robin). */
  workers: number;
  /** tmpfs directory for the agents' files. */
  shm: string;
}

/** Most intervals open at once; `slackMs` is taken off each interval's end. */
export function maxOverlap(moves: AgentMove[], slackMs = 0): number {
  const events: [number, number][] = [];
  for (const m of moves) {
    if (m.enterMs === undefined) continue;
    const end = Math.max(m.enterMs, (m.leaveMs ?? Infinity) - slackMs);
    events.push([m.enterMs, 1], [end, -1]);
  }
  // At one instant, leaves before enters.
  events.sort((a, b) => a[0] - b[0] || a[1] - b[1]);
  let open = 0, max = 0;
  for (const [, d] of events) max = Math.max(max, open += d);
  return max;
}

/** Median transition (enter → leave) and median admission gap (latest earlier leave → enter), ms. */
export function transitionTimes(moves: AgentMove[]): { transitionMs: number; gapMs: number } {
  const done = moves.filter((m) => m.enterMs !== undefined && m.leaveMs !== undefined);
  const leaves = done.map((m) => m.leaveMs!).sort((a, b) => a - b);
  const gaps: number[] = [];
  for (const m of done) {
    const before = leaves.filter((l) => l <= m.enterMs!);
    if (before.length) gaps.push(m.enterMs! - before[before.length - 1]);
  }
  return {
    transitionMs: median(done.map((m) => m.leaveMs! - m.enterMs!)),
    gapMs: median(gaps),
  };
}

/** A cluster of simulated agents on one bucket. */
class SimCluster {
  readonly #workers: WorkerChannel<RolloutWorkerRequest>[];
  readonly store: ObjectStore;

  private constructor(workers: WorkerChannel<RolloutWorkerRequest>[], store: ObjectStore) {
    this.#workers = workers;
    this.store = store;
  }

  static async start(
    o: SimOptions & { gateway: Versitygw; prefix: string },
  ): Promise<SimCluster> {
    const bucket = await o.gateway.createBucket();
    const store = o.gateway.store(bucket);
    const workers = [];
    for (let w = 0; w < o.workers; w++) {
      const nodes = [];
      for (let i = w; i < o.agents; i += o.workers) nodes.push(`${o.prefix}-${i}`);
      const config: RolloutWorkerConfig = {
        endpoint: o.gateway.endpoint,
        bucket,
        dir: path.join(o.shm, o.prefix),
        nodeGroup: NODE_GROUP,
        nodes,
        intervalMs: INTERVAL_MS,
        podStartMs: o.podStartMs,
        startSpreadMs: INTERVAL_MS,
      };
      const file = path.join(o.shm, `${o.prefix}-worker-${w}.json`);
      await Deno.writeTextFile(file, JSON.stringify(config));
      workers.push(
        new WorkerChannel<RolloutWorkerRequest>({
          script: path.join(import.meta.dirname!, "rollout_sim_worker.ts"),
          args: [file],
        }),
      );
    }
    const cluster = new SimCluster(workers, store);
    await Promise.all(workers.map((w) => w.send({ cmd: "start" })));
    return cluster;
  }

  /** Every agent's move to `image`, waited for up to `timeoutMs`. */
  async await(image: string, timeoutMs: number): Promise<AwaitMoves> {
    const all = await Promise.all(
      this.#workers.map((w) => w.send<AwaitMoves>({ cmd: "await", image, timeoutMs })),
    );
    const merge = (k: "warnings" | "phases") => {
      const out: Record<string, number> = {};
      for (const a of all) for (const [m, n] of Object.entries(a[k])) out[m] = (out[m] ?? 0) + n;
      return out;
    };
    return {
      moves: all.flatMap((a) => a.moves),
      warnings: merge("warnings"),
      phases: merge("phases"),
    };
  }

  async stop(): Promise<void> {
    await Promise.all(this.#workers.map((w) => w.send({ cmd: "stop" }).catch(() => {})));
    await Promise.all(this.#workers.map((w) => w.child.status));
  }

  kill(): void {
    for (const w of this.#workers) w.kill();
  }
}

const image = (tag: string) => `r/apps/web:${tag}`;

/**
 * Starts `agents` simulated agents on v1, then rolls out one new image per budget, in turn, and
 * measures each rollout.
 */
export async function simulateRollouts(o: SimOptions): Promise<RolloutRun[]> {
  const gateway = await startVersitygw();
  let cluster: SimCluster | undefined;
  try {
    // What the rollout gate relies on, checked on this gateway first.
    await checkConditionalWrites(gateway.store(await gateway.createBucket()));
    const rollout = (maxUnavailable: number | string) => ({
      maxUnavailable,
      minReadySeconds: o.minReadySeconds,
      progressDeadlineSeconds: 600,
    });
    cluster = await SimCluster.start({ ...o, gateway, prefix: `n${o.agents}` });
    await applyResources({
      store: cluster.store,
      resources: [rolloutDeployment("v1", rollout(1))],
    });
    const first = await cluster.await(image("v1"), 60_000);
    const notStarted = first.moves.filter((m) => m.leaveMs === undefined).length;
    if (notStarted) throw new Error(`${notStarted} of ${o.agents} agents never wrote v1`);
    const runs: RolloutRun[] = [];
    let version = 2;
    for (const budget of o.budgets) {
      const tag = `v${version++}`;
      const budgetNodes = maxUnavailableNodes(budget, o.agents);
      const waves = Math.ceil(o.agents / budgetNodes);
      const waveMs = o.podStartMs + o.minReadySeconds * 1000;
      const t0 = nowMs();
      await applyResources({
        store: cluster.store,
        resources: [rolloutDeployment(tag, rollout(budget))],
      });
      // Generous: every wave may wait out a whole rollout-object poll and an interval.
      const got = await cluster.await(image(tag), 60_000 + waves * (waveMs + 15_000));
      const leaves = got.moves.map((m) => m.leaveMs ?? Infinity);
      const enters = got.moves.map((m) => m.enterMs ?? Infinity);
      const times = transitionTimes(got.moves);
      runs.push({
        agents: o.agents,
        maxUnavailable: budget,
        budgetNodes,
        waves,
        seconds: (Math.max(...leaves) - t0) / 1000,
        lowerBoundS: (waves * waveMs) / 1000,
        firstStartS: (Math.min(...enters) - t0) / 1000,
        maxInTransition: maxOverlap(got.moves, OVERLAP_SLACK_MS),
        maxInTransitionRaw: maxOverlap(got.moves),
        transitionMedianS: times.transitionMs / 1000,
        admissionGapMedianS: times.gapMs / 1000,
        missing: got.moves.filter((m) => m.leaveMs === undefined).length,
        warnings: got.warnings,
        phases: got.phases,
      });
    }
    await cluster.stop();
    cluster = undefined;
    return runs;
  } finally {
    cluster?.kill();
    await gateway.stop();
  }
}

/**
 * The dataplane inside `podmin-agent run` (spec §7.6): its input is the cluster's Services joined
 * with the endpoint mesh's snapshot (`cluster_service_snapshot.ts`); it runs through
 * `DataplaneLoop` (refresh hints coalesced, a periodic convergence scan). It loads while that input
 * has Services and detaches when it has none. Nothing is applied before the first mesh snapshot
 * arrives (endpoints unknown is not "no endpoints"); while the mesh or the bucket is unreachable
 * the last input stays applied. Each pass writes `<state-dir>/dataplane.json`, which
 * `podmin-agent dataplane status` prints.
 */

import * as path from "node:path";
import type { ClusterSnapshot } from "../../core/model/endpoint_snapshot.ts";
import type { Logger } from "../../core/kit/log.ts";
import type { ServicesView } from "../services/services_view.ts";
import { readJsonStatus, writeJsonStatus } from "../status_file.ts";
import { clusterServiceSnapshot, type SnapshotOrigin } from "./cluster_service_snapshot.ts";
import { parseServiceSnapshot, type ServiceSnapshot } from "./service_snapshot.ts";
import { DataplaneLoop, type DataplaneTarget, type LoopPass } from "./dataplane_loop.ts";

/** The file `podmin-agent dataplane status` reads. */
export const DATAPLANE_STATUS_FILE = "dataplane.json";

/** What the agent writes after each dataplane pass. */
export interface DataplaneRunStatus {
  /** The inputs of the last applied snapshot; absent until one was applied. */
  applied?: SnapshotOrigin & {
    services: number;
    backends: number;
    loaded: boolean;
    at: string;
  };
  /** Waiting for the first mesh snapshot. */
  waiting?: string;
  /** Endpoints left out of the snapshot (with the reason). */
  leftOut: string[];
  /** The last pass's error (the last applied state stays). */
  error?: string;
  updatedAt: string;
}

/** Options of `NodeDataplane`. */
export interface NodeDataplaneOptions {
  /** The dataplane (a `Dataplane`; a recording target in tests). */
  dataplane: DataplaneTarget;
  services: Pick<ServicesView, "services" | "serviceCIDR" | "generation">;
  /** The mesh's newest cluster snapshot (undefined until the first one). */
  meshSnapshot: () => ClusterSnapshot | undefined;
  stateDir: string;
  log: Logger;
  /** Full convergence scan interval (default 30 s). */
  scanIntervalMs?: number;
  /** Coalescing delay of hints (default 200 ms). */
  hintDelayMs?: number;
}

/** Drives the node's dataplane from the Services and the mesh snapshot. */
export class NodeDataplane {
  readonly #o: NodeDataplaneOptions;
  readonly #loop: DataplaneLoop;
  #origin?: SnapshotOrigin;
  #leftOut: string[] = [];
  #pending = { services: 0, backends: 0 };
  #applied?: DataplaneRunStatus["applied"];
  #writing = Promise.resolve();

  constructor(options: NodeDataplaneOptions) {
    this.#o = options;
    this.#loop = new DataplaneLoop({
      dataplane: options.dataplane,
      snapshot: () => this.#input(),
      scanIntervalMs: options.scanIntervalMs,
      hintDelayMs: options.hintDelayMs,
      log: options.log,
      onPass: (pass) => this.#written(pass),
    });
  }

  /** Starts passes: now, on every hint and every scan interval. */
  start(): void {
    this.#loop.start();
  }

  /** Something changed (a mesh snapshot, the Services, a kubelet Pod event): a coalesced pass. */
  hint(): void {
    this.#loop.hint();
  }

  /**
   * Stops the passes. The dataplane stays attached and serving (spec §7.8): Services keep
   * working while the agent restarts, and the next agent adopts its conntrack. `podmin-agent
   * dataplane detach` removes it for good.
   */
  async stop(): Promise<void> {
    await this.#loop.stop();
    await this.#writing;
  }

  /** Waits until no pass is running or pending and its status is written (tests). */
  async idle(): Promise<void> {
    await this.#loop.idle();
    await this.#writing;
  }

  #input(): ServiceSnapshot | undefined {
    const mesh = this.#o.meshSnapshot();
    if (!mesh) {
      this.#origin = undefined;
      return undefined;
    }
    const built = clusterServiceSnapshot({
      services: this.#o.services.services(),
      serviceCIDR: this.#o.services.serviceCIDR,
      mesh,
      servicesGeneration: this.#o.services.generation,
    });
    if (built.skipped.join() !== this.#leftOut.join() && built.skipped.length) {
      this.#o.log.warn("endpoints left out of the dataplane", { skipped: built.skipped });
    }
    this.#leftOut = built.skipped;
    this.#origin = {
      term: mesh.term,
      version: mesh.version,
      servicesGeneration: this.#o.services.generation,
    };
    this.#pending = {
      services: built.snapshot.services.length,
      backends: built.snapshot.services.reduce((n, s) => n + s.backends.length, 0),
    };
    // Joined from the bucket and the mesh's peers: validated here, once (a `ValidationError`
    // fails the pass; the last applied state stays).
    return parseServiceSnapshot(built.snapshot);
  }

  #written({ result, error, skipped }: LoopPass): void {
    if (result && this.#origin) {
      this.#applied = {
        ...this.#origin,
        ...this.#pending,
        loaded: result.loaded,
        at: new Date().toISOString(),
      };
    }
    const status: DataplaneRunStatus = {
      ...(this.#applied ? { applied: this.#applied } : {}),
      ...(skipped ? { waiting: "no endpoint mesh snapshot yet" } : {}),
      leftOut: this.#leftOut,
      ...(error ? { error } : {}),
      updatedAt: new Date().toISOString(),
    };
    const file = path.join(this.#o.stateDir, DATAPLANE_STATUS_FILE);
    this.#writing = this.#writing.then(() => writeJsonStatus(file, status)).catch((err) =>
      this.#o.log.warn("cannot write the dataplane status", { error: (err as Error).message })
    );
  }
}

/** Reads the status the running agent wrote; undefined when there is none. */
export function readDataplaneRunStatus(stateDir: string): Promise<DataplaneRunStatus | undefined> {
  return readJsonStatus<DataplaneRunStatus>(path.join(stateDir, DATAPLANE_STATUS_FILE));
}

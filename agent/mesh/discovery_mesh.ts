/**
 * Discovery feeding the endpoint mesh inside `podmin-agent run --mesh-listen` (spec §7.9): kubelet's
 * Pods API (watched) and the cluster's Services (polled) give this node's ready endpoints, which
 * the member reports; the newest cluster snapshot is written to `<state-dir>/mesh.json`.
 */

import * as path from "node:path";
import {
  type ClusterSnapshot,
  type EndpointSet,
  parseClusterSnapshot,
} from "../../core/model/endpoint_snapshot.ts";
import type { Logger } from "../../core/kit/log.ts";
import type { ObjectStore } from "../../core/store/object_store.ts";
import { localEndpoints } from "../discovery/local_endpoints.ts";
import { PODS_API_SOCKET, PodsWatch } from "../discovery/pods_api.ts";
import type { PodInfo } from "../discovery/pod_proto.ts";
import { podsApiProblem } from "../discovery/pods_api_problem.ts";
import type { ServicesView } from "../services/services_view.ts";
import { MeshNode } from "./mesh_node.ts";
import type { Announcers } from "./coordinator.ts";
import type { ClusterCa } from "./node_tls.ts";
import type { NodeCertificateStatus } from "./node_identity.ts";
import { readJsonStatus, writeJsonStatus } from "../status_file.ts";
import { Loop } from "../loop.ts";

/** Options of `DiscoveryMesh`. */
export interface DiscoveryMeshOptions {
  store: ObjectStore;
  cluster: string;
  nodeGroup: string;
  nodeId: string;
  /** Loads the cluster CA (certificate and key) into memory. */
  loadCa(): Promise<ClusterCa>;
  listen: string;
  advertiseHost: string;
  podsApiSocket?: string;
  /** The node's kubelet version, when known: a kubelet without the Pods API is named at once. */
  kubeletVersion?: string;
  services: ServicesView;
  /** How often the Services are re-read (conditional GET) and the local report updated. */
  servicesIntervalMs: number;
  /**
   * Re-read the Services on that interval (default true); false where one Services loop refreshes
   * them for every reader (`podmin-agent run`): the report then follows their changes.
   */
  refreshServices?: boolean;
  /** The coordinator's polls of announced objects (change notification). */
  announce?: Announcers;
  pollMs?: number;
  /** Lifetime of the node certificate, renewed at half of it (`--node-cert-lifetime`, default 24 h). */
  nodeCertLifetimeMs?: number;
  /** Coordinator lease duration (default 15 s; tests shorten it). */
  leaseMs?: number;
  /** Every newer snapshot (after mesh.json is updated). */
  onSnapshot?: (snapshot: ClusterSnapshot) => void;
  /**
   * When this node's Ready Pods or endpoints changed, or the Pods API problem did (the node record
   * follows).
   */
  onLocalChange?: () => void;
  /** Every kubelet Pods API event (a refresh hint for the dataplane: new Pod veths). */
  onPodsEvent?: () => void;
  /**
   * Pods left out of this node's endpoints although Ready: the old Pod of a rollout's handover
   * (the deployments part's `isWithdrawn`); call `refresh()` when the answer changes.
   */
  withdrawn?: (pod: PodInfo) => boolean;
  stateDir: string;
  log: Logger;
}

/** What `<state-dir>/mesh.json` holds. */
export interface MeshStatus {
  nodeId: string;
  coordinator: boolean;
  connectedTo?: string;
  lastError?: string;
  /** The mesh node certificate: when it expires, when renewal is due, renewal failures. */
  nodeCertificate?: NodeCertificateStatus;
  /** `problem`: why this node reports no endpoints (`podsApiProblem`), one line. */
  podsApi: { synced: boolean; pods: number; error?: string; problem?: string };
  local: EndpointSet;
  snapshot?: { term: number; version: number; nodes: number; endpoints: EndpointSet };
  updatedAt: string;
}

/** Discovery and the mesh of one agent. */
export class DiscoveryMesh {
  readonly #o: DiscoveryMeshOptions;
  #mesh?: MeshNode;
  #watch?: PodsWatch;
  #servicesLoop?: Loop;
  #local: EndpointSet = {};
  #ready = new Set<string>();
  #snapshot?: ClusterSnapshot;
  #writing = Promise.resolve();

  constructor(options: DiscoveryMeshOptions) {
    this.#o = options;
  }

  /** Loads the cluster CA, starts the mesh, the Pods API watch and the Services refresh. */
  async start(): Promise<void> {
    const ca = await this.#o.loadCa();
    const previous = await this.#previousSnapshot();
    this.#mesh = new MeshNode({
      previous,
      store: this.#o.store,
      cluster: this.#o.cluster,
      nodeGroup: this.#o.nodeGroup,
      nodeId: this.#o.nodeId,
      ca,
      listen: this.#o.listen,
      advertiseHost: this.#o.advertiseHost,
      onSnapshot: (s) => {
        this.#snapshot = s;
        this.#o.log.info("mesh snapshot", { term: s.term, version: s.version, nodes: s.nodes });
        this.#writeStatus();
        this.#o.onSnapshot?.(s);
      },
      announce: this.#o.announce,
      pollMs: this.#o.pollMs,
      leaseMs: this.#o.leaseMs,
      nodeCertLifetimeMs: this.#o.nodeCertLifetimeMs,
      onNodeCertificate: () => this.#writeStatus(),
      log: this.#o.log,
    });
    await this.#mesh.start();
    this.#watch = new PodsWatch({
      socket: this.#o.podsApiSocket,
      onChange: () => {
        this.#update();
        this.#o.onPodsEvent?.();
      },
      onError: () => {
        this.#writeStatus();
        this.#o.onLocalChange?.();
      },
      log: this.#o.log,
    });
    this.#watch.start();
    const refresh = async () => {
      if (this.#o.refreshServices !== false) {
        const error = await this.#o.services.refresh(Date.now());
        if (error) this.#o.log.warn("services not refreshed", { error });
      }
      this.#update();
    };
    // A refresh by anyone (an announcement of a new services index) updates the report at once.
    this.#o.services.onChange(() => this.#update());
    this.#servicesLoop = new Loop({
      name: "mesh-services",
      intervalMs: this.#o.servicesIntervalMs,
      log: this.#o.log,
      pass: async () => {
        await refresh();
        return {};
      },
    });
    this.#servicesLoop.start();
    await this.#servicesLoop.idle(); // the first pass: the report holds the Services
  }

  /** The newest cluster snapshot received (undefined until the first). */
  get snapshot(): ClusterSnapshot | undefined {
    return this.#snapshot;
  }

  /** True while this agent is the mesh coordinator. */
  coordinator(): boolean {
    return !!this.#mesh?.coordinator;
  }

  /** True while this node's member stream to the coordinator is up. */
  connected(): boolean {
    return this.#mesh?.member.connected() ?? false;
  }

  /** The mesh node certificate's status (undefined until the mesh started). */
  nodeCertificate(): NodeCertificateStatus | undefined {
    return this.#mesh?.nodeCertificate();
  }

  /** Streams this node's member opened to a coordinator (reconnects count). */
  streamsOpened(): number {
    return this.#mesh?.member.streamsOpened ?? 0;
  }

  /** Whether a lost coordinator's successor is due (`MeshNode.electing`; false before it runs). */
  electing(): boolean {
    return this.#mesh?.electing() ?? false;
  }

  /** Whether this agent steps the leases now (`MeshNode.contends`; true before the mesh runs). */
  contends(): boolean {
    return this.#mesh?.contends() ?? true;
  }

  async stop(): Promise<void> {
    await this.#servicesLoop?.stop();
    this.#watch?.stop();
    await this.#mesh?.stop();
    await this.#writing;
  }

  /** Why this node reports no endpoints (one line), or undefined (`podsApiProblem`). */
  problem(): string | undefined {
    const view = this.#watch?.view();
    return podsApiProblem({
      kubeletVersion: this.#o.kubeletVersion,
      synced: !!view?.synced,
      error: view?.error,
      socket: this.#o.podsApiSocket ?? PODS_API_SOCKET,
    });
  }

  /** Reports this node's endpoints again (the withdrawn Pods changed). */
  refresh(): void {
    this.#update();
  }

  /** Reports this node's endpoints once kubelet's view is complete. */
  #update(): void {
    const view = this.#watch?.view();
    if (!view?.synced || !this.#mesh) {
      this.#writeStatus();
      return;
    }
    const withdrawn = this.#o.withdrawn;
    const pods = withdrawn ? view.pods.filter((p) => !withdrawn(p)) : view.pods;
    const local = localEndpoints(pods, this.#o.services.services());
    const ready = new Set(
      view.pods.filter((p) => p.ready).map((p) =>
        `${p.labels["podmin.dev/namespace"]}/${p.labels["podmin.dev/deployment"]}`
      ),
    );
    const changed = JSON.stringify(local) !== JSON.stringify(this.#local) ||
      [...ready].sort().join() !== [...this.#ready].sort().join();
    this.#local = local;
    this.#ready = ready;
    this.#mesh.member.setEndpoints(this.#local);
    this.#writeStatus();
    if (changed) this.#o.onLocalChange?.();
  }

  /**
   * What the node record carries from discovery: this node's endpoints and which of its
   * Deployments kubelet reports Ready (`namespace/name`); undefined until kubelet's view is whole.
   */
  recordExtras(): { endpoints: EndpointSet; ready: Set<string> } | undefined {
    if (!this.#watch?.view().synced) return undefined;
    return { endpoints: this.#local, ready: this.#ready };
  }

  /**
   * The snapshot an earlier run of this agent left in `<state-dir>/mesh.json` (validated as any
   * snapshot; undefined when there is none or it does not parse): a restarted agent contends in
   * its round of that term instead of at once (`MeshNodeOptions.previous`).
   */
  async #previousSnapshot(): Promise<ClusterSnapshot | undefined> {
    try {
      const status = await readJsonStatus<{ snapshot?: unknown }>(
        path.join(this.#o.stateDir, "mesh.json"),
      );
      return status?.snapshot === undefined ? undefined : parseClusterSnapshot(status.snapshot);
    } catch (err) {
      this.#o.log.warn("mesh.json of an earlier run not used", { error: (err as Error).message });
      return undefined;
    }
  }

  #writeStatus(): void {
    const view = this.#watch?.view();
    const status: MeshStatus = {
      nodeId: this.#o.nodeId,
      coordinator: !!this.#mesh?.coordinator,
      ...this.#mesh?.member.state,
      nodeCertificate: this.#mesh?.nodeCertificate(),
      podsApi: {
        synced: !!view?.synced,
        pods: view?.pods.length ?? 0,
        error: view?.error,
        problem: this.problem(),
      },
      local: this.#local,
      // Without the index change it may carry (up to 64 KiB of specs, spent once applied).
      snapshot: this.#snapshot && withoutChange(this.#snapshot),
      updatedAt: new Date().toISOString(),
    };
    const file = path.join(this.#o.stateDir, "mesh.json");
    this.#writing = this.#writing.then(() => writeJsonStatus(file, status)).catch((err) =>
      this.#o.log.warn("cannot write mesh status", { error: err.message })
    );
  }
}

/** A snapshot without its index change. */
function withoutChange(snapshot: ClusterSnapshot): ClusterSnapshot {
  const { indexChange: _, ...rest } = snapshot;
  return rest;
}

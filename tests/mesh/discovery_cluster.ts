/**
 * A cluster of agents in one process for the scale test and the mesh benchmark: each agent is the
 * product's `DiscoveryMesh` (agent/mesh/discovery_mesh.ts) with its own simulated kubelet Pods API
 * socket (tests/support/pods_api_server.ts) and its own `ServicesView`, all on one bucket, wired as
 * `podmin-agent run` wires them: the coordinator announces the objects of `clusterAnnouncers` and
 * each agent's `ServicesView` reads the services index only when an announcement says it changed
 * (an `IndexNotifier` gate), at once. Every snapshot an agent receives is recorded with its arrival
 * time, and waits are woken by snapshots (no sleeps).
 */

import * as path from "node:path";
import { DiscoveryMesh } from "../../agent/mesh/discovery_mesh.ts";
import { type ClusterCa, parseClusterCa } from "../../agent/mesh/node_tls.ts";
import { ServicesView } from "../../agent/services/services_view.ts";
import { IndexNotifier } from "../../agent/index_notifier.ts";
import { clusterAnnouncers } from "../../agent/mesh/index_poller.ts";
import { applyResources } from "../../cli/desired_state.ts";
import { newCaPem } from "../../cli/setup/cluster_cas.ts";
import type { ClusterSnapshot } from "../../core/model/endpoint_snapshot.ts";
import { silentLogger } from "../../core/kit/log.ts";
import type { ObjectStore } from "../../core/store/object_store.ts";
import { parseResource } from "../../core/model/resources.ts";
import { PodsApiServer, type SimPod } from "../support/pods_api_server.ts";

/** The namespace of every Service and Pod here. */
export const NAMESPACE = "shop";

/** A new cluster CA (certificate and key in memory), as `podmin setup` makes one. */
export async function testClusterCa(): Promise<{ ca: ClusterCa; pem: string }> {
  const { certPem, keyPem } = await newCaPem("podmin cluster CA test");
  const pem = `${certPem}\n${keyPem}`;
  return { ca: await parseClusterCa(pem), pem };
}

/** Applies Services selecting `app=<name>` with the product's `podmin apply` code. */
export async function applyServices(store: ObjectStore, names: string[]): Promise<void> {
  await applyResources({
    store,
    resources: names.map((name) =>
      parseResource({
        apiVersion: "podmin.dev/v1",
        kind: "Service",
        metadata: { name, namespace: NAMESPACE },
        spec: { selector: { app: name }, ports: [{ name: "http", port: 80, targetPort: 8080 }] },
      })
    ),
  });
}

/** A Pod of the Service `app` (label `app=<app>`) on node `node`, number `n`, Ready or not. */
export function servicePod(o: { app: string; node: number; n: number; ready: boolean }): SimPod {
  return {
    namespace: NAMESPACE,
    name: `${o.app}-${o.n}-node-${o.node}`,
    uid: `${o.app}-${o.n}-${o.node}`,
    labels: { app: o.app },
    phase: o.ready ? "Running" : "Pending",
    ready: o.ready,
    ips: o.ready ? [podAddress(o.node, o.n)] : [],
  };
}

/** The canonical IPv6 address of Pod `n` on node `node` (node prefix fd00:706d:<node>::/64). */
export function podAddress(node: number, n: number): string {
  return `fd00:706d:${(node + 1).toString(16)}::${(n + 1).toString(16)}`;
}

/** The canonical node id of agent `i`. */
export function nodeId(i: number): string {
  return `node-${String(i).padStart(2, "0")}`;
}

/** One agent of the cluster. */
export interface ClusterAgent {
  index: number;
  id: string;
  pods: PodsApiServer;
  mesh: DiscoveryMesh;
  /** The newest snapshot and when it arrived (performance.now()). */
  snapshot?: ClusterSnapshot;
  arrivedAt?: number;
  /** Snapshots received (each newer than the last). */
  received: number;
  /** The agent's Services (the DNS zone's and the dataplane's input). */
  services: ServicesView;
  /** When a snapshot announcing a new services index arrived (performance.now()). */
  servicesAnnouncedAt?: number;
}

/** Options of `DiscoveryCluster.start`. */
export interface DiscoveryClusterOptions {
  store: ObjectStore;
  ca: ClusterCa;
  /** Agent indices to run here (node ids and addresses follow them). */
  indices: number[];
  /** Directory for sockets and state. */
  dir: string;
  /** `ServicesView` re-read interval (the agent's `--interval`). */
  servicesIntervalMs: number;
  /** Pods each Pods API holds before its agent starts. */
  initialPods?: (index: number) => SimPod[];
  /** Lifetime of each agent's node certificate (default the agent's: 24 h). */
  nodeCertLifetimeMs?: number;
  /** Coordinator lease duration (default the agent's: 15 s). */
  leaseMs?: number;
}

/** Agents in this process, on one bucket. */
export class DiscoveryCluster {
  readonly agents: ClusterAgent[] = [];
  #waiters: { f: () => boolean; resolve(): void }[] = [];

  /** Starts the Pods APIs, then every agent (all at once). */
  static async start(o: DiscoveryClusterOptions): Promise<DiscoveryCluster> {
    const c = new DiscoveryCluster(o);
    const added: ClusterAgent[] = [];
    for (const index of o.indices) added.push(await c.#add(index));
    await Promise.all(added.map((a) => a.mesh.start()));
    return c;
  }

  readonly #o: DiscoveryClusterOptions;

  private constructor(o: DiscoveryClusterOptions) {
    this.#o = o;
  }

  /** Starts one more agent (index not yet used) on the same bucket: a node that joins later. */
  async join(index: number): Promise<ClusterAgent> {
    const agent = await this.#add(index);
    await agent.mesh.start();
    return agent;
  }

  async #add(index: number): Promise<ClusterAgent> {
    const o = this.#o;
    const pods = await PodsApiServer.start(path.join(o.dir, `pods-${index}.sock`));
    for (const p of o.initialPods?.(index) ?? []) pods.set(p);
    const id = nodeId(index);
    // deno-lint-ignore prefer-const
    let agent: ClusterAgent;
    // deno-lint-ignore prefer-const
    let mesh: DiscoveryMesh;
    const notifier = new IndexNotifier({ object: "services", connected: () => mesh.connected() });
    const services = new ServicesView({
      store: o.store,
      intervalMs: o.servicesIntervalMs,
      gate: (held) => notifier.shouldRead(held),
    });
    mesh = new DiscoveryMesh({
      store: o.store,
      cluster: "test",
      nodeGroup: "workers",
      nodeId: id,
      loadCa: () => Promise.resolve(o.ca),
      listen: "127.0.0.1:0",
      advertiseHost: "127.0.0.1",
      podsApiSocket: pods.socket,
      services,
      servicesIntervalMs: o.servicesIntervalMs,
      announce: clusterAnnouncers(o.store, { intervalMs: o.servicesIntervalMs }),
      pollMs: o.servicesIntervalMs,
      nodeCertLifetimeMs: o.nodeCertLifetimeMs,
      leaseMs: o.leaseMs,
      onSnapshot: (s) => {
        if (notifier.onSnapshot(s, services.etag)) {
          agent.servicesAnnouncedAt = performance.now();
          void services.refresh(Date.now());
        }
        agent.snapshot = s;
        agent.arrivedAt = performance.now();
        agent.received++;
        this.#wake();
      },
      stateDir: path.join(o.dir, id),
      log: silentLogger,
    });
    agent = { index, id, pods, mesh, received: 0, services };
    this.agents.push(agent);
    return agent;
  }

  /** Resolves once `f()` holds (checked on every snapshot and by `wake()`), or rejects after `timeoutMs`. */
  until(what: string, f: () => boolean, timeoutMs = 60_000): Promise<void> {
    if (f()) return Promise.resolve();
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.#waiters = this.#waiters.filter((w) => w !== waiter);
        reject(new Error(`timed out after ${timeoutMs} ms waiting for ${what}`));
      }, timeoutMs);
      const waiter = {
        f,
        resolve: () => {
          clearTimeout(timer);
          resolve();
        },
      };
      this.#waiters.push(waiter);
    });
  }

  /** Re-checks the waits (for conditions on things other than this cluster's snapshots). */
  wake(): void {
    this.#wake();
  }

  #wake(): void {
    this.#waiters = this.#waiters.filter((w) => (w.f() ? (w.resolve(), false) : true));
  }

  /**
   * Stops every agent: all members leave before any server closes (each `stop()` ends its member
   * synchronously), so no client session sees a GOAWAY (denoland/deno#36788); then the Pods APIs.
   */
  async stop(): Promise<void> {
    await Promise.all(this.agents.map((a) => a.mesh.stop().catch(() => {})));
    await Promise.all(this.agents.map((a) => a.pods.stop()));
  }
}

/**
 * The endpoint mesh's part of `podmin-agent run --mesh-listen` (spec §7.9): the `DiscoveryMesh`
 * (kubelet's Pods API, the Services, the member and the coordinator), its events on the hub, and
 * the `MeshLink` other parts read it through (announcement notifiers, connection, lease contention).
 */

import { UsageError } from "../../core/kit/errors.ts";
import type { PodInfo } from "../discovery/pod_proto.ts";
import type { AnnouncedObject, ClusterSnapshot } from "../../core/model/endpoint_snapshot.ts";
import { clusterCaName } from "../../core/model/provider_names.ts";
import { type CaKeyFlag, parseCaKeyFlag } from "../identity/ca_key.ts";
import type { FlagSpecs, FlagValues, Part, PartContext } from "../part.ts";
import type { ServicesSource } from "../services/part.ts";
import type { AwsValueProvider } from "../secrets/value_provider.ts";
import { DiscoveryMesh } from "./discovery_mesh.ts";
import { IndexNotifier } from "../index_notifier.ts";
import { clusterAnnouncers } from "./index_poller.ts";
import { NODE_CERT_LIFETIME, parseNodeCertLifetime } from "./node_identity.ts";
import { type ClusterCa, parseClusterCa } from "./node_tls.ts";

/** The mesh part's flags. */
export const MESH_FLAGS = {
  "mesh-listen": {
    type: "string",
    arg: "ADDR",
    help: "join the endpoint mesh: serve it on ADDR (e.g. [::]:7443), watch\n" +
      "kubelet's Pods API, report this node's ready endpoints and keep\n" +
      "the cluster snapshot in <state-dir>/mesh.json; off by default",
  },
  "mesh-advertise": {
    type: "string",
    arg: "HOST",
    help: "the address peers reach this node at (default --node-address)",
  },
  "cluster-ca": {
    type: "string",
    default: "ssm",
    arg: "SOURCE",
    help: 'the cluster CA of mesh certificates: "{default}" (default,\n' +
      '/<cluster>/_system/cluster-ca) or "file:PATH" (PEM on tmpfs)',
  },
  "node-cert-lifetime": {
    type: "string",
    default: NODE_CERT_LIFETIME.default,
    arg: "DUR",
    help: "lifetime of the mesh node certificate (default\n" +
      "{default}, 2s..720h); renewed at half of it while\n" +
      "the agent runs, retried with backoff when renewal fails",
  },
} as const satisfies FlagSpecs;

/** The mesh part's flags, checked; it advertises `--mesh-advertise`, else the node's address. */
export function meshFlags(v: FlagValues<typeof MESH_FLAGS>, nodeAddress?: string): {
  listen?: string;
  advertiseHost: string;
  clusterCa: CaKeyFlag;
  nodeCertLifetimeMs: number;
} {
  return {
    listen: v["mesh-listen"],
    advertiseHost: v["mesh-advertise"] ?? nodeAddress ?? "127.0.0.1",
    clusterCa: parseCaKeyFlag(v["cluster-ca"], "--cluster-ca"),
    nodeCertLifetimeMs: parseNodeCertLifetime(v["node-cert-lifetime"]),
  };
}

/** The cluster CA of `--cluster-ca` (certificate and key), in memory. */
export async function loadClusterCa(options: {
  flag: CaKeyFlag;
  provider: AwsValueProvider;
  cluster: string;
}): Promise<ClusterCa> {
  const { flag } = options;
  if (flag.kind === "off") throw new UsageError("--cluster-ca off: the mesh needs the cluster CA");
  const pem = flag.kind === "file"
    ? await Deno.readTextFile(flag.path)
    : new TextDecoder().decode(await options.provider.fetch("ssm", clusterCaName(options.cluster)));
  return await parseClusterCa(pem);
}

/**
 * How other parts reach the mesh: before it runs (or without it) not connected, contending and
 * without a snapshot, like `DiscoveryMesh` before its start.
 */
export class MeshLink {
  readonly #announced: boolean;
  readonly #joins: boolean;
  #mesh?: DiscoveryMesh;

  /** `listen`: `--mesh-listen`; `once`: `--once` (the mesh does not run, nothing is announced). */
  constructor(options: { listen?: string; once: boolean }) {
    this.#joins = options.listen !== undefined;
    this.#announced = this.#joins && !options.once;
  }

  /**
   * With the mesh, whether this agent contends for leases now (only its coordinator and a few
   * disconnected agents do: `ContentionGate`); undefined without it (every agent contends).
   */
  contender(): (() => boolean) | undefined {
    return this.#joins ? () => this.contends() : undefined;
  }

  /** The notifier of `object`'s announcements, when reads follow them (spec §7.9). */
  notifier(object: AnnouncedObject): IndexNotifier | undefined {
    return this.#announced
      ? new IndexNotifier({
        object,
        connected: () => this.connected(),
        hold: () => this.#mesh?.electing() ?? false,
      })
      : undefined;
  }

  /** Links the mesh once it is built. */
  attach(mesh: DiscoveryMesh): void {
    this.#mesh = mesh;
  }

  /** True while this node's member stream to the coordinator is up. */
  connected(): boolean {
    return this.#mesh?.connected() ?? false;
  }

  /** Whether this agent steps the leases now (true without the mesh). */
  contends(): boolean {
    return this.#mesh?.contends() ?? true;
  }

  /** The newest cluster snapshot (undefined until the first). */
  snapshot(): ClusterSnapshot | undefined {
    return this.#mesh?.snapshot;
  }
}

/** Options of `meshPart`. */
export interface MeshPartOptions {
  context: PartContext;
  link: MeshLink;
  cluster: string;
  nodeGroup: string;
  nodeId: string;
  /** `--mesh-listen`; no part without it. */
  listen?: string;
  /** `--mesh-advertise`, else `--node-address`, else loopback. */
  advertiseHost: string;
  clusterCa: CaKeyFlag;
  provider: AwsValueProvider;
  nodeCertLifetimeMs: number;
  podsApiSocket: string;
  kubeletVersion?: string;
  services: ServicesSource;
  /** `--interval`: the Services refresh and the coordinator's polls. */
  intervalMs: number;
  /** The CA state's announcement poll, when the agent keeps a workload CA. */
  caStateMs?: number;
  /** Ready Pods a rollout's handover withdrew from the endpoints (event `podsWithdrawn`). */
  withdrawn?: (pod: PodInfo) => boolean;
}

/** The mesh's part, or undefined without `--mesh-listen`. */
export function meshPart(o: MeshPartOptions): (Part & { mesh: DiscoveryMesh }) | undefined {
  if (!o.listen) return undefined;
  const { store, hub, stateDir, log } = o.context;
  const services = o.services.reader();
  const mesh = new DiscoveryMesh({
    store,
    cluster: o.cluster,
    nodeGroup: o.nodeGroup,
    nodeId: o.nodeId,
    loadCa: () => loadClusterCa({ flag: o.clusterCa, provider: o.provider, cluster: o.cluster }),
    listen: o.listen,
    nodeCertLifetimeMs: o.nodeCertLifetimeMs,
    advertiseHost: o.advertiseHost,
    podsApiSocket: o.podsApiSocket,
    kubeletVersion: o.kubeletVersion,
    services,
    servicesIntervalMs: o.intervalMs,
    refreshServices: false, // the Services loop refreshes them
    announce: clusterAnnouncers(store, { intervalMs: o.intervalMs, caStateMs: o.caStateMs }),
    pollMs: o.intervalMs,
    onLocalChange: () => hub.emit("localEndpointsChanged"),
    onPodsEvent: () => hub.emit("podsEvent"),
    onSnapshot: (snapshot) => hub.emit("meshSnapshot", snapshot),
    withdrawn: o.withdrawn,
    stateDir,
    log,
  });
  o.link.attach(mesh);
  hub.on("podsWithdrawn", () => mesh.refresh());
  return {
    name: "mesh",
    statusFile: "mesh.json",
    mesh,
    async start() {
      // The mesh is optional: a node whose mesh cannot start still runs its Pods.
      await mesh.start().catch((err) =>
        log.error("mesh not started", { error: (err as Error).message })
      );
    },
    stop: () => mesh.stop(),
  };
}

/**
 * The dataplane's input inside `podmin-agent run` (spec §7.6, §7.9): every Service of the cluster
 * (VIP and ports from `services/index.json` and the Service specs) joined with the endpoint mesh's
 * cluster snapshot (ready backend addresses per Service, from every node). A Service without ready
 * endpoints stays in, with no backends: its VIP answers, and connections to it are refused at once
 * (no black hole). Pure code.
 */

import type { ClusterSnapshot } from "../../core/model/endpoint_snapshot.ts";
import { API_VERSION } from "../../core/model/resources.ts";
import { backendProblem, type ServiceSnapshot } from "./service_snapshot.ts";
import type { KnownService } from "../services/services_view.ts";

/** Which inputs a dataplane snapshot was built from (for status). */
export interface SnapshotOrigin {
  /** The mesh snapshot's coordinator term and version. */
  term: number;
  version: number;
  /** The services index generation. */
  servicesGeneration?: number;
}

/** Options of `clusterServiceSnapshot`. */
export interface ClusterServiceSnapshotOptions {
  services: readonly KnownService[];
  serviceCIDR?: string;
  /** The mesh's newest cluster snapshot. */
  mesh: Pick<ClusterSnapshot, "term" | "version" | "endpoints">;
  servicesGeneration?: number;
}

/** The snapshot and the endpoints left out of it. */
export interface BuiltSnapshot {
  snapshot: ServiceSnapshot;
  /** Endpoints no dataplane may use (e.g. inside the service CIDR), each with the reason. */
  skipped: string[];
}

/**
 * Builds the Service snapshot the dataplane applies (validated by NodeDataplane before it is applied). An endpoint
 * the dataplane would refuse is left out and named in `skipped`: one bad report never stops every
 * other Service from converging.
 */
export function clusterServiceSnapshot(o: ClusterServiceSnapshotOptions): BuiltSnapshot {
  const skipped: string[] = [];
  const usable = (service: string, ips: readonly string[]) =>
    ips.filter((ip) => {
      const problem = backendProblem(ip, o.serviceCIDR);
      if (problem) skipped.push(`${service}: ${problem}`);
      return !problem;
    });
  const services = o.services.map(({ entry, spec }) => ({
    namespace: entry.namespace,
    name: entry.name,
    vip: entry.vip,
    ports: spec.spec.ports.map((p) => ({
      ...(p.name ? { name: p.name } : {}),
      port: p.port,
      targetPort: p.targetPort,
      protocol: p.protocol,
    })),
    backends: usable(
      `${entry.namespace}/${entry.name}`,
      o.mesh.endpoints[`${entry.namespace}/${entry.name}`] ?? [],
    ),
  }));
  const snapshot: ServiceSnapshot = {
    apiVersion: API_VERSION,
    kind: "ServiceSnapshot",
    generation: o.mesh.version,
    ...(o.serviceCIDR ? { serviceCIDR: o.serviceCIDR } : {}),
    services,
  };
  return { snapshot, skipped };
}

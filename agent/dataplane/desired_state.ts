/**
 * The desired map contents of a Service snapshot: every Service port with its backends in slot
 * order, checked against the map capacities. Pure code: no kernel access.
 */

import { ValidationError } from "../../core/kit/errors.ts";
import { type Ipv6Prefix, parseIpv6, parseIpv6Prefix } from "../../core/model/ipv6.ts";
import type { ServiceSnapshot } from "./service_snapshot.ts";
import type { Backend } from "./be_map.ts";
import { PROTO, type SvcKey, svcKeyId } from "./svc_map.ts";

/** The desired state of one Service port. */
export interface DesiredPort {
  key: SvcKey;
  /** `namespace/name` of the Service (for logs and status). */
  service: string;
  /** Backends in slot order: sorted by address, all with the port's targetPort. */
  backends: Backend[];
}

/** The desired map contents. */
export interface DesiredState {
  serviceCIDR?: Ipv6Prefix;
  /** By `svcKeyId`. */
  ports: Map<string, DesiredPort>;
  /** Total backend slots. */
  slots: number;
}

/** Capacities of the maps (max_entries). */
export interface MapCapacity {
  services: number;
  backends: number;
  conntrack: number;
}

/** Default capacities: 65,536 Service ports, 262,144 backend slots, 131,072 flows×2. */
export const DEFAULT_CAPACITY: MapCapacity = {
  services: 65_536,
  backends: 262_144,
  conntrack: 131_072,
};

/**
 * Compiles a validated snapshot into desired map contents. Throws a
 * `ValidationError` when it does not fit the map capacities.
 */
export function compileSnapshot(
  snapshot: ServiceSnapshot,
  capacity: MapCapacity = DEFAULT_CAPACITY,
): DesiredState {
  const ports = new Map<string, DesiredPort>();
  let slots = 0;
  for (const s of snapshot.services) {
    const vip = parseIpv6(s.vip);
    const addrs = s.backends.map(parseIpv6).sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
    for (const p of s.ports) {
      const key = { vip, port: p.port, proto: PROTO[p.protocol] };
      ports.set(svcKeyId(key), {
        key,
        service: `${s.namespace}/${s.name}`,
        backends: addrs.map((addr) => ({ addr, port: p.targetPort })),
      });
      slots += addrs.length;
    }
  }
  if (ports.size > capacity.services) {
    throw new ValidationError(
      `service snapshot: ${ports.size} Service ports exceed the dataplane capacity of ${capacity.services}`,
    );
  }
  if (slots > capacity.backends) {
    throw new ValidationError(
      `service snapshot: ${slots} backend slots exceed the dataplane capacity of ${capacity.backends}`,
    );
  }
  return {
    serviceCIDR: snapshot.serviceCIDR ? parseIpv6Prefix(snapshot.serviceCIDR) : undefined,
    ports,
    slots,
  };
}

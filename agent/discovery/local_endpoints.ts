/**
 * This node's ready endpoints per Service (spec §7.9), from kubelet's view of its Pods and the
 * cluster's Services: a Pod counts only when kubelet reports it Ready (a re-created static Pod
 * keeps its UID and may first report its previous IP while Pending), it is in the Service's
 * namespace and it carries every label of the Service's selector. Only IPv6 addresses are used.
 */

import type { EndpointSet } from "../../core/model/endpoint_snapshot.ts";
import { formatIpv6, parseIpv6 } from "../../core/model/ipv6.ts";
import { selectorMatches } from "../../core/model/resources.ts";
import type { KnownService } from "../services/services_view.ts";
import type { PodInfo } from "./pod_proto.ts";

/** The endpoint set to report: Services with no ready local Pod are left out. */
export function localEndpoints(
  pods: readonly PodInfo[],
  services: readonly KnownService[],
): EndpointSet {
  const out: EndpointSet = {};
  for (
    const s of [...services].sort((a, b) =>
      `${a.entry.namespace}/${a.entry.name}` < `${b.entry.namespace}/${b.entry.name}` ? -1 : 1
    )
  ) {
    const ips = new Set<string>();
    for (const p of pods) {
      if (!p.ready || p.namespace !== s.entry.namespace) continue;
      if (!selectorMatches(s.spec.spec.selector, p.labels)) continue;
      for (const ip of p.ips) {
        if (!ip.includes(":")) continue;
        try {
          ips.add(formatIpv6(parseIpv6(ip)));
        } catch { /* not an address: ignored */ }
      }
    }
    if (ips.size) out[`${s.entry.namespace}/${s.entry.name}`] = [...ips].sort();
  }
  return out;
}

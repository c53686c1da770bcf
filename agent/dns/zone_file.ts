/**
 * The cluster zone CoreDNS serves with its `file` plugin (RFC 1035 master file), rendered from the
 * Services the agent knows:
 *
 *   <svc>.<ns>.svc.<domain>.                      AAAA  <VIP>
 *   _<port-name>._<tcp|udp>.<svc>.<ns>.svc.<domain>.  SRV  0 100 <port> <svc>.<ns>.svc.<domain>.
 *
 * SRV records only for named ports (as Kubernetes DNS does). The SOA serial must change for
 * CoreDNS to reload: the caller passes one that only ever grows.
 */

import type { KnownService } from "../services/services_view.ts";

/** Time to live of every record: short, so a deleted Service's name goes quickly. */
export const RECORD_TTL_S = 5;

/** Options of `renderZone`. */
export interface ZoneOptions {
  /** The cluster domain, e.g. `cluster.local`. */
  domain: string;
  serial: number;
  services: readonly KnownService[];
}

/** The zone file text. */
export function renderZone(options: ZoneOptions): string {
  const origin = `${options.domain}.`;
  const lines = [
    `$ORIGIN ${origin}`,
    `$TTL ${RECORD_TTL_S}`,
    `@ IN SOA ns.dns.${origin} hostmaster.${origin} ${options.serial} 60 30 3600 ${RECORD_TTL_S}`,
    `@ IN NS ns.dns.${origin}`,
  ];
  const sorted = [...options.services].sort((a, b) =>
    `${a.entry.namespace}/${a.entry.name}` < `${b.entry.namespace}/${b.entry.name}` ? -1 : 1
  );
  for (const { entry, spec } of sorted) {
    const host = `${entry.name}.${entry.namespace}.svc`;
    lines.push(`${host} IN AAAA ${entry.vip}`);
    for (const p of spec.spec.ports) {
      if (!p.name) continue;
      lines.push(
        `_${p.name}._${p.protocol.toLowerCase()}.${host} IN SRV 0 100 ${p.port} ${host}.${origin}`,
      );
    }
  }
  return lines.join("\n") + "\n";
}

/** The serial of a zone file's SOA record, or undefined. */
export function zoneSerial(text: string): number | undefined {
  const m = /^@ IN SOA \S+ \S+ (\d+) /m.exec(text);
  return m ? Number(m[1]) : undefined;
}

/** A serial that grows on every write and across restarts: unix seconds, or the last one + 1. */
export function nextSerial(previous: number | undefined, nowMs: number): number {
  const seconds = Math.floor(nowMs / 1000);
  return previous === undefined ? seconds : Math.max(seconds, previous + 1);
}

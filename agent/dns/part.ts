/**
 * The DNS part of `podmin-agent run --dns-dir`: the cluster zone for CoreDNS's file plugin, kept
 * equal to the Services by a loop (`<state-dir>/dns.json` after each pass).
 */

import * as path from "node:path";
import { Loop } from "../loop.ts";
import type { FlagSpecs, Part, PartContext } from "../part.ts";
import { DEFAULT_CLUSTER_DOMAIN } from "../services/services_view.ts";
import type { ServicesSource } from "../services/part.ts";
import { writeJsonStatus } from "../status_file.ts";
import { DnsPublisher, type DnsStatus } from "./dns_publisher.ts";

/** The DNS part's flags. */
export const DNS_FLAGS = {
  "dns-dir": {
    type: "string",
    arg: "DIR",
    help: "write the cluster zone (<svc>.<ns>.svc.cluster.local AAAA\n" +
      "the Service VIP) here for CoreDNS's file plugin; off by default",
  },
} as const satisfies FlagSpecs;

const MAX_BACKOFF_MS = 30_000;

/** The DNS part, or undefined without `--dns-dir`. */
export function dnsPart(o: {
  context: PartContext;
  /** `--dns-dir`. */
  dir?: string;
  services: ServicesSource;
  /** `--interval`. */
  intervalMs: number;
}): Part | undefined {
  if (!o.dir) return undefined;
  const { hub, stateDir, log } = o.context;
  const services = o.services.reader();
  const dns = new DnsPublisher({
    services,
    dir: o.dir,
    domain: DEFAULT_CLUSTER_DOMAIN,
    refreshServices: false, // the Services loop refreshes them
    log,
  });
  const loop = new Loop<DnsStatus>({
    name: "dns",
    intervalMs: o.intervalMs,
    maxBackoffMs: MAX_BACKOFF_MS,
    log,
    pass: async () => ({ status: await dns.pass() }),
    status: (status) => writeJsonStatus(path.join(stateDir, "dns.json"), status),
  });
  // The Services loop refreshed them (on its interval or an announcement): the zone follows at once.
  hub.on("servicesChanged", () => loop.hint());
  return {
    name: "dns",
    statusFile: "dns.json",
    start: () => loop.start(),
    stop: () => loop.stop(),
  };
}

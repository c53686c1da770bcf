/**
 * The Service snapshot: the dataplane's input. Every Service of the cluster
 * (all NodeGroups) with its VIP, its ports and the addresses of its ready
 * backends, wherever they run. Produced by discovery (kubelet Pods of this
 * node plus peers' endpoint snapshots); consumed by agent/dataplane/dataplane.ts.
 *
 * ```json
 * {
 *   "apiVersion": "podmin.dev/v1",
 *   "kind": "ServiceSnapshot",
 *   "generation": 12,
 *   "serviceCIDR": "fd00:504d::/112",
 *   "services": [
 *     {"namespace": "default", "name": "web", "vip": "fd00:504d::2f1c",
 *      "ports": [{"name": "http", "port": 80, "targetPort": 8080, "protocol": "TCP"}],
 *      "backends": ["2600:1f14:a:b:1::10", "2600:1f14:a:b:2::11"]}
 *   ]
 * }
 * ```
 *
 * `parseServiceSnapshot` validates everything and returns a normalized copy
 * (defaults filled, addresses in RFC 5952 form); an invalid snapshot throws
 * a `ValidationError` naming the field, and nothing is applied.
 */

import { ValidationError } from "../../core/kit/errors.ts";
import {
  formatIpv6,
  type Ipv6Prefix,
  parseIpv6,
  parseIpv6Prefix,
  prefixContains,
} from "../../core/model/ipv6.ts";
import { isDnsLabel } from "../../core/model/names.ts";
import { API_VERSION } from "../../core/model/resources.ts";

/** L4 protocol of a Service port. */
export type ServiceProtocol = "TCP" | "UDP";

/** One Service port. */
export interface SnapshotPort {
  name?: string;
  /** The port on the VIP, 1–65535. */
  port: number;
  /** The port on the backends, 1–65535 (default: `port`). */
  targetPort: number;
  /** Default TCP. */
  protocol: ServiceProtocol;
}

/** One Service. */
export interface SnapshotService {
  namespace: string;
  name: string;
  /** The VIP (RFC 5952). */
  vip: string;
  ports: SnapshotPort[];
  /** Ready backend Pod addresses (RFC 5952), on this node or any other. */
  backends: string[];
}

/** The whole snapshot. */
export interface ServiceSnapshot {
  apiVersion: typeof API_VERSION;
  kind: "ServiceSnapshot";
  /** Increases with every change (informational). */
  generation?: number;
  /** When set, every VIP lies inside it and unmatched traffic to it is dropped. */
  serviceCIDR?: string;
  services: SnapshotService[];
}

/** A snapshot without Services (the dataplane unloads). */
export function emptyServiceSnapshot(): ServiceSnapshot {
  return { apiVersion: API_VERSION, kind: "ServiceSnapshot", services: [] };
}

/** Upper bounds that keep a snapshot within what one node's maps can hold. */
export const SNAPSHOT_LIMITS = {
  services: 65_536,
  portsPerService: 256,
  backendsPerService: 65_536,
} as const;

const BAD_RANGES: [string, Ipv6Prefix][] = [
  ["the unspecified address", parseIpv6Prefix("::/128")],
  ["loopback", parseIpv6Prefix("::1/128")],
  ["IPv4-mapped", parseIpv6Prefix("::ffff:0:0/96")],
  ["link-local", parseIpv6Prefix("fe80::/10")],
  ["multicast", parseIpv6Prefix("ff00::/8")],
];

function fields(at: string, value: unknown, allowed: string[]): Record<string, unknown> {
  if (value === null || typeof value !== "object" || Array.isArray(value)) {
    throw new ValidationError(`service snapshot: ${at} must be an object`);
  }
  for (const k of Object.keys(value)) {
    if (!allowed.includes(k)) {
      throw new ValidationError(
        `service snapshot: ${at}: unknown field ${JSON.stringify(k)} (allowed: ${
          allowed.join(", ")
        })`,
      );
    }
  }
  return value as Record<string, unknown>;
}

function list(at: string, value: unknown, max: number): unknown[] {
  if (!Array.isArray(value)) throw new ValidationError(`service snapshot: ${at} must be a list`);
  if (value.length > max) {
    throw new ValidationError(`service snapshot: ${at} has ${value.length} items (at most ${max})`);
  }
  return value;
}

function portNumber(at: string, value: unknown): number {
  if (!Number.isInteger(value) || (value as number) < 1 || (value as number) > 65535) {
    throw new ValidationError(
      `service snapshot: ${at}: ${JSON.stringify(value)} is not a port (1-65535)`,
    );
  }
  return value as number;
}

/** Parses a unicast IPv6 address usable as a VIP or backend. */
function unicast(at: string, value: unknown): bigint {
  let addr: bigint;
  try {
    addr = parseIpv6(value as string);
  } catch {
    throw new ValidationError(
      `service snapshot: ${at}: invalid IPv6 address ${JSON.stringify(value)}`,
    );
  }
  for (const [what, range] of BAD_RANGES) {
    if (prefixContains(range, addr)) {
      throw new ValidationError(
        `service snapshot: ${at}: ${formatIpv6(addr)} is ${what}, not a unicast address`,
      );
    }
  }
  return addr;
}

/** Validates and normalizes a snapshot (e.g. parsed JSON). Throws `ValidationError`. */
export function parseServiceSnapshot(input: unknown): ServiceSnapshot {
  const doc = fields("document", input, [
    "apiVersion",
    "kind",
    "generation",
    "serviceCIDR",
    "services",
  ]);
  const { out, cidr } = parseHeader(doc);
  const seen: SeenServices = { names: new Set(), vips: new Map(), backends: [] };
  const services = list("services", doc.services, SNAPSHOT_LIMITS.services);
  for (const [i, raw] of services.entries()) {
    out.services.push(parseService({ at: `services[${i}]`, raw, cidr, out, seen }));
  }
  for (const [bat, addr] of seen.backends) {
    if (seen.vips.has(addr)) {
      throw new ValidationError(
        `service snapshot: ${bat}: ${formatIpv6(addr)} is the VIP of ${seen.vips.get(addr)}`,
      );
    }
  }
  return out;
}

/** What the Services parsed so far claimed: names, VIPs (with their owner) and backends. */
interface SeenServices {
  names: Set<string>;
  vips: Map<bigint, string>;
  backends: [string, bigint][];
}

/** One field of a Service being parsed, with what the snapshot around it holds. */
interface ServiceField {
  /** Where it is, for errors (e.g. `services[3]`). */
  at: string;
  raw: unknown;
  cidr?: Ipv6Prefix;
  /** The snapshot so far (its `serviceCIDR` for errors). */
  out: ServiceSnapshot;
  seen: SeenServices;
}

/** Checks apiVersion and kind; returns the snapshot without Services and its parsed CIDR. */
function parseHeader(doc: Record<string, unknown>): { out: ServiceSnapshot; cidr?: Ipv6Prefix } {
  if (doc.apiVersion !== API_VERSION) {
    throw new ValidationError(
      `service snapshot: unsupported apiVersion ${JSON.stringify(doc.apiVersion)}`,
    );
  }
  if (doc.kind !== "ServiceSnapshot") {
    throw new ValidationError("service snapshot: kind must be ServiceSnapshot");
  }
  const out: ServiceSnapshot = { apiVersion: API_VERSION, kind: "ServiceSnapshot", services: [] };
  if (doc.generation !== undefined) {
    if (!Number.isSafeInteger(doc.generation) || (doc.generation as number) < 0) {
      throw new ValidationError("service snapshot: generation must be a non-negative integer");
    }
    out.generation = doc.generation as number;
  }
  let cidr: Ipv6Prefix | undefined;
  if (doc.serviceCIDR !== undefined) {
    try {
      cidr = parseIpv6Prefix(doc.serviceCIDR as string);
    } catch (err) {
      throw new ValidationError(`service snapshot: serviceCIDR: ${(err as Error).message}`);
    }
    if (cidr.length < 64 || cidr.length > 120) {
      throw new ValidationError("service snapshot: serviceCIDR must be a /64 to /120 prefix");
    }
    out.serviceCIDR = `${formatIpv6(cidr.network)}/${cidr.length}`;
  }
  return { out, cidr };
}

/** Validates one Service: unique name, unique VIP inside the CIDR, its ports and backends. */
function parseService(
  options: ServiceField,
): SnapshotService {
  const { at, cidr, out, seen } = options;
  const s = fields(at, options.raw, ["namespace", "name", "vip", "ports", "backends"]);
  if (!isDnsLabel(s.namespace)) {
    throw new ValidationError(`service snapshot: ${at}.namespace must be a DNS label`);
  }
  if (!isDnsLabel(s.name)) {
    throw new ValidationError(`service snapshot: ${at}.name must be a DNS label`);
  }
  const ref = `${s.namespace}/${s.name}`;
  if (seen.names.has(ref)) throw new ValidationError(`service snapshot: ${at}: duplicate ${ref}`);
  seen.names.add(ref);

  const vip = unicast(`${at}.vip`, s.vip);
  if (cidr && !prefixContains(cidr, vip)) {
    throw new ValidationError(
      `service snapshot: ${at}.vip ${formatIpv6(vip)} is outside serviceCIDR ${out.serviceCIDR}`,
    );
  }
  if (seen.vips.has(vip)) {
    throw new ValidationError(
      `service snapshot: ${at}.vip ${formatIpv6(vip)} is also the VIP of ${seen.vips.get(vip)}`,
    );
  }
  seen.vips.set(vip, ref);
  const ports = parsePorts(at, s.ports);
  const backends = parseBackends({ at, raw: s.backends, cidr, out, seen });
  return { namespace: s.namespace, name: s.name, vip: formatIpv6(vip), ports, backends };
}

/** Validates a Service's ports: at least one, no duplicate port/protocol, defaults filled. */
function parsePorts(at: string, raw: unknown): SnapshotPort[] {
  const ports: SnapshotPort[] = [];
  const seen = new Set<string>();
  const rawPorts = list(`${at}.ports`, raw, SNAPSHOT_LIMITS.portsPerService);
  if (rawPorts.length === 0) {
    throw new ValidationError(`service snapshot: ${at}.ports must not be empty`);
  }
  for (const [j, rp] of rawPorts.entries()) {
    const pat = `${at}.ports[${j}]`;
    const p = fields(pat, rp, ["name", "port", "targetPort", "protocol"]);
    if (p.name !== undefined && !isDnsLabel(p.name)) {
      throw new ValidationError(`service snapshot: ${pat}.name must be a DNS label`);
    }
    const port = portNumber(`${pat}.port`, p.port);
    const targetPort = p.targetPort === undefined
      ? port
      : portNumber(`${pat}.targetPort`, p.targetPort);
    const protocol = p.protocol ?? "TCP";
    if (protocol !== "TCP" && protocol !== "UDP") {
      throw new ValidationError(`service snapshot: ${pat}.protocol must be TCP or UDP`);
    }
    const key = `${port}/${protocol}`;
    if (seen.has(key)) throw new ValidationError(`service snapshot: ${pat}: duplicate ${key}`);
    seen.add(key);
    ports.push({
      ...(p.name !== undefined ? { name: p.name as string } : {}),
      port,
      targetPort,
      protocol,
    });
  }
  return ports;
}

/** Validates a Service's backends: unicast, outside the CIDR, no duplicates; records them. */
function parseBackends(
  options: ServiceField,
): string[] {
  const { at, cidr, out, seen } = options;
  const backends: string[] = [];
  const seenBackends = new Set<bigint>();
  const rawBackends = list(`${at}.backends`, options.raw, SNAPSHOT_LIMITS.backendsPerService);
  for (const [j, rb] of rawBackends.entries()) {
    const bat = `${at}.backends[${j}]`;
    const addr = unicast(bat, rb);
    if (cidr && prefixContains(cidr, addr)) {
      throw new ValidationError(
        `service snapshot: ${bat}: ${formatIpv6(addr)} is inside serviceCIDR ${out.serviceCIDR}`,
      );
    }
    if (seenBackends.has(addr)) {
      throw new ValidationError(`service snapshot: ${bat}: duplicate ${formatIpv6(addr)}`);
    }
    seenBackends.add(addr);
    backends.push(formatIpv6(addr));
    seen.backends.push([bat, addr]);
  }
  return backends;
}

/**
 * Why `address` cannot be a backend (undefined when it can): not a unicast IPv6 address, or inside
 * the service CIDR. Lets a producer leave out one bad endpoint instead of failing the snapshot.
 */
export function backendProblem(address: string, serviceCIDR?: string): string | undefined {
  try {
    const addr = unicast("backend", address);
    if (serviceCIDR && prefixContains(parseIpv6Prefix(serviceCIDR), addr)) {
      return `${address} is inside serviceCIDR ${serviceCIDR}`;
    }
    return undefined;
  } catch (err) {
    return (err as Error).message;
  }
}

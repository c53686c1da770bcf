/**
 * The dataplane's maps as the agent sees them: byte layouts mirroring
 * bpf/dataplane.h, and the desired map contents compiled from a Service
 * snapshot. Pure code: no kernel access.
 */

import { ValidationError } from "../../core/errors.ts";
import { formatIpv6, type Ipv6Prefix, parseIpv6, parseIpv6Prefix } from "../../core/ipv6.ts";
import type { ServiceSnapshot } from "../../core/service_snapshot.ts";

/** Map names in the object. */
export const MAPS = {
  cfg: "podmin_cfg",
  svc: "podmin_svc",
  be: "podmin_be",
  ct: "podmin_ct",
  stats: "podmin_stats",
} as const;

/** Program names in the object. */
export const PROGRAMS = { ingress: "podmin_ingress", egress: "podmin_egress" } as const;

/** PM_LAYOUT_VERSION of bpf/dataplane.h. */
export const LAYOUT_VERSION = 1;

/** Key and value sizes (bytes) of every map, as in bpf/dataplane.h. */
export const SIZES = {
  cfg: { key: 4, value: 40 },
  svc: { key: 20, value: 8 },
  be: { key: 8, value: 20 },
  ct: { key: 40, value: 40 },
  stats: { key: 4, value: 8 },
} as const;

/** Struct member offsets (bytes), checked against the object's BTF by a test. */
export const OFFSETS = {
  pm_cfg: { svc_net: 0, svc_mask: 16, flags: 32, version: 36 },
  pm_svc_key: { vip: 0, port: 16, proto: 18 },
  pm_svc_val: { id: 0, count: 4 },
  pm_be_key: { id: 0, slot: 4 },
  pm_be_val: { addr: 0, port: 16 },
  pm_ct_key: { saddr: 0, daddr: 16, sport: 32, dport: 34, proto: 36 },
  pm_ct_val: { saddr: 0, daddr: 16, sport: 32, dport: 34, dir: 36 },
} as const;

/** Counters of podmin_stats, by index (enum pm_stat). */
export const STAT_NAMES = [
  "newFlow",
  "forward",
  "reply",
  "icmp",
  "dropNoBackend",
  "dropUnmatched",
  "dropUntranslatable",
  "portRemap",
  "dropCt",
  "error",
] as const;

/** IP protocol numbers. */
export const PROTO = { TCP: 6, UDP: 17 } as const;
const PROTO_NAME: Record<number, "TCP" | "UDP"> = { 6: "TCP", 17: "UDP" };

/** Conntrack directions (pm_ct_val.dir). */
export const DIR = { forward: 1, reply: 2 } as const;

/** PM_CFG_SERVICE_CIDR. */
const CFG_SERVICE_CIDR = 1;

const MASK64 = (1n << 64n) - 1n;

/** 16 big-endian bytes of an address. */
export function addrBytes(addr: bigint, out = new Uint8Array(16), offset = 0): Uint8Array {
  const d = new DataView(out.buffer, out.byteOffset + offset, 16);
  d.setBigUint64(0, (addr >> 64n) & MASK64, false);
  d.setBigUint64(8, addr & MASK64, false);
  return out;
}

/** The address in 16 big-endian bytes. */
export function bytesAddr(b: Uint8Array, offset = 0): bigint {
  const d = new DataView(b.buffer, b.byteOffset + offset, 16);
  return (d.getBigUint64(0, false) << 64n) | d.getBigUint64(8, false);
}

function hex(b: Uint8Array): string {
  let s = "";
  for (const x of b) s += x.toString(16).padStart(2, "0");
  return s;
}

/** A Service port key. */
export interface SvcKey {
  vip: bigint;
  port: number;
  proto: number;
}

/** Encodes a podmin_svc key. */
export function encodeSvcKey(k: SvcKey, out = new Uint8Array(SIZES.svc.key), at = 0): Uint8Array {
  addrBytes(k.vip, out, at);
  new DataView(out.buffer, out.byteOffset).setUint16(at + 16, k.port, false);
  out[at + 18] = k.proto;
  out[at + 19] = 0;
  return out;
}

/** Decodes a podmin_svc key. */
export function decodeSvcKey(b: Uint8Array): SvcKey {
  const v = new DataView(b.buffer, b.byteOffset, b.byteLength);
  return { vip: bytesAddr(b), port: v.getUint16(16, false), proto: b[18] };
}

/** A podmin_svc value. */
export interface SvcVal {
  id: number;
  count: number;
}

/** Encodes a podmin_svc value. */
export function encodeSvcVal(v: SvcVal, out = new Uint8Array(SIZES.svc.value), at = 0): Uint8Array {
  const d = new DataView(out.buffer, out.byteOffset);
  d.setUint32(at, v.id, true);
  d.setUint32(at + 4, v.count, true);
  return out;
}

/** Decodes a podmin_svc value. */
export function decodeSvcVal(b: Uint8Array): SvcVal {
  const d = new DataView(b.buffer, b.byteOffset, b.byteLength);
  return { id: d.getUint32(0, true), count: d.getUint32(4, true) };
}

/** A backend slot key. */
export interface BeKey {
  id: number;
  slot: number;
}

/** Encodes a podmin_be key. */
export function encodeBeKey(k: BeKey, out = new Uint8Array(SIZES.be.key), at = 0): Uint8Array {
  const d = new DataView(out.buffer, out.byteOffset);
  d.setUint32(at, k.id, true);
  d.setUint32(at + 4, k.slot, true);
  return out;
}

/** Decodes a podmin_be key. */
export function decodeBeKey(b: Uint8Array): BeKey {
  const d = new DataView(b.buffer, b.byteOffset, b.byteLength);
  return { id: d.getUint32(0, true), slot: d.getUint32(4, true) };
}

/** A backend: address and target port. */
export interface Backend {
  addr: bigint;
  port: number;
}

/** Encodes a podmin_be value. */
export function encodeBeVal(v: Backend, out = new Uint8Array(SIZES.be.value), at = 0): Uint8Array {
  addrBytes(v.addr, out, at);
  const d = new DataView(out.buffer, out.byteOffset);
  d.setUint16(at + 16, v.port, false);
  d.setUint16(at + 18, 0, true);
  return out;
}

/** Decodes a podmin_be value. */
export function decodeBeVal(b: Uint8Array): Backend {
  const d = new DataView(b.buffer, b.byteOffset, b.byteLength);
  return { addr: bytesAddr(b), port: d.getUint16(16, false) };
}

/** A tuple as stored in podmin_ct (key or value). */
export interface Tuple {
  saddr: bigint;
  daddr: bigint;
  sport: number;
  dport: number;
}

/** A decoded conntrack entry. */
export interface CtEntry {
  key: Tuple & { proto: number };
  value: Tuple & { dir: number };
}

/** Encodes a podmin_ct key. */
export function encodeCtKey(k: Tuple & { proto: number }): Uint8Array {
  const out = new Uint8Array(SIZES.ct.key);
  addrBytes(k.saddr, out, 0);
  addrBytes(k.daddr, out, 16);
  const d = new DataView(out.buffer);
  d.setUint16(32, k.sport, false);
  d.setUint16(34, k.dport, false);
  out[36] = k.proto;
  return out;
}

/** Decodes a podmin_ct entry. */
export function decodeCt(key: Uint8Array, value: Uint8Array): CtEntry {
  const k = new DataView(key.buffer, key.byteOffset, key.byteLength);
  const v = new DataView(value.buffer, value.byteOffset, value.byteLength);
  return {
    key: {
      saddr: bytesAddr(key, 0),
      daddr: bytesAddr(key, 16),
      sport: k.getUint16(32, false),
      dport: k.getUint16(34, false),
      proto: key[36],
    },
    value: {
      saddr: bytesAddr(value, 0),
      daddr: bytesAddr(value, 16),
      sport: v.getUint16(32, false),
      dport: v.getUint16(34, false),
      dir: value[36],
    },
  };
}

/** Encodes the podmin_cfg value. */
export function encodeCfg(cidr: Ipv6Prefix | undefined): Uint8Array {
  const out = new Uint8Array(SIZES.cfg.value);
  const d = new DataView(out.buffer);
  if (cidr) {
    addrBytes(cidr.network, out, 0);
    const mask = ((1n << BigInt(cidr.length)) - 1n) << BigInt(128 - cidr.length);
    addrBytes(mask, out, 16);
    d.setUint32(32, CFG_SERVICE_CIDR, true);
  }
  d.setUint32(36, LAYOUT_VERSION, true);
  return out;
}

/** Decodes the podmin_cfg value. */
export function decodeCfg(b: Uint8Array): { serviceCIDR?: string; version: number } {
  const d = new DataView(b.buffer, b.byteOffset, b.byteLength);
  const version = d.getUint32(36, true);
  if (!(d.getUint32(32, true) & CFG_SERVICE_CIDR)) return { version };
  let mask = bytesAddr(b, 16);
  let len = 0;
  while (mask & (1n << 127n)) {
    len++;
    mask = (mask << 1n) & ((1n << 128n) - 1n);
  }
  return { serviceCIDR: `${formatIpv6(bytesAddr(b, 0))}/${len}`, version };
}

/** Sums a per-CPU u64 value. */
export function sumPerCpu(value: Uint8Array): bigint {
  const d = new DataView(value.buffer, value.byteOffset, value.byteLength);
  let total = 0n;
  for (let off = 0; off + 8 <= value.byteLength; off += 8) total += d.getBigUint64(off, true);
  return total;
}

/** The canonical string id of a Service port key (map key bytes in hex). */
export function svcKeyId(k: SvcKey): string {
  return hex(encodeSvcKey(k));
}

/** `[vip]:port/TCP`. */
export function formatSvcKey(k: SvcKey): string {
  return `[${formatIpv6(k.vip)}]:${k.port}/${PROTO_NAME[k.proto] ?? k.proto}`;
}

/** `[addr]:port`. */
export function formatEndpoint(addr: bigint, port: number): string {
  return `[${formatIpv6(addr)}]:${port}`;
}

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

/**
 * `podmin_svc` (struct pm_svc_key → struct pm_svc_val of bpf/dataplane.h): a Service port
 * (VIP, port, protocol) → its backend-slot namespace `id` and the number of slots in use.
 * Ports are big-endian (network order), ids and counts host order.
 */

import type { BpfMap } from "../../ffi/bpf_map.ts";
import { formatIpv6 } from "../../core/model/ipv6.ts";
import { addrBytes, bytesAddr, type Codec, hex, TypedMap } from "./typed_map.ts";

/** The map's name in the object. */
export const SVC_MAP = "podmin_svc";
/** Key and value sizes. */
export const SVC_SIZES = { key: 20, value: 8 } as const;
/** Member offsets, checked against the object's BTF by a test. */
export const PM_SVC_KEY_OFFSETS = { vip: 0, port: 16, proto: 18 } as const;
export const PM_SVC_VAL_OFFSETS = { id: 0, count: 4 } as const;

/** IP protocol numbers. */
export const PROTO = { TCP: 6, UDP: 17 } as const;
const PROTO_NAME: Record<number, "TCP" | "UDP"> = { 6: "TCP", 17: "UDP" };

/** A Service port key. */
export interface SvcKey {
  vip: bigint;
  port: number;
  proto: number;
}

/** A podmin_svc value. */
export interface SvcVal {
  id: number;
  count: number;
}

/** Encodes a podmin_svc key. */
export function encodeSvcKey(k: SvcKey, out = new Uint8Array(SVC_SIZES.key), at = 0): Uint8Array {
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

/** Encodes a podmin_svc value. */
export function encodeSvcVal(v: SvcVal, out = new Uint8Array(SVC_SIZES.value), at = 0): Uint8Array {
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

/** The canonical string id of a Service port key (map key bytes in hex). */
export function svcKeyId(k: SvcKey): string {
  return hex(encodeSvcKey(k));
}

/** `[vip]:port/TCP`. */
export function formatSvcKey(k: SvcKey): string {
  return `[${formatIpv6(k.vip)}]:${k.port}/${PROTO_NAME[k.proto] ?? k.proto}`;
}

const SVC_KEY: Codec<SvcKey> = { size: SVC_SIZES.key, encode: encodeSvcKey, decode: decodeSvcKey };
const SVC_VAL: Codec<SvcVal> = {
  size: SVC_SIZES.value,
  encode: encodeSvcVal,
  decode: decodeSvcVal,
};

/** The podmin_svc map. */
export class SvcMap extends TypedMap<SvcKey, SvcVal> {
  constructor(map: BpfMap) {
    super(map, { key: SVC_KEY, value: SVC_VAL });
  }
}

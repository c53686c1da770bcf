/**
 * `podmin_be` (struct pm_be_key → struct pm_be_val of bpf/dataplane.h): slot `slot` of the
 * backend-slot namespace `id` → a backend address and target port (big-endian).
 */

import type { BpfMap } from "../../ffi/bpf_map.ts";
import { formatIpv6 } from "../../core/model/ipv6.ts";
import { addrBytes, bytesAddr, type Codec, TypedMap } from "./typed_map.ts";

/** The map's name in the object. */
export const BE_MAP = "podmin_be";
/** Key and value sizes. */
export const BE_SIZES = { key: 8, value: 20 } as const;
/** Member offsets, checked against the object's BTF by a test. */
export const PM_BE_KEY_OFFSETS = { id: 0, slot: 4 } as const;
export const PM_BE_VAL_OFFSETS = { addr: 0, port: 16 } as const;

/** A backend slot key. */
export interface BeKey {
  id: number;
  slot: number;
}

/** A backend: address and target port. */
export interface Backend {
  addr: bigint;
  port: number;
}

/** Encodes a podmin_be key. */
export function encodeBeKey(k: BeKey, out = new Uint8Array(BE_SIZES.key), at = 0): Uint8Array {
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

/** Encodes a podmin_be value. */
export function encodeBeVal(v: Backend, out = new Uint8Array(BE_SIZES.value), at = 0): Uint8Array {
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

/** `[addr]:port`. */
export function formatEndpoint(addr: bigint, port: number): string {
  return `[${formatIpv6(addr)}]:${port}`;
}

const BE_KEY: Codec<BeKey> = { size: BE_SIZES.key, encode: encodeBeKey, decode: decodeBeKey };
const BE_VAL: Codec<Backend> = { size: BE_SIZES.value, encode: encodeBeVal, decode: decodeBeVal };

/** The podmin_be map. */
export class BeMap extends TypedMap<BeKey, Backend> {
  constructor(map: BpfMap) {
    super(map, { key: BE_KEY, value: BE_VAL });
  }
}

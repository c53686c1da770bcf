/**
 * `podmin_ct` (struct pm_ct_key → struct pm_ct_val of bpf/dataplane.h): conntrack. A tuple as
 * seen on the wire → the tuple it is rewritten to and the direction (forward: client → VIP,
 * reply: backend → client).
 */

import type { BpfMap } from "../../ffi/bpf_map.ts";
import { addrBytes, bytesAddr, type Codec, TypedMap } from "./typed_map.ts";

/** The map's name in the object. */
export const CT_MAP = "podmin_ct";
/** Key and value sizes. */
export const CT_SIZES = { key: 40, value: 40 } as const;
/** Member offsets, checked against the object's BTF by a test. */
export const PM_CT_KEY_OFFSETS = { saddr: 0, daddr: 16, sport: 32, dport: 34, proto: 36 } as const;
export const PM_CT_VAL_OFFSETS = { saddr: 0, daddr: 16, sport: 32, dport: 34, dir: 36 } as const;

/** Conntrack directions (pm_ct_val.dir). */
export const DIR = { forward: 1, reply: 2 } as const;

/** A tuple as stored in podmin_ct (key or value). */
export interface Tuple {
  saddr: bigint;
  daddr: bigint;
  sport: number;
  dport: number;
}

/** A podmin_ct key. */
export type CtKey = Tuple & { proto: number };
/** A podmin_ct value. */
export type CtVal = Tuple & { dir: number };

/** A decoded conntrack entry. */
export interface CtEntry {
  key: CtKey;
  value: CtVal;
}

function encodeTuple(t: Tuple, out: Uint8Array, at: number): DataView {
  addrBytes(t.saddr, out, at);
  addrBytes(t.daddr, out, at + 16);
  const d = new DataView(out.buffer, out.byteOffset);
  d.setUint16(at + 32, t.sport, false);
  d.setUint16(at + 34, t.dport, false);
  return d;
}

function decodeTuple(b: Uint8Array): Tuple {
  const d = new DataView(b.buffer, b.byteOffset, b.byteLength);
  return {
    saddr: bytesAddr(b, 0),
    daddr: bytesAddr(b, 16),
    sport: d.getUint16(32, false),
    dport: d.getUint16(34, false),
  };
}

/** Encodes a podmin_ct key. */
export function encodeCtKey(k: CtKey, out = new Uint8Array(CT_SIZES.key), at = 0): Uint8Array {
  encodeTuple(k, out, at);
  out[at + 36] = k.proto;
  return out;
}

/** Encodes a podmin_ct value. */
export function encodeCtVal(v: CtVal, out = new Uint8Array(CT_SIZES.value), at = 0): Uint8Array {
  encodeTuple(v, out, at);
  out[at + 36] = v.dir;
  return out;
}

/** Decodes a podmin_ct key. */
export function decodeCtKey(b: Uint8Array): CtKey {
  return { ...decodeTuple(b), proto: b[36] };
}

/** Decodes a podmin_ct value. */
export function decodeCtVal(b: Uint8Array): CtVal {
  return { ...decodeTuple(b), dir: b[36] };
}

/** Decodes a podmin_ct entry. */
export function decodeCt(key: Uint8Array, value: Uint8Array): CtEntry {
  return { key: decodeCtKey(key), value: decodeCtVal(value) };
}

const CT_KEY: Codec<CtKey> = { size: CT_SIZES.key, encode: encodeCtKey, decode: decodeCtKey };
const CT_VAL: Codec<CtVal> = { size: CT_SIZES.value, encode: encodeCtVal, decode: decodeCtVal };

/** The podmin_ct map. */
export class CtMap extends TypedMap<CtKey, CtVal> {
  constructor(map: BpfMap) {
    super(map, { key: CT_KEY, value: CT_VAL });
  }

  /** Every entry as `{ key, value }`. */
  flows(): CtEntry[] {
    return this.entries().map(([key, value]) => ({ key, value }));
  }

  /**
   * Copies every entry of another podmin_ct map (a previous agent's programs) into this one, byte
   * for byte (padding included). Returns the entries copied.
   */
  copyFrom(source: BpfMap): number {
    const entries = source.entries();
    if (!entries.length) return 0;
    const keys = new Uint8Array(entries.length * CT_SIZES.key);
    const values = new Uint8Array(entries.length * CT_SIZES.value);
    entries.forEach(([k, v], i) => {
      keys.set(k, i * CT_SIZES.key);
      values.set(v, i * CT_SIZES.value);
    });
    this.map.updateMany(keys, values);
    return entries.length;
  }
}

/**
 * What the map modules (cfg_map.ts, svc_map.ts, be_map.ts, ct_map.ts, stats_map.ts) share: a
 * typed wrapper over ffi/bpf_map.ts that encodes keys and values with a codec, and the byte
 * helpers of their layouts (IPv6 addresses as 16 big-endian bytes, batches, hex). Only map
 * modules import this: the rest of the agent sees typed keys and values, never bytes.
 */

import type { BpfMap } from "../../ffi/bpf_map.ts";

/** How one C struct is laid out in bytes. */
export interface Codec<T> {
  /** sizeof the struct. */
  size: number;
  /** Writes `value` at `at` of `out` (a new buffer when omitted) and returns `out`. */
  encode(value: T, out?: Uint8Array, at?: number): Uint8Array;
  decode(bytes: Uint8Array): T;
}

/** A BPF map with typed keys and values. Batch operations use the batch syscalls when present. */
export class TypedMap<K, V> {
  /** The underlying map (its fd, name and shape). */
  readonly map: BpfMap;
  readonly #key: Codec<K>;
  readonly #value: Codec<V>;

  constructor(map: BpfMap, codecs: { key: Codec<K>; value: Codec<V> }) {
    this.map = map;
    this.#key = codecs.key;
    this.#value = codecs.value;
  }

  /** Every entry, decoded. */
  entries(): [K, V][] {
    return this.map.entries().map(([k, v]) => [this.#key.decode(k), this.#value.decode(v)]);
  }

  /** The value of a key, or undefined when absent. */
  lookup(key: K): V | undefined {
    const v = this.map.lookup(this.#key.encode(key));
    return v && this.#value.decode(v);
  }

  /** Creates or updates entries (one batch). */
  update(entries: readonly (readonly [K, V])[]): void {
    if (!entries.length) return;
    this.map.updateMany(
      encodeBatch(entries.map(([k]) => k), this.#key),
      encodeBatch(entries.map(([, v]) => v), this.#value),
    );
  }

  /** Deletes keys (one batch); returns how many existed. */
  delete(keys: readonly K[]): number {
    return keys.length ? this.map.deleteMany(encodeBatch(keys, this.#key)) : 0;
  }

  /** Closes the map fd when the wrapper owns it. */
  close(): void {
    this.map.close();
  }
}

const MASK64 = (1n << 64n) - 1n;

/** 16 big-endian bytes of an address. */
export function addrBytes(
  addr: bigint,
  out: Uint8Array = new Uint8Array(16),
  offset = 0,
): Uint8Array {
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

/** Lower-case hex of bytes. */
export function hex(b: Uint8Array): string {
  let s = "";
  for (const x of b) s += x.toString(16).padStart(2, "0");
  return s;
}

/** Encodes records of `size` bytes back to back, as batch map operations take them. */
export function encodeBatch<T>(
  items: readonly T[],
  codec: { size: number; encode(item: T, out: Uint8Array, at: number): unknown },
): Uint8Array {
  const out = new Uint8Array(items.length * codec.size);
  items.forEach((item, i) => codec.encode(item, out, i * codec.size));
  return out;
}

/** eBPF maps by file descriptor: single-element and batch operations. */

import { BpfError, check, libbpf } from "./libbpf.ts";
import { BPF_MAP_BATCH_OPTS, Struct } from "./structs.ts";

/** `bpf_map_update_elem` flags. */
export const BPF_ANY = 0;
/** Create only. */
export const BPF_NOEXIST = 1;
/** Update only. */
export const BPF_EXIST = 2;

/** Map types we name (enum bpf_map_type). */
export const MAP_TYPES: Record<number, string> = {
  1: "hash",
  2: "array",
  5: "percpu_hash",
  6: "percpu_array",
  9: "lru_hash",
  10: "lru_percpu_hash",
};

const PERCPU_TYPES = new Set([5, 6, 10]);

/** What a map is. */
export interface MapShape {
  name: string;
  type: number;
  keySize: number;
  /** Value size of one element as declared (per CPU for per-CPU maps). */
  valueSize: number;
  maxEntries: number;
}

let possibleCpus: number | undefined;

/** Number of possible CPUs (per-CPU map values hold one slot per possible CPU). */
export function numPossibleCpus(): number {
  if (possibleCpus !== undefined) return possibleCpus;
  const text = Deno.readTextFileSync("/sys/devices/system/cpu/possible").trim();
  let n = 0;
  for (const part of text.split(",")) {
    const [a, b] = part.split("-").map(Number);
    n += b === undefined ? 1 : b - a + 1;
  }
  return possibleCpus = n;
}

/**
 * A map. Keys and values are raw bytes in the kernel's layout; callers
 * encode them (the map modules of agent/dataplane/ for the dataplane).
 */
export class BpfMap implements MapShape {
  readonly name: string;
  readonly type: number;
  readonly keySize: number;
  readonly valueSize: number;
  readonly maxEntries: number;
  /** Bytes of one value as user space sees it (per-CPU maps: 8-byte rounded × CPUs). */
  readonly userValueSize: number;
  #fd: number;
  readonly #ownsFd: boolean;
  #batch?: { lookup: boolean; update: boolean; delete: boolean };

  /** Wraps a map fd. With `ownsFd`, `close()` closes it. */
  constructor(fd: number, shape: MapShape, options: { ownsFd?: boolean } = {}) {
    this.#fd = fd;
    this.#ownsFd = options.ownsFd ?? false;
    this.name = shape.name;
    this.type = shape.type;
    this.keySize = shape.keySize;
    this.valueSize = shape.valueSize;
    this.maxEntries = shape.maxEntries;
    this.userValueSize = PERCPU_TYPES.has(shape.type)
      ? Math.ceil(shape.valueSize / 8) * 8 * numPossibleCpus()
      : shape.valueSize;
  }

  /** The file descriptor. */
  get fd(): number {
    if (this.#fd < 0) throw new BpfError(`map ${this.name}`, 9, { detail: "closed" });
    return this.#fd;
  }

  /** True for per-CPU maps. */
  get perCpu(): boolean {
    return PERCPU_TYPES.has(this.type);
  }

  #checkKey(key: Uint8Array): void {
    if (key.byteLength !== this.keySize) {
      throw new RangeError(
        `map ${this.name}: key is ${key.byteLength} bytes, want ${this.keySize}`,
      );
    }
  }

  /** Creates or updates one element. */
  update(key: Uint8Array, value: Uint8Array, flags = BPF_ANY): void {
    this.#checkKey(key);
    if (value.byteLength !== this.userValueSize) {
      throw new RangeError(
        `map ${this.name}: value is ${value.byteLength} bytes, want ${this.userValueSize}`,
      );
    }
    check(
      libbpf().sym.bpf_map_update_elem(this.fd, key, value, BigInt(flags)),
      "bpf_map_update_elem",
      this.name,
    );
  }

  /** The value of a key, or undefined when absent. */
  lookup(key: Uint8Array): Uint8Array | undefined {
    this.#checkKey(key);
    const value = new Uint8Array(this.userValueSize);
    const ret = libbpf().sym.bpf_map_lookup_elem(this.fd, key, value);
    if (ret === -2) return undefined;
    check(ret, "bpf_map_lookup_elem", this.name);
    return value;
  }

  /** Deletes a key; false when it was absent. */
  delete(key: Uint8Array): boolean {
    this.#checkKey(key);
    const ret = libbpf().sym.bpf_map_delete_elem(this.fd, key);
    if (ret === -2) return false;
    check(ret, "bpf_map_delete_elem", this.name);
    return true;
  }

  /** Every key (a snapshot: keys added or removed meanwhile may be missed). */
  keys(): Uint8Array[] {
    const { sym } = libbpf();
    const out: Uint8Array[] = [];
    let prev: Uint8Array | null = null;
    for (;;) {
      const next = new Uint8Array(this.keySize);
      const ret = sym.bpf_map_get_next_key(this.fd, prev, next);
      if (ret === -2) return out;
      check(ret, "bpf_map_get_next_key", this.name);
      out.push(next);
      prev = next;
      if (out.length > this.maxEntries * 2) return out; // concurrent churn: stop, do not loop
    }
  }

  /** Which batch operations the library and kernel support for this map (probed once). */
  batchSupport(): { lookup: boolean; update: boolean; delete: boolean } {
    if (this.#batch) return this.#batch;
    const lib = libbpf();
    if (!lib.hasBatch) return this.#batch = { lookup: false, update: false, delete: false };
    const opts = batchOpts();
    const count = new Uint32Array([0]);
    const token = new Uint8Array(Math.max(8, this.keySize));
    const keys = new Uint8Array(this.keySize);
    const values = new Uint8Array(this.userValueSize);
    const probe = (ret: number) => ret === 0 || ret === -2;
    const lookup = probe(
      lib.sym.bpf_map_lookup_batch!(this.fd, null, token, keys, values, asBytes(count), opts),
    );
    count[0] = 0;
    const update = probe(
      lib.sym.bpf_map_update_batch!(this.fd, keys, values, asBytes(count), opts),
    );
    count[0] = 0;
    const del = probe(lib.sym.bpf_map_delete_batch!(this.fd, keys, asBytes(count), opts));
    return this.#batch = { lookup, update, delete: del };
  }

  /** Every entry. Uses batch lookups when available. */
  entries(): [Uint8Array, Uint8Array][] {
    if (this.batchSupport().lookup) return this.#entriesBatch();
    const out: [Uint8Array, Uint8Array][] = [];
    for (const k of this.keys()) {
      const v = this.lookup(k);
      if (v) out.push([k, v]);
    }
    return out;
  }

  #entriesBatch(): [Uint8Array, Uint8Array][] {
    const { sym } = libbpf();
    const chunk = Math.max(1, Math.min(4096, this.maxEntries));
    const keys = new Uint8Array(chunk * this.keySize);
    const values = new Uint8Array(chunk * this.userValueSize);
    const tokenSize = Math.max(8, this.keySize);
    let inBatch: Uint8Array | null = null;
    const out: [Uint8Array, Uint8Array][] = [];
    const count = new Uint32Array(1);
    for (;;) {
      const outBatch = new Uint8Array(tokenSize);
      count[0] = chunk;
      const ret = sym.bpf_map_lookup_batch!(
        this.fd,
        inBatch,
        outBatch,
        keys,
        values,
        asBytes(count),
        batchOpts(),
      );
      if (ret < 0 && ret !== -2) check(ret, "bpf_map_lookup_batch", this.name);
      for (let i = 0; i < count[0]; i++) {
        out.push([
          keys.slice(i * this.keySize, (i + 1) * this.keySize),
          values.slice(i * this.userValueSize, (i + 1) * this.userValueSize),
        ]);
      }
      if (ret === -2) return out;
      inBatch = outBatch;
    }
  }

  /**
   * Creates or updates many elements: `keys` and `values` are the
   * concatenated elements. One syscall per 16,384 elements when the kernel
   * supports batches, one per element otherwise.
   */
  updateMany(keys: Uint8Array, values: Uint8Array, flags = BPF_ANY): void {
    const n = keys.byteLength / this.keySize;
    if (!Number.isInteger(n) || values.byteLength !== n * this.userValueSize) {
      throw new RangeError(
        `map ${this.name}: ${keys.byteLength} key bytes, ${values.byteLength} value bytes`,
      );
    }
    if (n === 0) return;
    if (!this.batchSupport().update) {
      for (let i = 0; i < n; i++) {
        this.update(
          keys.subarray(i * this.keySize, (i + 1) * this.keySize),
          values.subarray(i * this.userValueSize, (i + 1) * this.userValueSize),
          flags,
        );
      }
      return;
    }
    const { sym } = libbpf();
    const step = 16_384;
    for (let i = 0; i < n; i += step) {
      const m = Math.min(step, n - i);
      const count = new Uint32Array([m]);
      check(
        sym.bpf_map_update_batch!(
          this.fd,
          keys.subarray(i * this.keySize, (i + m) * this.keySize),
          values.subarray(i * this.userValueSize, (i + m) * this.userValueSize),
          asBytes(count),
          batchOpts(flags),
        ),
        "bpf_map_update_batch",
        this.name,
      );
    }
  }

  /** Deletes many keys (concatenated); absent keys are skipped. Returns how many were deleted. */
  deleteMany(keys: Uint8Array): number {
    const n = keys.byteLength / this.keySize;
    if (!Number.isInteger(n)) throw new RangeError(`map ${this.name}: bad key bytes`);
    let deleted = 0;
    let i = 0;
    if (this.batchSupport().delete) {
      const { sym } = libbpf();
      while (i < n) {
        const count = new Uint32Array([n - i]);
        const ret = sym.bpf_map_delete_batch!(
          this.fd,
          keys.subarray(i * this.keySize),
          asBytes(count),
          batchOpts(),
        );
        deleted += count[0];
        i += count[0];
        if (ret === 0) return deleted;
        if (ret !== -2) check(ret, "bpf_map_delete_batch", this.name);
        i++; // the key at i was absent: skip it
      }
      return deleted;
    }
    for (; i < n; i++) {
      if (this.delete(keys.subarray(i * this.keySize, (i + 1) * this.keySize))) deleted++;
    }
    return deleted;
  }

  /** Closes the fd when this object owns it. */
  close(): void {
    if (this.#ownsFd && this.#fd >= 0) libbpf().closeFd(this.#fd);
    this.#fd = -1;
  }
}

function batchOpts(elemFlags = 0): Uint8Array {
  return new Struct(BPF_MAP_BATCH_OPTS)
    .set("sz", BPF_MAP_BATCH_OPTS.size)
    .set("elem_flags", elemFlags)
    .bytes;
}

function asBytes(a: Uint32Array): Uint8Array {
  return new Uint8Array(a.buffer, a.byteOffset, a.byteLength);
}

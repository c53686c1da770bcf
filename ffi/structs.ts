/**
 * Explicit C struct layouts passed to libbpf 1.1.x (LP64: x86_64 and
 * aarch64 Linux). ffi/structs_test.ts checks every offset and size against
 * the C headers with clang's `offsetof`.
 */

/** One field: byte offset and size. */
export interface Field {
  offset: number;
  size: 1 | 2 | 4 | 8 | 16;
}

/** A struct: its total size and its fields. */
export interface StructLayout<F extends string = string> {
  /** C name (`struct <name>`). */
  name: string;
  /** Header that declares it (for the layout test). */
  header: string;
  size: number;
  fields: Record<F, Field>;
}

function layout<F extends string>(
  name: string,
  header: string,
  size: number,
  fields: Record<F, [number, Field["size"]]>,
): StructLayout<F> {
  const out = {} as Record<F, Field>;
  for (const [k, [offset, sz]] of Object.entries(fields) as [F, [number, Field["size"]]][]) {
    out[k] = { offset, size: sz };
  }
  return { name, header, size, fields: out };
}

/** `struct bpf_tc_hook` (libbpf.h). */
export const BPF_TC_HOOK = layout("bpf_tc_hook", "bpf/libbpf.h", 24, {
  sz: [0, 8],
  ifindex: [8, 4],
  attach_point: [12, 4],
  parent: [16, 4],
});

/** `struct bpf_tc_opts` (libbpf.h). */
export const BPF_TC_OPTS = layout("bpf_tc_opts", "bpf/libbpf.h", 32, {
  sz: [0, 8],
  prog_fd: [8, 4],
  flags: [12, 4],
  prog_id: [16, 4],
  handle: [20, 4],
  priority: [24, 4],
});

/** `struct bpf_map_batch_opts` (bpf.h). */
export const BPF_MAP_BATCH_OPTS = layout("bpf_map_batch_opts", "bpf/bpf.h", 24, {
  sz: [0, 8],
  elem_flags: [8, 8],
  flags: [16, 8],
});

/** `struct bpf_test_run_opts` (bpf.h). */
export const BPF_TEST_RUN_OPTS = layout("bpf_test_run_opts", "bpf/bpf.h", 80, {
  sz: [0, 8],
  data_in: [8, 8],
  data_out: [16, 8],
  data_size_in: [24, 4],
  data_size_out: [28, 4],
  ctx_in: [32, 8],
  ctx_out: [40, 8],
  ctx_size_in: [48, 4],
  ctx_size_out: [52, 4],
  retval: [56, 4],
  repeat: [60, 4],
  duration: [64, 4],
  flags: [68, 4],
  cpu: [72, 4],
  batch_size: [76, 4],
});

/**
 * `struct bpf_object_open_opts` (libbpf.h): only the leading fields we set;
 * `sz` is passed as 16 so libbpf treats the rest as zero.
 */
export const BPF_OBJECT_OPEN_OPTS = layout("bpf_object_open_opts", "bpf/libbpf.h", 80, {
  sz: [0, 8],
  object_name: [8, 8],
});

/** `struct bpf_prog_info` (linux/bpf.h, 6.1 UAPI), the fields we read. */
export const BPF_PROG_INFO = layout("bpf_prog_info", "linux/bpf.h", 232, {
  type: [0, 4],
  id: [4, 4],
  tag: [8, 8],
  load_time: [40, 8],
  created_by_uid: [48, 4],
  nr_map_ids: [52, 4],
  map_ids: [56, 8],
  name: [64, 16],
  ifindex: [80, 4],
  run_time_ns: [192, 8],
  run_cnt: [200, 8],
});

/** `struct bpf_map_info` (linux/bpf.h), the fields we read. */
export const BPF_MAP_INFO = layout("bpf_map_info", "linux/bpf.h", 88, {
  type: [0, 4],
  id: [4, 4],
  key_size: [8, 4],
  value_size: [12, 4],
  max_entries: [16, 4],
  map_flags: [20, 4],
  name: [24, 16],
});

/** Every layout, for tests. */
export const ALL_LAYOUTS: StructLayout[] = [
  BPF_TC_HOOK,
  BPF_TC_OPTS,
  BPF_MAP_BATCH_OPTS,
  BPF_TEST_RUN_OPTS,
  BPF_OBJECT_OPEN_OPTS,
  BPF_PROG_INFO,
  BPF_MAP_INFO,
];

/** A zeroed instance of a struct, with typed field access. */
export class Struct<F extends string> {
  readonly bytes: Uint8Array;
  readonly #view: DataView;

  constructor(readonly layout: StructLayout<F>) {
    this.bytes = new Uint8Array(layout.size);
    this.#view = new DataView(this.bytes.buffer);
  }

  /** Sets an integer field (1, 2, 4 or 8 bytes, host byte order). */
  set(field: F, value: number | bigint): this {
    const { offset, size } = this.layout.fields[field];
    switch (size) {
      case 1:
        this.#view.setUint8(offset, Number(value));
        break;
      case 2:
        this.#view.setUint16(offset, Number(value), true);
        break;
      case 4:
        this.#view.setUint32(offset, Number(BigInt.asUintN(32, BigInt(value))), true);
        break;
      case 8:
        this.#view.setBigUint64(offset, BigInt.asUintN(64, BigInt(value)), true);
        break;
      default:
        throw new RangeError(`field ${field} is not an integer`);
    }
    return this;
  }

  /** Sets a pointer field to a buffer's address (the buffer must outlive the call). */
  setPointer(field: F, buffer: Uint8Array | null): this {
    const ptr = buffer ? Deno.UnsafePointer.of(buffer as Uint8Array<ArrayBuffer>) : null;
    return this.set(field, ptr ? Deno.UnsafePointer.value(ptr) : 0n);
  }

  /** Reads an unsigned integer field (8-byte fields as bigint). */
  get(field: F): number {
    const { offset, size } = this.layout.fields[field];
    switch (size) {
      case 1:
        return this.#view.getUint8(offset);
      case 2:
        return this.#view.getUint16(offset, true);
      case 4:
        return this.#view.getUint32(offset, true);
      case 8:
        return Number(this.#view.getBigUint64(offset, true));
      default:
        throw new RangeError(`field ${field} is not an integer`);
    }
  }

  /** Reads a signed 32-bit field. */
  getInt32(field: F): number {
    return this.#view.getInt32(this.layout.fields[field].offset, true);
  }

  /** Raw bytes of a field. */
  raw(field: F): Uint8Array {
    const { offset, size } = this.layout.fields[field];
    return this.bytes.subarray(offset, offset + size);
  }

  /** A NUL-terminated string field. */
  string(field: F): string {
    const raw = this.raw(field);
    const end = raw.indexOf(0);
    return new TextDecoder().decode(end < 0 ? raw : raw.subarray(0, end));
  }
}

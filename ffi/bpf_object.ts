/** An eBPF object file opened from memory, loaded, with its programs and maps. */

import { BpfMap } from "./bpf_map.ts";
import {
  BpfError,
  check,
  checkPointer,
  clearLibbpfLog,
  cString,
  libbpf,
  libbpfLog,
  readCString,
} from "./libbpf.ts";
import { BPF_OBJECT_OPEN_OPTS, BPF_TEST_RUN_OPTS, Struct } from "./structs.ts";

/** A program of a loaded object. */
export interface BpfProgram {
  name: string;
  fd: number;
  /** libbpf's `struct bpf_program *` (valid while the object is open). */
  handle: Deno.PointerObject;
}

/** `enum bpf_attach_type` values used by tcx. */
export const BPF_TCX_INGRESS = 46;
/** tcx egress. */
export const BPF_TCX_EGRESS = 47;

/**
 * A `struct bpf_object`. Lifecycle: `openMem` → optional `setMaxEntries` /
 * `setExpectedAttachType` → `load` → use → `close` (frees programs and
 * maps unless something else, e.g. a tc filter, still holds them).
 */
export class BpfObject {
  #obj: Deno.PointerObject | null;
  /** libbpf reads the ELF image in place until load: keep it referenced. */
  readonly #bytes: Uint8Array;
  #loaded = false;
  readonly #maps = new Map<string, BpfMap>();

  private constructor(obj: Deno.PointerObject, bytes: Uint8Array) {
    this.#obj = obj;
    this.#bytes = bytes;
  }

  /** Opens an ELF object held in memory (nothing reaches the kernel yet). */
  static openMem(bytes: Uint8Array, options: { name?: string } = {}): BpfObject {
    const { sym } = libbpf();
    // libbpf keeps a pointer to the buffer until load: hold our own copy.
    const copy = bytes.slice();
    const name = cString(options.name ?? "podmin");
    const opts = new Struct(BPF_OBJECT_OPEN_OPTS).set("sz", 16).setPointer("object_name", name);
    clearLibbpfLog();
    const obj = checkPointer(
      sym.bpf_object__open_mem(copy, BigInt(copy.byteLength), opts.bytes),
      "bpf_object__open_mem",
      options.name,
    );
    return new BpfObject(obj, copy);
  }

  #handle(): Deno.PointerObject {
    if (!this.#obj) throw new BpfError("bpf_object", 9, { detail: "closed" });
    return this.#obj;
  }

  #mapHandle(name: string): Deno.PointerObject {
    const ptr = libbpf().sym.bpf_object__find_map_by_name(this.#handle(), cString(name));
    if (ptr === null) throw new BpfError("bpf_object__find_map_by_name", 2, { detail: name });
    return ptr;
  }

  #progHandle(name: string): Deno.PointerObject {
    const ptr = libbpf().sym.bpf_object__find_program_by_name(this.#handle(), cString(name));
    if (ptr === null) {
      throw new BpfError("bpf_object__find_program_by_name", 2, { detail: name });
    }
    return ptr;
  }

  /** Names of the object's programs. */
  programNames(): string[] {
    const { sym } = libbpf();
    const out: string[] = [];
    for (let p = sym.bpf_object__next_program(this.#handle(), null); p !== null;) {
      out.push(readCString(sym.bpf_program__name(p)));
      p = sym.bpf_object__next_program(this.#handle(), p);
    }
    return out;
  }

  /** Names of the object's maps. */
  mapNames(): string[] {
    const { sym } = libbpf();
    const out: string[] = [];
    for (let m = sym.bpf_object__next_map(this.#handle(), null); m !== null;) {
      out.push(readCString(sym.bpf_map__name(m)));
      m = sym.bpf_object__next_map(this.#handle(), m);
    }
    return out;
  }

  /** Key size, value size, type and capacity of a map as declared (before or after load). */
  mapShape(name: string): { type: number; keySize: number; valueSize: number; maxEntries: number } {
    const { sym } = libbpf();
    const m = this.#mapHandle(name);
    return {
      type: sym.bpf_map__type(m),
      keySize: sym.bpf_map__key_size(m),
      valueSize: sym.bpf_map__value_size(m),
      maxEntries: sym.bpf_map__max_entries(m),
    };
  }

  /** Changes a map's capacity (before `load`). */
  setMaxEntries(name: string, maxEntries: number): void {
    check(
      libbpf().sym.bpf_map__set_max_entries(this.#mapHandle(name), maxEntries),
      "bpf_map__set_max_entries",
      name,
    );
  }

  /** Sets a program's expected attach type (before `load`; tcx needs it). */
  setExpectedAttachType(program: string, attachType: number): void {
    check(
      libbpf().sym.bpf_program__set_expected_attach_type(this.#progHandle(program), attachType),
      "bpf_program__set_expected_attach_type",
      program,
    );
  }

  /** Creates the maps and loads the programs into the kernel. */
  load(): void {
    clearLibbpfLog();
    const ret = libbpf().sym.bpf_object__load(this.#handle());
    if (ret < 0) throw new BpfError("bpf_object__load", -ret, { log: libbpfLog() });
    this.#loaded = true;
  }

  /** A loaded program. */
  program(name: string): BpfProgram {
    const handle = this.#progHandle(name);
    const fd = libbpf().sym.bpf_program__fd(handle);
    if (!this.#loaded || fd < 0) throw new BpfError("bpf_program__fd", 9, { detail: name });
    return { name, fd, handle };
  }

  /** A loaded map (the fd belongs to the object). */
  map(name: string): BpfMap {
    const cached = this.#maps.get(name);
    if (cached) return cached;
    const handle = this.#mapHandle(name);
    const fd = libbpf().sym.bpf_map__fd(handle);
    if (!this.#loaded || fd < 0) throw new BpfError("bpf_map__fd", 9, { detail: name });
    const map = new BpfMap(fd, { name, ...this.mapShape(name) });
    this.#maps.set(name, map);
    return map;
  }

  /** Closes the object: its fds are closed and its programs/maps freed when unused. */
  close(): void {
    if (!this.#obj) return;
    for (const m of this.#maps.values()) m.close();
    this.#maps.clear();
    libbpf().sym.bpf_object__close(this.#obj);
    this.#obj = null;
  }
}

/** The outcome of `bpf_prog_test_run_opts`. */
export interface TestRunResult {
  /** The program's return value. */
  retval: number;
  /** Mean run time per repetition, in nanoseconds (kernel-measured). */
  durationNs: number;
  /** The packet after the program ran. */
  dataOut: Uint8Array;
}

/** Runs a loaded program on a packet in the kernel (`BPF_PROG_TEST_RUN`). */
export function progTestRun(
  progFd: number,
  data: Uint8Array,
  options: { repeat?: number } = {},
): TestRunResult {
  const dataOut = new Uint8Array(data.byteLength + 256);
  const opts = new Struct(BPF_TEST_RUN_OPTS)
    .set("sz", BPF_TEST_RUN_OPTS.size)
    .setPointer("data_in", data)
    .set("data_size_in", data.byteLength)
    .setPointer("data_out", dataOut)
    .set("data_size_out", dataOut.byteLength)
    .set("repeat", options.repeat ?? 1);
  check(libbpf().sym.bpf_prog_test_run_opts(progFd, opts.bytes), "bpf_prog_test_run_opts");
  return {
    retval: opts.getInt32("retval"),
    durationNs: opts.get("duration"),
    dataOut: dataOut.slice(0, opts.get("data_size_out")),
  };
}

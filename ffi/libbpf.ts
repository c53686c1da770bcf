/**
 * `libbpf.so.1` through `Deno.dlopen` (needs `--allow-ffi`).
 *
 * libbpf ≥ 1.0 semantics: functions returning `int` return a negative errno;
 * functions returning a pointer return NULL and set errno, which
 * `libbpf_get_error` reads back on the same thread right after the call.
 * Every failure becomes a `BpfError` carrying the errno name.
 *
 * Symbols added after libbpf 1.1 (tcx) are resolved as optional: `null`
 * when the installed library does not have them.
 */

import { PodminError } from "../core/kit/errors.ts";
import { errnoName } from "./errno.ts";

/** A libbpf or bpf() failure, with the errno as a name (e.g. `ENOENT`). */
export class BpfError extends PodminError {
  /** Symbolic errno, e.g. `ENOENT`, `EPERM`, `LIBBPF_ERRNO__VERIFY`. */
  readonly errno: string;
  /** Positive errno number. */
  readonly code: number;
  /** The libbpf function that failed. */
  readonly op: string;
  /** libbpf's log lines around the failure (the verifier log on a load error). */
  readonly log: string[];

  constructor(
    op: string,
    code: number,
    options: { detail?: string; log?: string[]; hint?: string } = {},
  ) {
    const errno = errnoName(code);
    super(`${op}${options.detail ? ` (${options.detail})` : ""} failed: ${errno}`, {
      hint: options.hint ?? hintFor(errno),
    });
    this.errno = errno;
    this.code = Math.abs(code);
    this.op = op;
    this.log = options.log ?? [];
  }
}

function hintFor(errno: string): string | undefined {
  switch (errno) {
    case "EPERM":
    case "EACCES":
      return "eBPF needs root (CAP_BPF, CAP_NET_ADMIN, CAP_SYS_ADMIN)";
    case "LIBBPF_ERRNO__VERIFY":
    case "LIBBPF_ERRNO__LOAD":
      return "the kernel verifier rejected the program; the error's log has the verifier output";
    default:
      return undefined;
  }
}

const SYMBOLS = {
  libbpf_major_version: { parameters: [], result: "u32" },
  libbpf_minor_version: { parameters: [], result: "u32" },
  libbpf_get_error: { parameters: ["pointer"], result: "i64" },
  libbpf_set_print: { parameters: ["function"], result: "function" },

  bpf_object__open_mem: { parameters: ["buffer", "usize", "buffer"], result: "pointer" },
  bpf_object__load: { parameters: ["pointer"], result: "i32" },
  bpf_object__close: { parameters: ["pointer"], result: "void" },
  bpf_object__find_program_by_name: { parameters: ["pointer", "buffer"], result: "pointer" },
  bpf_object__find_map_by_name: { parameters: ["pointer", "buffer"], result: "pointer" },
  bpf_object__next_program: { parameters: ["pointer", "pointer"], result: "pointer" },
  bpf_object__next_map: { parameters: ["pointer", "pointer"], result: "pointer" },

  bpf_program__name: { parameters: ["pointer"], result: "pointer" },
  bpf_program__fd: { parameters: ["pointer"], result: "i32" },
  bpf_program__set_expected_attach_type: { parameters: ["pointer", "u32"], result: "i32" },

  bpf_map__name: { parameters: ["pointer"], result: "pointer" },
  bpf_map__fd: { parameters: ["pointer"], result: "i32" },
  bpf_map__type: { parameters: ["pointer"], result: "u32" },
  bpf_map__key_size: { parameters: ["pointer"], result: "u32" },
  bpf_map__value_size: { parameters: ["pointer"], result: "u32" },
  bpf_map__max_entries: { parameters: ["pointer"], result: "u32" },
  bpf_map__set_max_entries: { parameters: ["pointer", "u32"], result: "i32" },

  bpf_map_update_elem: { parameters: ["i32", "buffer", "buffer", "u64"], result: "i32" },
  bpf_map_lookup_elem: { parameters: ["i32", "buffer", "buffer"], result: "i32" },
  bpf_map_delete_elem: { parameters: ["i32", "buffer"], result: "i32" },
  bpf_map_get_next_key: { parameters: ["i32", "buffer", "buffer"], result: "i32" },
  bpf_map_lookup_batch: {
    parameters: ["i32", "buffer", "buffer", "buffer", "buffer", "buffer", "buffer"],
    result: "i32",
    optional: true,
  },
  bpf_map_update_batch: {
    parameters: ["i32", "buffer", "buffer", "buffer", "buffer"],
    result: "i32",
    optional: true,
  },
  bpf_map_delete_batch: {
    parameters: ["i32", "buffer", "buffer", "buffer"],
    result: "i32",
    optional: true,
  },

  bpf_tc_hook_create: { parameters: ["buffer"], result: "i32" },
  bpf_tc_hook_destroy: { parameters: ["buffer"], result: "i32" },
  bpf_tc_attach: { parameters: ["buffer", "buffer"], result: "i32" },
  bpf_tc_detach: { parameters: ["buffer", "buffer"], result: "i32" },
  bpf_tc_query: { parameters: ["buffer", "buffer"], result: "i32" },

  bpf_prog_get_next_id: { parameters: ["u32", "buffer"], result: "i32" },
  bpf_map_get_next_id: { parameters: ["u32", "buffer"], result: "i32" },
  bpf_prog_get_fd_by_id: { parameters: ["u32"], result: "i32" },
  bpf_map_get_fd_by_id: { parameters: ["u32"], result: "i32" },
  bpf_obj_get_info_by_fd: { parameters: ["i32", "buffer", "buffer"], result: "i32" },
  bpf_prog_test_run_opts: { parameters: ["i32", "buffer"], result: "i32" },

  bpf_link__destroy: { parameters: ["pointer"], result: "i32" },
  bpf_program__attach_cgroup: { parameters: ["pointer", "i32"], result: "pointer" },
  bpf_prog_query: {
    parameters: ["i32", "u32", "u32", "buffer", "buffer", "buffer"],
    result: "i32",
  },
  bpf_enable_stats: { parameters: ["i32"], result: "i32" },
  // libbpf ≥ 1.3 (kernel ≥ 6.6): tcx links. Absent in 1.1.2.
  bpf_program__attach_tcx: {
    parameters: ["pointer", "i32", "pointer"],
    result: "pointer",
    optional: true,
  },
} as const satisfies Deno.ForeignLibraryInterface;

const LIBC_SYMBOLS = {
  close: { parameters: ["i32"], result: "i32" },
  vsnprintf: { parameters: ["buffer", "usize", "pointer", "pointer"], result: "i32" },
} as const satisfies Deno.ForeignLibraryInterface;

/** The bound library. */
export type LibbpfSymbols = Deno.DynamicLibrary<typeof SYMBOLS>["symbols"];

/** The library, its version and what optional features it has. */
export interface Libbpf {
  sym: LibbpfSymbols;
  /** e.g. "1.1". */
  version: string;
  /** The library has tcx attach (`bpf_program__attach_tcx`, libbpf ≥ 1.3). */
  hasTcx: boolean;
  /** The library has the batch map operations (the kernel may still refuse them per map). */
  hasBatch: boolean;
  /** Closes a file descriptor (libc). */
  closeFd(fd: number): void;
}

const LOG_LINES = 400;
let lib: Libbpf | undefined;
const logRing: string[] = [];
const PRINT_DEFINITION = {
  parameters: ["i32", "pointer", "pointer"],
  result: "i32",
} as const satisfies Deno.UnsafeCallbackDefinition;
// Callbacks libbpf keeps calling: referenced for the life of the process.
const keepAlive: Deno.UnsafeCallback<typeof PRINT_DEFINITION>[] = [];

/** Opens `libbpf.so.1` once per process. Throws a `BpfError` hint when it is missing. */
export function libbpf(): Libbpf {
  if (lib) return lib;
  let dl: Deno.DynamicLibrary<typeof SYMBOLS>;
  let libc: Deno.DynamicLibrary<typeof LIBC_SYMBOLS>;
  try {
    dl = Deno.dlopen("libbpf.so.1", SYMBOLS);
    libc = Deno.dlopen("libc.so.6", LIBC_SYMBOLS);
  } catch (err) {
    throw new PodminError(`cannot load libbpf.so.1: ${(err as Error).message}`, {
      hint: "install libbpf 1.x (Debian: apt-get install libbpf1) and run with --allow-ffi",
      cause: err,
    });
  }
  const sym = dl.symbols;
  // libbpf's messages (warnings, the verifier log) go to a ring buffer that
  // errors quote, instead of the process's stderr.
  const buf = new Uint8Array(8192);
  const callback = new Deno.UnsafeCallback(
    PRINT_DEFINITION,
    (level: number, fmt: Deno.PointerValue, args: Deno.PointerValue) => {
      if (level > 1 || fmt === null) return 0;
      const n = libc.symbols.vsnprintf(buf, BigInt(buf.length), fmt, args);
      const text = new TextDecoder().decode(
        buf.subarray(0, Math.max(0, Math.min(n, buf.length - 1))),
      );
      for (const line of text.split("\n")) {
        if (line.trim() === "") continue;
        logRing.push(line);
        if (logRing.length > LOG_LINES) logRing.shift();
      }
      return 0;
    },
  );
  keepAlive.push(callback);
  sym.libbpf_set_print(callback.pointer);
  lib = {
    sym,
    version: `${sym.libbpf_major_version()}.${sym.libbpf_minor_version()}`,
    hasTcx: sym.bpf_program__attach_tcx !== null,
    hasBatch: sym.bpf_map_update_batch !== null && sym.bpf_map_lookup_batch !== null &&
      sym.bpf_map_delete_batch !== null,
    closeFd: (fd) => {
      if (fd >= 0) libc.symbols.close(fd);
    },
  };
  return lib;
}

/** Empties libbpf's log ring (call before an operation whose log you want). */
export function clearLibbpfLog(): void {
  logRing.length = 0;
}

/** libbpf's recent log lines. */
export function libbpfLog(): string[] {
  return [...logRing];
}

/** Throws a `BpfError` when `ret` is negative; returns it otherwise. */
export function check(ret: number, op: string, detail?: string): number {
  if (ret < 0) throw new BpfError(op, -ret, { detail });
  return ret;
}

/** Throws a `BpfError` (errno from libbpf_get_error) when `ptr` is NULL. */
export function checkPointer(
  ptr: Deno.PointerValue,
  op: string,
  detail?: string,
): Deno.PointerObject {
  if (ptr === null) {
    const err = Number(libbpf().sym.libbpf_get_error(null));
    throw new BpfError(op, err === 0 ? 2 : -err, { detail, log: libbpfLog() });
  }
  return ptr;
}

/** NUL-terminated C string of a JS string. */
export function cString(s: string): Uint8Array {
  return new TextEncoder().encode(`${s}\0`);
}

/** Reads a C string. */
export function readCString(ptr: Deno.PointerValue): string {
  return ptr === null ? "" : new Deno.UnsafePointerView(ptr).getCString();
}

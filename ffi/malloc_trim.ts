/**
 * Returns the C allocator's free memory to the operating system: glibc's `malloc_trim(0)` through
 * `Deno.dlopen` (needs `--allow-ffi`).
 *
 * Why the agent needs it (measured, docs/benchmarks.md "Agent footprint"): the runtime's native allocations
 * (HTTP clients, TLS, the gRPC sessions of the endpoint mesh) go through glibc's malloc, which
 * keeps freed memory in its heaps. After an agent with the mesh read 1,000 Services, its `[heap]`
 * mapping held 48 MiB, of which one `malloc_trim(0)` returned 28 MiB (126 → 96 MiB RSS); the
 * JavaScript heap was 17 MiB throughout.
 */

const SYMBOLS = {
  malloc_trim: { parameters: ["usize"], result: "i32" },
} as const satisfies Deno.ForeignLibraryInterface;

let libc: Deno.DynamicLibrary<typeof SYMBOLS> | null | undefined;

/** Whether the C library's `malloc_trim` can be called here (glibc, `--allow-ffi`). */
export function canTrimMalloc(): boolean {
  if (libc === undefined) {
    try {
      libc = Deno.dlopen("libc.so.6", SYMBOLS);
    } catch {
      libc = null; // no glibc (musl, another OS) or no FFI permission: nothing to trim with
    }
  }
  return libc !== null;
}

/**
 * Asks glibc to return free heap memory to the system; false where that is not possible
 * (`canTrimMalloc`). Costs a walk over the allocator's free chunks (under a millisecond for
 * tens of MiB).
 */
export function trimMalloc(): boolean {
  if (!canTrimMalloc()) return false;
  libc!.symbols.malloc_trim(0n);
  return true;
}

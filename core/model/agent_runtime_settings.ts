/**
 * The process settings podmin-agent runs with, wherever it runs: V8 flags and the C allocator's
 * environment. One owner for them; the places that start the agent outside TypeScript repeat them
 * literally and `agent_runtime_settings_test.ts` holds those copies to these values:
 *
 * - `cli/build.sh` compiles the flags into the binaries (`deno compile --v8-flags=…`);
 * - `vmconfig/bin/install.sh`'s launcher passes them to the pinned runtime with the bundle;
 * - `vmconfig/units/podmin-agent.service` sets the environment.
 *
 * Measured (docs/benchmarks.md, "Agent footprint"): with 1,000 Deployments and 1,000 Services, on a busy
 * machine, the bundle's RSS was 148–162 MiB with the defaults and 86 MiB with both settings, its JS
 * heap 26 MiB either way (on a quiet machine both were 81 MiB). The heap is not the cost: glibc
 * gives each thread that allocates under contention an arena of its own, and V8's default young
 * generation reserves up to 16 MiB per semi-space.
 */

/** V8 flags: a 1 MiB young-generation semi-space (scavenges more often, each one small). */
export const AGENT_V8_FLAGS: readonly string[] = ["--max-semi-space-size=1"];

/**
 * Environment for the agent's process: at most two glibc malloc arenas, and a fixed mmap
 * threshold of 1 MiB. Setting it turns off glibc's dynamic threshold, which after the first large
 * free serves allocations of up to 32 MiB from the heap and keeps them: measured 67.0 → 62 MiB
 * RSS for the agent on an empty bucket. 1 MiB rather than glibc's initial 128 KiB: with 128 KiB
 * every 256 KiB read buffer of the filesystem store was a fresh mmap, and the registry's CPU per
 * GiB served from a filesystem bucket rose by half (same RSS either way).
 */
export const AGENT_ENV: Readonly<Record<string, string>> = {
  MALLOC_ARENA_MAX: "2",
  MALLOC_MMAP_THRESHOLD_: "1048576",
};

/** `--v8-flags=…` for `deno run` / `deno compile`. */
export function agentV8FlagsArg(): string {
  return `--v8-flags=${AGENT_V8_FLAGS.join(",")}`;
}

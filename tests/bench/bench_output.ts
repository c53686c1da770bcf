/**
 * How a benchmark hands its figures to `tests/bench/run_all.ts`: with `$PODMIN_BENCH_JSON` set,
 * `recordFigures` merges them into that file (a flat object of numbers); `$PODMIN_BENCH_SMOKE=1`
 * asks for tiny sizes (figures present, not meaningful).
 */

import { dirname } from "node:path";

/** File the figures are merged into (set by run_all.ts). */
export const BENCH_JSON_ENV = "PODMIN_BENCH_JSON";
/** `1`: smoke run, tiny sizes. */
export const BENCH_SMOKE_ENV = "PODMIN_BENCH_SMOKE";

/** True in a smoke run. */
export function benchSmoke(): boolean {
  return Deno.env.get(BENCH_SMOKE_ENV) === "1";
}

/**
 * Merges figures into `$PODMIN_BENCH_JSON` when it is set, else into `standalone` when given (a
 * benchmark run on its own that keeps its figures, e.g. bench/results.json), else does nothing.
 */
export async function recordFigures(
  figures: Record<string, number>,
  options: { standalone?: string } = {},
): Promise<void> {
  const file = Deno.env.get(BENCH_JSON_ENV) ?? options.standalone;
  if (!file) return;
  await Deno.mkdir(dirname(file), { recursive: true });
  let current: Record<string, number> = {};
  try {
    current = JSON.parse(await Deno.readTextFile(file));
  } catch { /* first figures */ }
  await Deno.writeTextFile(file, JSON.stringify({ ...current, ...figures }, null, 2) + "\n");
}

/** The p-th percentile of ascending numbers. */
export function percentile(sorted: number[], p: number): number {
  if (!sorted.length) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
}

/** The median of numbers (any order). */
export function median(xs: number[]): number {
  return percentile([...xs].sort((a, b) => a - b), 50);
}

/**
 * CPU seconds a process has used so far, all its live threads summed, in nanosecond resolution
 * (the schedstat of every task in /proc/PID/task; the tick counts of /proc/PID/stat are too coarse for short runs).
 */
export async function processCpuSeconds(pid: number): Promise<number> {
  let ns = 0;
  for await (const t of Deno.readDir(`/proc/${pid}/task`)) {
    try {
      ns += Number(
        (await Deno.readTextFile(`/proc/${pid}/task/${t.name}/schedstat`)).split(" ")[0],
      );
    } catch { /* the thread ended meanwhile */ }
  }
  return ns / 1e9;
}

/**
 * How the CLI prints: the `-o`/`--output` flag checked against a command's formats, aligned tables
 * and kubectl-style ages. Every command that prints a listing goes through here.
 */

import { closest, type CommandContext, stringFlag } from "../core/kit/cli_kit.ts";
import { UsageError } from "../core/kit/errors.ts";

/**
 * The `-o` value, one of `formats` (`fallback` when not given); a usage error naming the nearest
 * format otherwise.
 */
export function outputFormat<T extends string>(
  ctx: CommandContext,
  options: { formats: readonly T[]; fallback: T },
): T {
  const output = stringFlag(ctx, "output") ?? options.fallback;
  if ((options.formats as readonly string[]).includes(output)) return output as T;
  const near = closest(output, options.formats);
  throw new UsageError(
    `-o: unknown output format ${JSON.stringify(output)}${near ? `; did you mean ${near}?` : ""}`,
    { hint: `use ${options.formats.join(", ")}` },
  );
}

/**
 * Aligned columns, `gap` spaces apart (default 3), each at least its `minWidths` entry wide; no
 * line ends in a space.
 */
export function table(
  rows: string[][],
  options: { gap?: number; minWidths?: number[] } = {},
): string[] {
  const gap = " ".repeat(options.gap ?? 3);
  const widths = rows[0].map((_, i) =>
    Math.max(options.minWidths?.[i] ?? 0, ...rows.map((r) => r[i].length))
  );
  return rows.map((r) => r.map((c, i) => c.padEnd(widths[i])).join(gap).trimEnd());
}

/**
 * A duration as kubectl prints ages: 45s, 3m, 2h, 4d. Negative durations (a clock ahead of ours)
 * print as 0s unless `signed`, which keeps the sign (`-5s`).
 */
export function formatAge(ms: number, options: { signed?: boolean } = {}): string {
  const sign = options.signed && ms < 0 ? "-" : "";
  const s = options.signed ? Math.floor(Math.abs(ms) / 1000) : Math.max(0, Math.floor(ms / 1000));
  if (s < 120) return `${sign}${s}s`;
  if (s < 7200) return `${sign}${Math.floor(s / 60)}m`;
  if (s < 172800) return `${sign}${Math.floor(s / 3600)}h`;
  return `${sign}${Math.floor(s / 86400)}d`;
}

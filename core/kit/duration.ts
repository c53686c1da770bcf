/** Parses operator durations: "500ms", "2s", "5m", "1h" (or a bare number of seconds). */

import { UsageError } from "./errors.ts";

/** Returns milliseconds. */
export function parseDuration(text: string, flag = "duration"): number {
  const m = /^(\d+(?:\.\d+)?)(ms|s|m|h)?$/.exec(text.trim());
  if (!m) {
    throw new UsageError(`invalid ${flag} ${JSON.stringify(text)}`, {
      hint: "use a number with a unit: 500ms, 2s, 5m, 1h",
    });
  }
  const n = Number(m[1]);
  const unit = m[2] ?? "s";
  return Math.round(n * { ms: 1, s: 1000, m: 60_000, h: 3_600_000 }[unit]!);
}

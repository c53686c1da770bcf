/**
 * Podmin's JSON log lines (`{"ts","level","component","msg",…}`) for people:
 * `12:00:01.250 info  agent  manifest written  file=x.json`. Other lines pass unchanged.
 * Run as a filter: `podmin-agent run … 2>&1 | deno run cli/log_lines.ts`.
 */

import { forEachLine } from "../core/kit/stream_lines.ts";

/** One log line in readable form. */
export function readableLogLine(line: string): string {
  let entry: unknown;
  try {
    entry = JSON.parse(line);
  } catch {
    return line;
  }
  if (entry === null || typeof entry !== "object" || Array.isArray(entry)) return line;
  const { ts, level, component, msg, ...fields } = entry as Record<string, unknown>;
  if (typeof msg !== "string") return line;
  const time = typeof ts === "string" && /T\d\d:\d\d:\d\d\.\d{3}/.test(ts) ? ts.slice(11, 23) : "";
  const extra = Object.entries(fields).map(([k, v]) =>
    `${k}=${typeof v === "string" && !/\s/.test(v) ? v : JSON.stringify(v)}`
  ).join(" ");
  return [time, level, component, msg, extra].filter((p) => p !== undefined && p !== "")
    .join("  ");
}

if (import.meta.main) {
  await forEachLine(Deno.stdin.readable, (l) => console.log(readableLogLine(l)));
}

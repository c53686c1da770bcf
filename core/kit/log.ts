/** Structured logging: one JSON object per line on stderr. */

/** Log severity. */
export type Level = "debug" | "info" | "warn" | "error";

/** A logger bound to a component name. */
export interface Logger {
  debug(msg: string, fields?: Record<string, unknown>): void;
  info(msg: string, fields?: Record<string, unknown>): void;
  warn(msg: string, fields?: Record<string, unknown>): void;
  error(msg: string, fields?: Record<string, unknown>): void;
}

const ORDER: Record<Level, number> = { debug: 0, info: 1, warn: 2, error: 3 };

/** Creates a logger writing JSON lines through `sink` (default: stderr). */
export function createLogger(
  component: string,
  options: { level?: Level; sink?: (line: string) => void } = {},
): Logger {
  const min = ORDER[options.level ?? (Deno.env.get("PODMIN_LOG_LEVEL") as Level) ?? "info"] ?? 1;
  const sink = options.sink ?? ((line: string) => console.error(line));
  const emit = (level: Level, msg: string, fields?: Record<string, unknown>) => {
    if (ORDER[level] < min) return;
    sink(JSON.stringify({ ts: new Date().toISOString(), level, component, msg, ...fields }));
  };
  return {
    debug: (m, f) => emit("debug", m, f),
    info: (m, f) => emit("info", m, f),
    warn: (m, f) => emit("warn", m, f),
    error: (m, f) => emit("error", m, f),
  };
}

/** A logger that drops everything (tests, library use). */
export const silentLogger: Logger = createLogger("silent", { sink: () => {} });

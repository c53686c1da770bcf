/**
 * Logs a loop's problems once per kind instead of once per pass: the first occurrence (error),
 * a summary while it persists (warn, at most once per `summaryEveryMs`), and the recovery (info).
 *
 * A problem line reads `SUBJECT: DETAIL` (e.g. `reading deployments/index.json: … socket hang
 * up`); its kind is the subject, so a detail that alternates ("socket hang up" / "ECONNRESET")
 * is one kind, not a new error each pass.
 */

import type { Logger } from "../core/kit/log.ts";

/** Options of `ErrorLog`. */
export interface ErrorLogOptions {
  log: Logger;
  /** Minimum interval between two summaries of one persisting kind (default 5 min). */
  summaryEveryMs?: number;
  /** Clock (default Date.now). */
  now?: () => number;
}

interface Active {
  since: number;
  occurrences: number;
  lastSummary: number;
  last: string;
}

/** The kind of a problem line: its subject, the text before the first ": ". */
export function problemKind(line: string): string {
  const i = line.indexOf(": ");
  return i < 0 ? line : line.slice(0, i);
}

/** Deduplicating logger of a loop's problems; call `update` after every pass. */
export class ErrorLog {
  readonly #options: ErrorLogOptions;
  readonly #active = new Map<string, Active>();

  constructor(options: ErrorLogOptions) {
    this.#options = options;
  }

  /** Kinds currently failing. */
  get active(): string[] {
    return [...this.#active.keys()];
  }

  /** Reports this pass's problems (empty when the pass was clean). */
  update(problems: string[]): void {
    const { log } = this.#options;
    const now = (this.#options.now ?? Date.now)();
    const every = this.#options.summaryEveryMs ?? 5 * 60_000;
    const current = new Map<string, string>();
    for (const p of problems) if (!current.has(problemKind(p))) current.set(problemKind(p), p);
    for (const [kind, a] of this.#active) {
      if (current.has(kind)) continue;
      log.info("recovered", {
        kind,
        occurrences: a.occurrences,
        since: new Date(a.since).toISOString(),
      });
      this.#active.delete(kind);
    }
    for (const [kind, message] of current) {
      const a = this.#active.get(kind);
      if (!a) {
        log.error("problem", { kind, error: message });
        this.#active.set(kind, { since: now, occurrences: 1, lastSummary: now, last: message });
        continue;
      }
      a.occurrences++;
      a.last = message;
      if (now - a.lastSummary >= every) {
        log.warn("problem persists", {
          kind,
          occurrences: a.occurrences,
          since: new Date(a.since).toISOString(),
          last: message,
        });
        a.lastSummary = now;
      }
    }
  }
}

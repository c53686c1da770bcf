/** Progress lines for long transfers, on stderr, at most one per second per item. */

/** Formats a byte count for people. */
export function formatBytes(n: number): string {
  if (n < 1024) return `${n} B`;
  const units = ["KiB", "MiB", "GiB", "TiB"];
  let v = n / 1024, i = 0;
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024;
    i++;
  }
  return `${v.toFixed(1)} ${units[i]}`;
}

/** A progress reporter: `update(bytes)` as data flows, `done()` at the end. */
export interface Progress {
  update(bytes: number): void;
  done(): void;
}

/**
 * Reports `label: 12.0 MiB / 40.0 MiB (30%)` lines through `write`, throttled
 * to one per `intervalMs`; items smaller than `minBytes` report only `done`.
 */
export function progress(
  label: string,
  total: number | undefined,
  options: { write?: (line: string) => void; intervalMs?: number; minBytes?: number } = {},
): Progress {
  const write = options.write ?? ((l: string) => console.error(l));
  const interval = options.intervalMs ?? 1000;
  const quiet = total !== undefined && total < (options.minBytes ?? 8 * 1024 * 1024);
  let last = 0;
  let seen = 0;
  const line = (n: number) =>
    total
      ? `${label}: ${formatBytes(n)} / ${formatBytes(total)} (${Math.floor((n / total) * 100)}%)`
      : `${label}: ${formatBytes(n)}`;
  return {
    update(bytes) {
      seen = bytes;
      const now = Date.now();
      if (quiet || now - last < interval) return;
      last = now;
      write(line(bytes));
    },
    done() {
      write(`${label}: ${formatBytes(total ?? seen)} done`);
    },
  };
}

const SIZE = String.raw`\d+(\.\d)? (B|KiB|MiB|GiB|TiB)`;
const UPDATE = new RegExp(`: ${SIZE}( / ${SIZE} \\(\\d+%\\))?$`);

/**
 * True for an intermediate line of `progress` (`label: 12.0 MiB / 40.0 MiB (30%)`), which a
 * terminal may redraw in place; false for its `done` line and any other line.
 */
export function isProgressUpdate(line: string): boolean {
  return UPDATE.test(line);
}

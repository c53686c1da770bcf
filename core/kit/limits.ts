/**
 * Size ceilings of everything Podmin reads from an operator or from the bucket (spec §5.6). Each
 * is checked before the bytes are parsed, and a breach is a `TooLargeError` naming the limit.
 */

import { ValidationError } from "./errors.ts";

const KiB = 1024;
const MiB = 1024 * KiB;

/** The ceilings, in bytes. */
export const LIMITS = {
  /** One operator resource as canonical JSON (Kubernetes' API server allows about 1.5 MiB). */
  resourceBytes: 1 * MiB,
  /** One resource file given with `-f` (or stdin), read before YAML parsing. */
  resourceFileBytes: 8 * MiB,
  /** One spec object read from the bucket: a canonical resource, so the resource ceiling. */
  specBytes: 1 * MiB,
  /** An index object read from the bucket (`deployments/index.json`, the Service index). */
  indexBytes: 16 * MiB,
  /** One provider value (Secrets Manager's own maximum is 64 KiB, Parameter Store's 8 KiB). */
  valueBytes: 64 * KiB,
} as const;

/** Data over one of the `LIMITS`. */
export class TooLargeError extends ValidationError {}

/** Formats a byte count as the limits are written: `1 MiB`, `64 KiB`, `123 bytes`. */
export function formatBytes(n: number): string {
  if (n >= MiB && n % MiB === 0) return `${n / MiB} MiB`;
  if (n >= KiB && n % KiB === 0) return `${n / KiB} KiB`;
  if (n >= MiB) return `${(n / MiB).toFixed(1)} MiB`;
  return `${n} bytes`;
}

/** Throws `TooLargeError` when `size` exceeds `limit`. `size` may be a lower bound ("over"). */
export function checkSize(
  options: { what: string; size: number; limit: number; hint?: string },
): void {
  if (options.size <= options.limit) return;
  throw new TooLargeError(
    `${options.what} is ${formatBytes(options.size)}, over the limit of ${
      formatBytes(options.limit)
    }`,
    { hint: options.hint },
  );
}

/** Bounded retries with full-jitter exponential backoff, for transient errors only. */

import { isRetryable } from "./errors.ts";

/** How a retried operation backs off. */
export interface RetryPolicy {
  /** Total attempts including the first; 1 disables retries. */
  attempts: number;
  /** Backoff cap of the first retry, in milliseconds. */
  baseMs: number;
  /** Upper bound of any single backoff, in milliseconds. */
  maxMs: number;
}

/** Default policy of store operations: 4 attempts, 100 ms .. 2 s. */
export const DEFAULT_RETRY: RetryPolicy = { attempts: 4, baseMs: 100, maxMs: 2000 };

/** The backoff before retry number `retry` (0-based), full jitter. */
export function backoffMs(policy: RetryPolicy, retry: number, random = Math.random): number {
  const cap = Math.min(policy.maxMs, policy.baseMs * 2 ** retry);
  return Math.floor(random() * cap);
}

/**
 * Runs `op` and retries it while it throws a retryable error, up to
 * `policy.attempts` attempts. Permanent errors are thrown at once.
 */
export async function withRetry<T>(
  op: () => Promise<T>,
  options: { policy?: RetryPolicy; retryable?: (err: unknown) => boolean } = {},
): Promise<T> {
  const policy = options.policy ?? DEFAULT_RETRY;
  const retryable = options.retryable ?? isRetryable;
  for (let attempt = 0;; attempt++) {
    try {
      return await op();
    } catch (err) {
      if (!retryable(err) || attempt + 1 >= policy.attempts) throw err;
      await sleep(backoffMs(policy, attempt));
    }
  }
}

/** Resolves after `ms` milliseconds. */
export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/**
 * Typed errors shared by every Podmin component.
 *
 * Every error carries an actionable `hint` so that command-line front ends can
 * print "message + hint" without a stack trace.
 */

/** Base class of all errors Podmin raises on purpose. */
export class PodminError extends Error {
  /** What the operator can do about it. */
  readonly hint?: string;

  constructor(message: string, options: { hint?: string; cause?: unknown } = {}) {
    super(message, { cause: options.cause });
    this.name = new.target.name;
    this.hint = options.hint;
  }
}

/** Bad operator input: a flag, a file, a name. Never retried. */
export class UsageError extends PodminError {}

/** One validation problem: the field path (dotted, `[i]` for list items) and what is wrong. */
export interface Problem {
  path: string;
  message: string;
}

/** Data read from the bucket or a file failed validation. Never retried. */
export class ValidationError extends PodminError {
  /** The problems one by one, when the validator reports field paths. */
  readonly problems?: Problem[];

  constructor(
    message: string,
    options: { hint?: string; cause?: unknown; problems?: Problem[] } = {},
  ) {
    super(message, options);
    this.problems = options.problems;
  }
}

/** Base class of object store errors. */
export class StoreError extends PodminError {
  /** The key the operation was about, when there is one. */
  readonly key?: string;

  constructor(message: string, options: { key?: string; hint?: string; cause?: unknown } = {}) {
    super(message, options);
    this.key = options.key;
  }
}

/** The object does not exist. */
export class NotFoundError extends StoreError {}

/** A conditional write or delete lost: the object's ETag was not the expected one. */
export class PreconditionFailedError extends StoreError {}

/** A transient failure (network, throttling, 5xx): the operation may be retried. */
export class UnavailableError extends StoreError {}

/** A failure that retrying will not fix (access denied, bad request, no such bucket). */
export class PermanentStoreError extends StoreError {}

/** Streamed content did not match the expected SHA-256 digest or size. */
export class DigestMismatchError extends StoreError {}

/** True when an error is worth retrying. */
export function isRetryable(err: unknown): boolean {
  return err instanceof UnavailableError;
}

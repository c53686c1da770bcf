/**
 * A bucket object an agent re-reads on an interval with If-None-Match, keeping the last good
 * value: a failed read or an invalid new version never replaces what it had (spec §7.3).
 */

import { NotFoundError } from "../core/kit/errors.ts";
import type { ObjectStore } from "../core/store/object_store.ts";

/** Options of `PolledObject`. */
export interface PolledObjectOptions<T> {
  store: ObjectStore;
  key: string;
  /** Parses and validates new bytes (may be async); throws for invalid content. */
  parse(bytes: Uint8Array): T | Promise<T>;
  /** The value when the object is absent. */
  absent(): T;
  /** Re-read interval. */
  intervalMs: number;
  maxBytes: number;
  /**
   * Decides instead of the interval whether a read is due (change notification: read only when
   * the announced ETag differs from `held.etag`). `force` still reads.
   */
  gate?: (held: { hasIndex: boolean; etag?: string }) => boolean;
}

/** What `read` returns. */
export interface PolledRead<T> {
  /** The last good value, if any. */
  value?: T;
  /** True when this call replaced the value. */
  changed: boolean;
  /** Why the last read failed (the value, if any, is older). */
  error?: string;
}

/** One polled object. */
export class PolledObject<T> {
  readonly #o: PolledObjectOptions<T>;
  #etag?: string;
  #value?: T;
  #error?: string;
  #next = 0;

  constructor(options: PolledObjectOptions<T>) {
    this.#o = options;
  }

  /** Reads when due (or when `force`), else returns what it has. */
  async read(options: { now: number; force?: boolean }): Promise<PolledRead<T>> {
    const due = this.#o.gate
      ? this.#o.gate({ hasIndex: this.#value !== undefined, etag: this.#etag })
      : options.now >= this.#next || this.#value === undefined;
    if (!options.force && !due) {
      return { value: this.#value, changed: false, error: this.#error };
    }
    this.#next = options.now + this.#o.intervalMs;
    let changed = false;
    try {
      const got = await this.#o.store.get(this.#o.key, {
        ifNoneMatch: this.#etag,
        maxBytes: this.#o.maxBytes,
      });
      if (!got.notModified) {
        try {
          this.#value = await this.#o.parse(got.body);
          changed = true;
          this.#error = undefined;
        } catch (err) {
          this.#error = `${this.#o.key}: ${(err as Error).message}`;
        }
        // Remember the ETag either way: invalid bytes are not re-parsed until they change.
        this.#etag = got.info.etag;
      } else if (this.#error?.startsWith("cannot read")) {
        this.#error = undefined;
      }
    } catch (err) {
      if (err instanceof NotFoundError) {
        changed = this.#etag !== undefined || this.#value === undefined;
        this.#value = this.#o.absent();
        this.#etag = undefined;
        this.#error = undefined;
      } else {
        this.#error = `cannot read ${this.#o.key}: ${(err as Error).message}`;
      }
    }
    return { value: this.#value, changed, error: this.#error };
  }

  /** The ETag of the value held (undefined: none, or the object is absent). */
  get etag(): string | undefined {
    return this.#etag;
  }

  /** Forgets the ETag, so the next read parses the object again (e.g. with a new key). */
  invalidate(): void {
    this.#etag = undefined;
    this.#next = 0;
  }
}

/**
 * The read-modify-conditional-write loop every multi-writer object uses.
 * A lost update is a bug: each attempt re-reads the object and re-applies the
 * caller's change to what it read, and writes with If-Match (or
 * If-None-Match: * when absent).
 */

import { PodminError, PreconditionFailedError } from "../kit/errors.ts";
import type { ObjectStore } from "./object_store.ts";
import { getIfExists } from "./object_store.ts";
import { backoffMs, sleep } from "../kit/retry.ts";

/** A multi-writer bucket object: its key and how its bytes are read and written. */
export interface CasObject<T> {
  key: string;
  /** Parses and validates the stored bytes. */
  parse(bytes: Uint8Array): T;
  serialize(value: T): Uint8Array;
  /** The value when the object is absent. */
  empty(): T;
  contentType?: string;
  /** Ceiling of the stored bytes read back (`LIMITS`); larger is a `TooLargeError`. */
  maxBytes?: number;
}

/** Options of `casUpdate`. */
export interface CasUpdateOptions<T> {
  store: ObjectStore;
  object: CasObject<T>;
  /** Returns the new value, or `undefined` when no write is needed. Called once per attempt. */
  mutate(current: T): T | undefined;
  /** Attempts before giving up (default 20). */
  attempts?: number;
}

/** The outcome of a CAS update. */
export interface CasResult<T> {
  value: T;
  /** False when `mutate` asked for no write. */
  written: boolean;
  /** Conditional writes lost before this one won. */
  conflicts: number;
}

/** Runs the read-modify-conditional-write loop until the write wins. */
export async function casUpdate<T>(options: CasUpdateOptions<T>): Promise<CasResult<T>> {
  const { object } = options;
  const attempts = options.attempts ?? 20;
  for (let attempt = 0; attempt < attempts; attempt++) {
    const current = await getIfExists(options.store, object.key, { maxBytes: object.maxBytes });
    const value = current ? object.parse(current.body) : object.empty();
    const next = options.mutate(value);
    if (next === undefined) return { value, written: false, conflicts: attempt };
    try {
      await options.store.put(
        object.key,
        object.serialize(next),
        current
          ? { ifMatch: current.info.etag, contentType: object.contentType }
          : { ifNoneMatch: "*", contentType: object.contentType },
      );
      return { value: next, written: true, conflicts: attempt };
    } catch (err) {
      if (!(err instanceof PreconditionFailedError)) throw err;
      await sleep(backoffMs({ attempts, baseMs: 20, maxMs: 500 }, Math.min(attempt, 5)));
    }
  }
  throw new PodminError(`${object.key}: gave up after ${attempts} conflicting writers`, {
    hint: "another writer keeps changing this object; retry the command",
  });
}

/**
 * An ObjectStore decorator that serves at most a set number of requests per second, first come
 * first served (tests): a real store (moto) made as slow as a saturated one, to show what clients
 * do when every request waits in a queue. Off until `limit` is called.
 */

import type { ObjectStore } from "../../core/store/object_store.ts";

/** The store and its switch. */
export interface RateLimitedStore {
  store: ObjectStore;
  /** Serves at most `perSecond` requests a second from now on (undefined: no limit). */
  limit(perSecond: number | undefined): void;
  /** The longest a request waited in the queue so far, ms. */
  longestWaitMs(): number;
}

/** Wraps `inner`. */
export function rateLimitedStore(inner: ObjectStore): RateLimitedStore {
  let perSecond: number | undefined;
  /** When the next request may start (performance.now() time). */
  let nextStart = 0;
  let longest = 0;
  const turn = async () => {
    if (perSecond === undefined) return;
    const now = performance.now();
    const start = Math.max(now, nextStart);
    nextStart = start + 1000 / perSecond;
    longest = Math.max(longest, start - now);
    if (start > now) await new Promise((r) => setTimeout(r, start - now));
  };
  const queued = <T>(op: () => Promise<T>) => turn().then(op);
  const store: ObjectStore = {
    url: inner.url,
    get: (k, o) => queued(() => inner.get(k, o)),
    head: (k) => queued(() => inner.head(k)),
    put: (k, b, o) => queued(() => inner.put(k, b, o)),
    putStream: (k, b, o) => queued(() => inner.putStream(k, b, o)),
    getStream: (k, o) => queued(() => inner.getStream(k, o)),
    delete: (k, o) => queued(() => inner.delete(k, o)),
    list: (p) => {
      // A listing is an async iterable: its first page waits for its turn.
      const pages = inner.list(p);
      return (async function* () {
        await turn();
        yield* pages;
      })();
    },
  };
  return {
    store,
    limit: (n) => {
      perSecond = n;
      nextStart = 0;
    },
    longestWaitMs: () => longest,
  };
}

/** An ObjectStore decorator that counts requests per operation and key (tests and benches). */

import type { ObjectStore } from "../../core/store/object_store.ts";

/** The store and its counters. */
export interface CountingStore {
  store: ObjectStore;
  /** Requests of `op` (get, head, put, delete, …), for `key` when given. */
  count(op: string, key?: string): number;
  /** Every request counted. */
  total(): number;
  /** Requests of `op` for keys starting with `prefix`. */
  countPrefix(op: string, prefix: string): number;
  reset(): void;
}

/** Wraps `inner`. */
export function countingStore(inner: ObjectStore): CountingStore {
  const counts = new Map<string, number>();
  const hit = (op: string, key: string) => {
    for (const k of [op, `${op} ${key}`]) counts.set(k, (counts.get(k) ?? 0) + 1);
  };
  const store: ObjectStore = {
    url: inner.url,
    get: (k, o) => (hit("get", k), inner.get(k, o)),
    head: (k) => (hit("head", k), inner.head(k)),
    put: (k, b, o) => (hit("put", k), inner.put(k, b, o)),
    putStream: (k, b, o) => (hit("putStream", k), inner.putStream(k, b, o)),
    getStream: (k, o) => (hit("getStream", k), inner.getStream(k, o)),
    delete: (k, o) => (hit("delete", k), inner.delete(k, o)),
    list: (p) => (hit("list", p), inner.list(p)),
  };
  return {
    store,
    count: (op, key) => counts.get(key === undefined ? op : `${op} ${key}`) ?? 0,
    total: () => {
      let n = 0;
      for (const [k, c] of counts) if (!k.includes(" ")) n += c;
      return n;
    },
    countPrefix: (op, prefix) => {
      let n = 0;
      for (const [k, c] of counts) if (k.startsWith(`${op} ${prefix}`)) n += c;
      return n;
    },
    reset: () => counts.clear(),
  };
}

import assert from "node:assert/strict";
import { countingStore } from "../../tests/support/counting_store.ts";
import {
  BucketLease,
  type LeaseClock,
  parseLeaseDocument,
  serializeLeaseDocument,
} from "./bucket_lease.ts";
import { WORKLOAD_CA_LEASE } from "./bucket_layout.ts";
import { FsStore } from "../store/fs_store.ts";
import { API_VERSION } from "../model/resources.ts";
import type { ObjectStore } from "../store/object_store.ts";

const KEY = WORKLOAD_CA_LEASE;
const L = 10_000;

/** Simulated real time; every contender's clocks derive from it. */
class SimTime {
  now = 0;
  advance(ms: number) {
    this.now += ms;
  }
  /** A contender clock: arbitrary offsets (wall and monotonic), rate off by `rate`. */
  clock(options: { monoOffset?: number; wallOffset?: number; rate?: number } = {}): LeaseClock {
    return {
      monotonicMs: () => (options.monoOffset ?? 0) + this.now * (1 + (options.rate ?? 0)),
      wallMs: () => Date.UTC(2026, 11, 1) + (options.wallOffset ?? 0) + this.now,
    };
  }
}

async function tmpStore(): Promise<FsStore> {
  return new FsStore({ root: await Deno.makeTempDir({ prefix: "lease-" }) });
}

function contender(store: ObjectStore, holder: string, clock: LeaseClock, durationMs = L) {
  return new BucketLease({ store, key: KEY, holder, durationMs, clock });
}

async function leaseDoc(store: ObjectStore) {
  const res = await store.get(KEY);
  assert.ok(!res.notModified);
  return parseLeaseDocument(res.body);
}

Deno.test("the first contender creates the lease with term 1; the others observe", async () => {
  const store = await tmpStore();
  const t = new SimTime();
  const a = contender(store, "node-a", t.clock());
  const b = contender(store, "node-b", t.clock({ monoOffset: 123_456 }));
  const sa = await a.step();
  assert.equal(sa.action, "created");
  assert.equal(sa.term, 1);
  assert.ok(a.holds());
  const sb = await b.step();
  assert.equal(sb.action, "observed");
  assert.equal(sb.leader, false);
  assert.deepEqual(sb.seen, {
    holder: "node-a",
    term: 1,
    released: false,
    corrupt: undefined,
    unchangedMs: 0,
  });
  const doc = await leaseDoc(store);
  assert.equal(doc.holder, "node-a");
  assert.equal(doc.durationMs, L);
});

Deno.test("a renewing holder keeps the lease; every renewal restarts the contender's count", async () => {
  const store = await tmpStore();
  const t = new SimTime();
  const a = contender(store, "node-a", t.clock());
  const b = contender(store, "node-b", t.clock({ wallOffset: 3600_000 })); // wall clock 1 h ahead
  await a.step();
  const etags = new Set<string>();
  for (let i = 0; i < 20; i++) {
    t.advance(L / 2);
    const sb = await b.step();
    assert.equal(sb.action, "observed");
    assert.ok(sb.seen!.unchangedMs < L, "b never waits a full lease while a renews");
    const sa = await a.step();
    assert.equal(sa.action, "renewed");
    assert.equal(sa.term, 1);
    etags.add((await store.head(KEY)).etag);
  }
  assert.equal(etags.size, 20, "each renewal writes new bytes (a new ETag)");
});

Deno.test("a contender takes over only after seeing one ETag for duration + margin", async () => {
  const store = await tmpStore();
  const t = new SimTime();
  const a = contender(store, "node-a", t.clock());
  const b = contender(store, "node-b", t.clock({ monoOffset: -5_000_000, wallOffset: -7200_000 }));
  await a.step(); // sent at 0: a acts until L - margin
  t.advance(1000);
  assert.equal((await b.step()).action, "observed"); // first seen at 1000
  t.advance(L + b.marginMs - 1);
  assert.equal((await b.step()).action, "observed", "one ms short of duration + margin");
  assert.equal(a.holds(), false, "a stopped acting before b may take over");
  t.advance(1);
  const sb = await b.step();
  assert.equal(sb.action, "took-over");
  assert.equal(sb.term, 2);
  assert.equal((await leaseDoc(store)).holder, "node-b");
  // a comes back: its lease expired by its own clock; it only observes, b's renewals win.
  const sa = await a.step();
  assert.equal(sa.action, "observed");
  assert.equal(sa.seen!.holder, "node-b");
  assert.equal((await b.step()).action, "renewed");
});

Deno.test("a holder whose renewal lands after a takeover loses the lease", async () => {
  const store = await tmpStore();
  const t = new SimTime();
  const a = contender(store, "node-a", t.clock());
  await a.step();
  // Someone else rewrites the lease (a takeover) while a still believes it holds it.
  const doc = await leaseDoc(store);
  await store.put(
    KEY,
    serializeLeaseDocument({ ...doc, holder: "node-c", term: 2, nonce: "00112233445566778899" }),
  );
  const sa = await a.step();
  assert.equal(sa.leader, false);
  assert.equal(sa.action, "lost");
  assert.equal(a.holds(), false);
  assert.equal((await a.step()).action, "observed", "then it observes the new holder");
});

Deno.test("a holder renews with one conditional PUT and no GET", async () => {
  const counting = countingStore(await tmpStore());
  const t = new SimTime();
  const a = contender(counting.store, "node-a", t.clock());
  assert.equal((await a.step()).action, "created");
  counting.reset();
  for (let i = 0; i < 5; i++) {
    t.advance(L / 3);
    assert.equal((await a.step()).action, "renewed");
  }
  assert.deepEqual([counting.count("put"), counting.count("get"), counting.count("head")], [
    5,
    0,
    0,
  ]);
});

Deno.test("release: the holder stops at once and a contender takes over without waiting", async () => {
  const store = await tmpStore();
  const t = new SimTime();
  const a = contender(store, "node-a", t.clock());
  const b = contender(store, "node-b", t.clock());
  await a.step();
  await b.step();
  assert.equal(await a.release(), true);
  assert.equal(a.holds(), false);
  assert.equal((await leaseDoc(store)).released, true);
  assert.equal(await a.release(), false, "nothing left to release");
  t.advance(1);
  const sb = await b.step();
  assert.equal(sb.action, "took-over");
  assert.equal(sb.term, 2);
});

Deno.test("two eligible contenders race: exactly one wins the conditional write", async () => {
  const store = await tmpStore();
  const t = new SimTime();
  const a = contender(store, "node-a", t.clock());
  await a.step();
  await a.release();
  const b = contender(store, "node-b", t.clock());
  const c = contender(store, "node-c", t.clock());
  const results = await Promise.all([b.step(), c.step()]);
  const actions = results.map((r) => r.action).sort();
  assert.deepEqual(actions, ["raced", "took-over"]);
  assert.equal([b, c].filter((x) => x.holds()).length, 1);
});

Deno.test("an unreadable lease is taken over after the contender's own duration", async () => {
  const store = await tmpStore();
  const t = new SimTime();
  await store.put(KEY, new TextEncoder().encode("{not json"));
  const b = contender(store, "node-b", t.clock());
  const s1 = await b.step();
  assert.equal(s1.action, "observed");
  assert.match(s1.seen!.corrupt!, /not JSON/);
  t.advance(L + b.marginMs);
  const s2 = await b.step({ knownTerm: 4 });
  assert.equal(s2.action, "took-over");
  assert.equal(s2.term, 5, "above the term the protected object records");
});

Deno.test("knownTerm: a recreated lease never reuses a term a protected object recorded", async () => {
  const store = await tmpStore();
  const t = new SimTime();
  const a = contender(store, "node-a", t.clock());
  assert.equal((await a.step({ knownTerm: 7 })).term, 8);
  assert.equal((await a.step({ knownTerm: 8 })).term, 8, "its own term: unchanged");
  assert.equal((await a.step({ knownTerm: 11 })).term, 12, "raised above a higher one");
});

Deno.test("lease documents from the bucket are validated", () => {
  const good = {
    apiVersion: API_VERSION,
    kind: "Lease",
    holder: "node-a",
    term: 3,
    durationMs: 5000,
    renewedAt: "2026-12-01T00:00:00.000Z",
    released: false,
    nonce: "0123456789abcdef",
  };
  const enc = (v: unknown) => new TextEncoder().encode(JSON.stringify(v));
  assert.equal(parseLeaseDocument(enc(good)).term, 3);
  for (
    const [patch, why] of [
      [{ term: 0 }, /term/],
      [{ durationMs: 10 * 3600_000 }, /durationMs/],
      [{ holder: "../x" }, /holder/],
      [{ released: "no" }, /released/],
      [{ kind: "Other" }, /kind Lease/],
      [{ nonce: "zz" }, /nonce/],
    ] as const
  ) {
    assert.throws(() => parseLeaseDocument(enc({ ...good, ...patch })), why);
  }
});

/** A store whose requests take simulated time in flight, before and after they land. */
function slowStore(inner: ObjectStore, t: SimTime, rnd: () => number, maxMs: number): ObjectStore {
  const delay = () => t.advance(Math.floor(rnd() * maxMs));
  return new Proxy(inner, {
    get(target, prop) {
      if (prop === "get" || prop === "put") {
        return async (...args: unknown[]) => {
          delay();
          // deno-lint-ignore no-explicit-any
          const out = await (target as any)[prop](...args);
          delay();
          return out;
        };
      }
      return Reflect.get(target, prop);
    },
  });
}

/** Deterministic PRNG (mulberry32) so a failing schedule can be replayed. */
function prng(seed: number): () => number {
  return () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let r = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    r = (r + Math.imul(r ^ (r >>> 7), 61 | r)) ^ r;
    return ((r ^ (r >>> 14)) >>> 0) / 4294967296;
  };
}

Deno.test("random schedules with skewed clocks, slow requests and pauses never have two holders", async () => {
  for (let seed = 1; seed <= 12; seed++) {
    const rnd = prng(seed);
    const t = new SimTime();
    const store = slowStore(await tmpStore(), t, rnd, 200);
    const nodes = ["node-a", "node-b", "node-c"].map((name) =>
      contender(
        store,
        name,
        t.clock({
          monoOffset: Math.floor(rnd() * 1e9),
          wallOffset: Math.floor((rnd() - 0.5) * 7200_000), // ±1 h wall skew: irrelevant
          rate: (rnd() - 0.5) * 2e-3, // ±0.1 % rate error: within the 10 % margin
        }),
      )
    );
    const terms: number[] = [];
    let takeovers = 0;
    for (let i = 0; i < 400; i++) {
      const n = nodes[Math.floor(rnd() * nodes.length)];
      // Gaps around the lease duration (where a wrong deadline shows), sometimes a long pause.
      const r = rnd();
      const [lo, hi] = r < 0.05
        ? [L, 3 * L]
        : r < 0.45
        ? [0, L / 4]
        : r < 0.85
        ? [0.6 * L, L]
        : [L, 1.3 * L];
      t.advance(Math.floor(lo + rnd() * (hi - lo)));
      const s = await n.step();
      if (s.action === "took-over") takeovers++;
      const holders = nodes.filter((x) => x.holds());
      assert.ok(holders.length <= 1, `seed ${seed} step ${i}: two holders`);
      if (s.leader) terms.push(s.term!);
      if (rnd() < 0.02 && n.holds()) await n.release();
    }
    for (let i = 1; i < terms.length; i++) {
      assert.ok(terms[i] >= terms[i - 1], `seed ${seed}: terms never go backwards`);
    }
    assert.ok(takeovers > 0, `seed ${seed}: the schedule exercised takeovers`);
  }
});

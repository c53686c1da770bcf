/**
 * Conditional writes racing for real on moto, in one process: writers are held at a barrier
 * until all of them have read, so every race is certain to happen, and the tests prove the
 * conflict path ran (S3 answered 412) rather than hoping process timing produced one.
 */

import assert from "node:assert/strict";
import { SERVICE_INDEX } from "../../core/bucket/bucket_layout.ts";
import { type CasObject, casUpdate } from "../../core/store/cas_update.ts";
import { PodminError, PreconditionFailedError } from "../../core/kit/errors.ts";
import type { ObjectStore, PutOptions } from "../../core/store/object_store.ts";
import { parseResource, type Service } from "../../core/model/resources.ts";
import { S3Store } from "../../core/store/s3_store.ts";
import { readServiceIndex } from "../../core/bucket/service_index.ts";
import { encodeSpec, specKey, writeSpec } from "../../core/bucket/spec_objects.ts";
import { applyResources } from "../../cli/desired_state.ts";
import { moto } from "../support/moto.ts";

/** A barrier for `n` parties: `arrive()` resolves once all `n` have arrived. */
function barrier(n: number) {
  let arrived = 0;
  const all = Promise.withResolvers<void>();
  return {
    arrive(): Promise<void> {
      if (++arrived >= n) all.resolve();
      return all.promise;
    },
  };
}

/** `store` with its `put` replaced by `put` (every other method bound to the store itself). */
function withPut(
  store: ObjectStore,
  put: (key: string, body: Uint8Array, options?: PutOptions) => Promise<{ etag: string }>,
): ObjectStore {
  return new Proxy(store, {
    get(target, prop) {
      if (prop === "put") return put;
      const value = Reflect.get(target, prop, target);
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
}

/**
 * The store, with conditional puts to `key` counted; the first `hold` of them wait at a barrier
 * until `hold` writers are about to write (each has read the same version), then go together.
 */
function racing(store: ObjectStore, o: { key: string; hold: number }) {
  const gate = barrier(o.hold);
  let puts = 0;
  const stats = { conflicts: 0, wins: 0 };
  const wrapped = withPut(store, async (key, body, options) => {
    if (key === o.key && puts++ < o.hold) await gate.arrive();
    try {
      const out = await store.put(key, body, options);
      if (key === o.key) stats.wins++;
      return out;
    } catch (err) {
      if (key === o.key && err instanceof PreconditionFailedError) stats.conflicts++;
      throw err;
    }
  });
  return { store: wrapped, stats };
}

const listObject: CasObject<string[]> = {
  key: "races/list.json",
  parse: (b) => JSON.parse(new TextDecoder().decode(b)),
  serialize: (v) => new TextEncoder().encode(JSON.stringify(v)),
  empty: () => [],
};

async function s3(): Promise<S3Store> {
  const m = await moto();
  await m.reset();
  return new S3Store({ bucket: await m.createBucket(), region: "us-east-1" });
}

Deno.test("races [moto]: 8 writers × 5 casUpdates on one object: conflicts happen, every entry survives", async () => {
  const base = await s3();
  const WRITERS = 8, EACH = 5;
  // Round one: all eight read the absent object, then write If-None-Match: * together.
  const { store, stats } = racing(base, { key: listObject.key, hold: WRITERS });
  const results = await Promise.all(
    Array.from({ length: WRITERS }, async (_, w) => {
      let conflicts = 0;
      for (let i = 0; i < EACH; i++) {
        const r = await casUpdate({
          store,
          object: listObject,
          mutate: (list) => [...list, `w${w}-${i}`],
          attempts: 100,
        });
        conflicts += r.conflicts;
      }
      return conflicts;
    }),
  );
  const final = listObject.parse((await base.get(listObject.key) as { body: Uint8Array }).body);
  assert.equal(final.length, WRITERS * EACH, "no lost update");
  assert.deepEqual(
    [...final].sort(),
    Array.from({ length: WRITERS }, (_, w) => Array.from({ length: EACH }, (_, i) => `w${w}-${i}`))
      .flat().sort(),
  );
  assert.ok(stats.conflicts >= WRITERS - 1, `S3 answered 412 ${stats.conflicts} times`);
  assert.equal(
    results.reduce((a, b) => a + b, 0),
    stats.conflicts,
    "casUpdate counted every lost write",
  );
  assert.equal(stats.wins, WRITERS * EACH);
});

Deno.test("races [moto]: casUpdate gives up after its attempts when another writer always wins", async () => {
  const base = await s3();
  await base.put(listObject.key, listObject.serialize([]));
  let reads = 0;
  // Between each read and write, a competing writer changes the object: every write loses.
  const store = withPut(base, async (key, body, options) => {
    await base.put(key, listObject.serialize([`rival-${reads}`]));
    return await base.put(key, body, options);
  });
  await assert.rejects(
    casUpdate({
      store,
      object: listObject,
      mutate: (list) => {
        reads++;
        return [...list, "mine"];
      },
      attempts: 3,
    }),
    (err) => err instanceof PodminError && /gave up after 3 conflicting writers/.test(err.message),
  );
  assert.equal(reads, 3, "one read-modify per attempt");
  const final = listObject.parse((await base.get(listObject.key) as { body: Uint8Array }).body);
  assert.ok(!final.includes("mine"), "the losing change was never written over the rival's");
});

function service(name: string): Service {
  return parseResource({
    apiVersion: "podmin.dev/v1",
    kind: "Service",
    metadata: { name },
    spec: { selector: { app: name }, ports: [{ port: 80 }] },
  }) as Service;
}

Deno.test("races [moto]: 8 writers store the same spec at once: one write wins, the others confirm it by HEAD", async () => {
  const base = await s3();
  const spec = encodeSpec(service("web"));
  const key = specKey("Service", spec.ref);
  const { store, stats } = racing(base, { key, hold: 8 });
  await Promise.all(Array.from({ length: 8 }, () => writeSpec(store, spec)));
  assert.equal(stats.wins, 1);
  assert.equal(stats.conflicts, 7, "seven lost the put-if-absent race");
  const got = await base.get(key);
  assert.ok(!got.notModified);
  assert.deepEqual(got.body, spec.bytes);
});

Deno.test("races [moto]: 20 Services applied concurrently get 20 distinct VIPs, none lost", async () => {
  const base = await s3();
  const N = 20;
  const { store, stats } = racing(base, { key: SERVICE_INDEX, hold: N });
  const names = Array.from({ length: N }, (_, i) => `svc-${i}`);
  const applied = await Promise.all(
    names.map((name) =>
      applyResources({ store, resources: [service(name)], serviceCidr: "fd00:10:96::/120" })
    ),
  );
  assert.ok(stats.conflicts >= N - 1, `S3 answered 412 ${stats.conflicts} times`);
  const index = (await readServiceIndex(base))!;
  assert.deepEqual(index.services.map((s) => s.name).sort(), [...names].sort());
  const vips = index.services.map((s) => s.vip);
  assert.equal(new Set(vips).size, N, `duplicate VIPs: ${vips.join(" ")}`);
  // What each apply reported is what the index holds.
  for (const [i, changes] of applied.entries()) {
    const mine = index.services.find((s) => s.name === names[i])!;
    assert.equal(changes[0].vip, mine.vip);
  }
  assert.equal(index.generation, N, "one index generation per Service");
});

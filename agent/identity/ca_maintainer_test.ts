import assert from "node:assert/strict";
import { countingStore } from "../../tests/support/counting_store.ts";
import type { LeaseClock } from "../../core/bucket/bucket_lease.ts";
import { WORKLOAD_CA_STATE } from "../../core/bucket/bucket_layout.ts";
import {
  generateKeyPair,
  type KeyPair,
  parseCertificatesPem,
} from "../../core/crypto/certificates.ts";
import { FsStore } from "../../core/store/fs_store.ts";
import { silentLogger } from "../../core/kit/log.ts";
import type { ObjectStore } from "../../core/store/object_store.ts";
import { parseWorkloadCaState } from "../../core/bucket/workload_ca_state.ts";
import type { CaKeySource } from "./ca_key.ts";
import { CaMaintainer } from "./ca_maintainer.ts";
import { bundleSha256, parsePublicationTarget } from "./ca_publication.ts";
import { DEFAULT_ROTATION_POLICY } from "./ca_rotation.ts";

const LEASE = 10_000;
const keys = await generateKeyPair();

class SimClock implements LeaseClock {
  mono = 0;
  wall = Date.parse("2026-12-01T00:00:00Z");
  monotonicMs = () => this.mono;
  wallMs = () => this.wall;
  advance(ms: number) {
    this.mono += ms;
    this.wall += ms;
  }
}

function keySource(k: KeyPair = keys): CaKeySource {
  return { description: "test key", load: () => Promise.resolve(k), forget() {} };
}

async function bucket(): Promise<FsStore> {
  return new FsStore({ root: await Deno.makeTempDir({ prefix: "ca-maint-" }) });
}

function maintainer(
  store: ObjectStore,
  nodeId: string,
  clock: LeaseClock,
  extra: {
    publication?: { url: string; store: ObjectStore };
    key?: KeyPair;
    contend?: () => boolean;
  } = {},
) {
  const target = extra.publication && parsePublicationTarget(extra.publication.url);
  return new CaMaintainer({
    store,
    cluster: "prod",
    nodeId,
    keySource: keySource(extra.key),
    policy: { ...DEFAULT_ROTATION_POLICY, publicationTarget: target?.url },
    publication: target && { target, store: extra.publication!.store },
    leaseDurationMs: LEASE,
    clock,
    contend: extra.contend,
    log: silentLogger,
  });
}

async function readState(store: ObjectStore) {
  const r = await store.get(WORKLOAD_CA_STATE);
  assert.ok(!r.notModified);
  return { state: parseWorkloadCaState(r.body), etag: r.info.etag };
}

Deno.test("one leader bootstraps the CA; the others only read", async () => {
  const store = await bucket();
  const clock = new SimClock();
  const [a, b, c] = ["node-a", "node-b", "node-c"].map((n) => maintainer(store, n, clock));
  const ra = await a.pass();
  assert.equal(ra.status.leader, true);
  assert.equal(ra.status.term, 1);
  assert.equal(ra.status.writes, 2, "create next, then promote it (no leaf exists yet)");
  assert.deepEqual(ra.status.state!.certificates.map((x) => x.role), ["active"]);
  const before = await readState(store);
  assert.equal(before.state.leaderTerm, 1);
  assert.equal(before.state.writtenBy, "node-a");
  for (const m of [b, c]) {
    const r = await m.pass();
    assert.equal(r.status.leader, false);
    assert.equal(r.status.writes, 0);
    assert.equal(r.status.lease!.holder, "node-a");
    assert.equal(r.status.state!.generation, before.state.generation);
  }
  assert.equal((await readState(store)).etag, before.etag, "non-leaders wrote nothing");
  clock.advance(LEASE / 3);
  assert.equal((await a.pass()).status.writes, 0, "a renewal alone writes no state");
});

Deno.test("with the mesh, an agent that neither holds the lease nor contends reads nothing; the holder keeps it", async () => {
  const counting = countingStore(await bucket());
  const store = counting.store;
  const reads = () => counting.count("get") + counting.count("head");
  const clock = new SimClock();
  let bContends = false;
  const a = maintainer(store, "node-a", clock, { contend: () => false });
  const b = maintainer(store, "node-b", clock, { contend: () => bContends });
  // Neither contends yet: nothing is read, nothing is written.
  for (const m of [a, b]) {
    const r = await m.pass();
    assert.equal(r.status.leader, false);
    assert.match(r.status.idle ?? "", /coordinator contends/);
  }
  assert.equal(reads(), 0);
  // b becomes the mesh coordinator: it contends and bootstraps the CA.
  bContends = true;
  assert.equal((await b.pass()).status.leader, true);
  // b stops being coordinator but holds the lease: it keeps renewing it.
  bContends = false;
  clock.advance(LEASE / 3);
  const r = await b.pass();
  assert.equal(r.status.leader, true);
  assert.equal(r.status.lease?.action, "renewed");
  counting.reset();
  assert.equal((await a.pass()).status.idle !== undefined, true);
  assert.equal(reads(), 0, "a non-contender still reads nothing");
});

Deno.test("takeover: the new leader fences the state with its term; the old one stops writing", async () => {
  const store = await bucket();
  const clock = new SimClock();
  const a = maintainer(store, "node-a", clock);
  const b = maintainer(store, "node-b", clock);
  await a.pass();
  await b.pass(); // b first sees a's lease
  clock.advance(LEASE + 1000); // a stopped (killed or paused) past its lease
  const rb = await b.pass();
  assert.equal(rb.status.leader, true);
  assert.equal(rb.status.term, 2);
  assert.equal(rb.status.writes, 1, "the fence write");
  const fenced = await readState(store);
  assert.equal(fenced.state.leaderTerm, 2);
  assert.equal(fenced.state.writtenBy, "node-b");
  // a resumes: its lease expired by its own clock; it observes and writes nothing.
  const ra = await a.pass();
  assert.equal(ra.status.leader, false);
  assert.equal(ra.status.writes, 0);
  assert.equal((await readState(store)).etag, fenced.etag);
});

Deno.test("a corrupt state or one not made for the key is reported and never overwritten", async () => {
  for (
    const [name, bytes, why] of [
      ["corrupt", new TextEncoder().encode("{oops"), /not JSON/],
      ["foreign", undefined, /not made for the workload CA key/],
    ] as const
  ) {
    const store = await bucket();
    const clock = new SimClock();
    let body = bytes as Uint8Array | undefined;
    if (!body) {
      // A valid state for another key.
      const other = await generateKeyPair();
      await maintainer(store, "node-x", clock, { key: other }).pass();
      body = (await store.get(WORKLOAD_CA_STATE) as { body: Uint8Array }).body;
    }
    await store.put(WORKLOAD_CA_STATE, body);
    const { etag } = await store.head(WORKLOAD_CA_STATE);
    clock.advance(2 * LEASE);
    const r = await maintainer(store, "node-a", clock).pass();
    assert.match(r.status.lastError!, why, name);
    assert.equal(r.backOff, true);
    assert.equal(r.status.leader, false, `${name}: no lease taken while the state is unusable`);
    assert.equal((await store.head(WORKLOAD_CA_STATE)).etag, etag, `${name}: not overwritten`);
  }
});

Deno.test("publication: written before promotion; a missing external bucket blocks it", async () => {
  const store = await bucket();
  const ext = await bucket();
  const clock = new SimClock();
  const url = "s3://trust-bundles/podmin/prod.pem";
  const a = maintainer(store, "node-a", clock, { publication: { url, store: ext } });
  const r = await a.pass();
  assert.equal(r.status.leader, true);
  assert.equal(r.status.writes, 3, "create next, record the publication, promote");
  const published = await ext.get("podmin/prod.pem");
  assert.ok(!published.notModified);
  const certs = parseCertificatesPem(new TextDecoder().decode(published.body));
  const s = (await readState(store)).state;
  assert.equal(certs.length, 1);
  assert.equal(s.certificates[0].role, "active");
  // Published while the certificate was still `next` (one certificate: same bytes after).
  assert.equal(s.publication!.publishedSha256, await bundleSha256(published.body));

  // Missing external bucket: an FsStore that must exist but does not.
  const store2 = await bucket();
  const missing = new FsStore({ root: "/nonexistent/podmin-ext", mustExist: true });
  const b = maintainer(store2, "node-b", clock, { publication: { url, store: missing } });
  const rb = await b.pass();
  assert.equal(rb.status.leader, true);
  assert.deepEqual(rb.status.state!.certificates.map((x) => x.role), ["next"], "not promoted");
  assert.match(
    rb.status.waiting!,
    /promotion of next .* waits: publication to s3:\/\/trust-bundles/,
  );
  assert.ok(rb.status.publication!.error);
  assert.ok(rb.status.publication!.failedAt);
  const again = await b.pass();
  assert.equal(again.status.writes, 0, "the same failure is not rewritten every pass");
  const stored = (await readState(store2)).state;
  assert.equal(stored.publication!.error, rb.status.publication!.error);
});

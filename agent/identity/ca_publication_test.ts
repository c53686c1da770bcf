import assert from "node:assert/strict";
import { FsStore } from "../../core/store/fs_store.ts";
import { emptyWorkloadCaState } from "../../core/bucket/workload_ca_state.ts";
import {
  bundleSha256,
  parsePublicationTarget,
  publicationRecorded,
  publishBundle,
  recordPublication,
} from "./ca_publication.ts";

const target = parsePublicationTarget("s3://trust-bundles/podmin/prod.pem");
const PEM_A = "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n";
const PEM_B = "-----BEGIN CERTIFICATE-----\nBBBB\n-----END CERTIFICATE-----\n";

async function store() {
  return new FsStore({ root: await Deno.makeTempDir({ prefix: "ca-pub-" }) });
}

async function body(s: FsStore): Promise<string> {
  const r = await s.get(target.key);
  assert.ok(!r.notModified);
  return new TextDecoder().decode(r.body);
}

Deno.test("publishBundle: creates, leaves identical bytes alone, replaces a different bundle", async () => {
  const s = await store();
  const first = await publishBundle({ store: s, target, pem: PEM_A });
  assert.deepEqual(first, { ok: true, sha256: await bundleSha256(PEM_A), wrote: true });
  assert.equal(await body(s), PEM_A);
  const etag = (await s.head(target.key)).etag;
  assert.deepEqual(await publishBundle({ store: s, target, pem: PEM_A }), {
    ok: true,
    sha256: await bundleSha256(PEM_A),
    wrote: false,
  });
  assert.equal((await s.head(target.key)).etag, etag, "no write for identical bytes");
  assert.equal((await publishBundle({ store: s, target, pem: PEM_B })).ok, true);
  assert.equal(await body(s), PEM_B);
});

Deno.test("publishBundle: a lost lease cancels the write; store failures are outcomes", async () => {
  const s = await store();
  const cancelled = await publishBundle({ store: s, target, pem: PEM_A, mayWrite: () => false });
  assert.equal(cancelled.ok, false);
  assert.match((cancelled as { error: string }).error, /no longer holds the CA lease/);
  assert.equal(await s.head(target.key).catch(() => "absent"), "absent");
  const missing = new FsStore({ root: "/nonexistent/podmin-pub", mustExist: true });
  const failed = await publishBundle({ store: missing, target, pem: PEM_A });
  assert.equal(failed.ok, false);
  assert.match((failed as { error: string }).error, /^s3:\/\/trust-bundles\/podmin\/prod\.pem: /);
});

Deno.test("recordPublication: a failure keeps the last success; a success clears the error", async () => {
  const now = new Date("2026-12-01T00:00:00Z");
  const sha = await bundleSha256(PEM_A);
  let state = recordPublication({
    state: emptyWorkloadCaState(),
    target,
    outcome: { ok: true, sha256: sha, wrote: true },
    now,
  });
  assert.deepEqual(state.publication, {
    target: target.url,
    publishedSha256: sha,
    publishedAt: now.toISOString(),
  });
  const failure = { ok: false as const, error: "AccessDenied" };
  assert.equal(publicationRecorded(state, target, failure), false);
  state = recordPublication({ state, target, outcome: failure, now });
  assert.equal(state.publication!.publishedSha256, sha, "the last success is kept");
  assert.equal(state.publication!.error, "AccessDenied");
  assert.equal(publicationRecorded(state, target, failure), true, "not rewritten every pass");
  const ok = { ok: true as const, sha256: sha, wrote: false };
  assert.equal(publicationRecorded(state, target, ok), false, "a recovery is recorded");
  state = recordPublication({ state, target, outcome: ok, now });
  assert.equal(state.publication!.error, undefined);
  const other = parsePublicationTarget("s3://elsewhere/ca.pem");
  assert.equal(publicationRecorded(state, other, ok), false, "another target is not published");
});

Deno.test("parsePublicationTarget: one exact object", () => {
  assert.deepEqual(parsePublicationTarget("s3://b-1/x/y.pem"), {
    url: "s3://b-1/x/y.pem",
    bucket: "b-1",
    key: "x/y.pem",
  });
  for (const bad of ["s3://b-1/", "s3://b-1/x/", "https://b-1/x", "s3://B/x"]) {
    assert.throws(() => parsePublicationTarget(bad), /exact s3:\/\/BUCKET\/KEY/);
  }
});

/**
 * Publication of the workload CA trust bundle to an external object on moto (spec §8.5): every
 * promotion follows a successful publication of a bundle holding the promoted certificate; a
 * missing external bucket blocks promotion, is recorded in the state and shown by
 * `podmin ca status`; once the bucket exists the agent publishes and promotes.
 */

import assert from "node:assert/strict";
import { GetObjectCommand } from "@aws-sdk/client-s3";
import * as path from "node:path";
import { WORKLOAD_CA_STATE } from "../../core/bucket/bucket_layout.ts";
import {
  fingerprint,
  importPrivateKeyPem,
  parseCertificatesPem,
} from "../../core/crypto/certificates.ts";
import {
  checkCaState,
  parseWorkloadCaState,
  trustBundlePem,
} from "../../core/bucket/workload_ca_state.ts";
import { bundleSha256 } from "../../agent/identity/ca_publication.ts";
import { moto } from "../support/moto.ts";
import { podmin, waitFor } from "../support/programs.ts";
import {
  caKeyFile,
  enableVersioning,
  readState,
  s3,
  startAgent,
  stopAgent,
  versions,
} from "./identity_cluster.ts";

Deno.test("publication [moto]: each promotion follows the publication of a bundle holding it", async () => {
  const m = await moto();
  await m.reset();
  const bucket = await m.createBucket();
  const ext = await m.createBucket();
  await enableVersioning(bucket);
  await enableVersioning(ext);
  const key = await caKeyFile();
  const keys = await importPrivateKeyPem(await Deno.readTextFile(key.file));
  const tmp = await Deno.makeTempDir({ prefix: "podmin-publish-" });
  const target = `s3://${ext}/podmin/prod-ca.pem`;
  const agent = startAgent({
    bucket,
    nodeId: "node-a",
    base: path.join(tmp, "a"),
    keyFile: key.file,
    extra: ["--workload-ca-publish", target],
  });
  try {
    // Bootstrap, then one full rotation (a retired certificate), then the retired one dropped.
    let sawRetired = false;
    await waitFor("a full rotation", async () => {
      const s = await readState(bucket);
      if (s?.certificates.some((c) => c.role === "retired")) sawRetired = true;
      return sawRetired && !!s && !s.certificates.some((c) => c.role === "retired");
    }, 90_000);
    await stopAgent(agent, "SIGTERM");

    const states = (await versions(bucket, WORKLOAD_CA_STATE)).map(parseWorkloadCaState);
    const published = new Map<string, Uint8Array>();
    for (const body of await versions(ext, "podmin/prod-ca.pem")) {
      published.set(await bundleSha256(body), body);
    }
    let promotions = 0;
    for (let i = 1; i < states.length; i++) {
      const was = states[i - 1].certificates.find((c) => c.role === "active")?.fingerprint;
      const now = states[i].certificates.find((c) => c.role === "active")?.fingerprint;
      if (!now || now === was) continue;
      promotions++;
      // The state before the promotion recorded the publication of exactly its bundle…
      const before = states[i - 1];
      const bundle = trustBundlePem(await checkCaState(before, keys.publicKey));
      assert.equal(before.publication?.target, target);
      assert.equal(before.publication?.publishedSha256, await bundleSha256(bundle));
      // …that bundle is a version of the external object, and it holds the promoted certificate.
      const body = published.get(before.publication!.publishedSha256!);
      assert.ok(body, `promotion ${promotions}: its bundle is a version of the external object`);
      const fps = await Promise.all(
        parseCertificatesPem(new TextDecoder().decode(body)).map(fingerprint),
      );
      assert.ok(fps.includes(now), `promotion ${promotions}: the bundle holds the new active`);
    }
    assert.ok(promotions >= 2, `bootstrap and a rotation: ${promotions} promotions`);
    // After a clean stop the external object holds the last recorded bundle.
    const last = states[states.length - 1];
    const out = await s3().send(new GetObjectCommand({ Bucket: ext, Key: "podmin/prod-ca.pem" }));
    const current = await out.Body!.transformToByteArray();
    assert.equal(await bundleSha256(current), last.publication!.publishedSha256);
    assert.equal(
      new TextDecoder().decode(current),
      trustBundlePem(await checkCaState(last, keys.publicKey)),
    );
  } finally {
    await stopAgent(agent);
    await Deno.remove(tmp, { recursive: true }).catch(() => {});
    await Deno.remove(key.dir, { recursive: true }).catch(() => {});
  }
});

Deno.test("publication [moto]: a missing external bucket blocks promotion and `podmin ca status` says why", async () => {
  const m = await moto();
  await m.reset();
  const bucket = await m.createBucket();
  const ext = `podmin-missing-${Date.now().toString(36)}`;
  const key = await caKeyFile();
  const tmp = await Deno.makeTempDir({ prefix: "podmin-publish-" });
  const agent = startAgent({
    bucket,
    nodeId: "node-a",
    base: path.join(tmp, "a"),
    keyFile: key.file,
    extra: ["--workload-ca-publish", `s3://${ext}/ca.pem`, "--workload-ca-lifetime", "1h"],
  });
  try {
    await waitFor("a recorded publication failure", async () => {
      const id = await agent.identity();
      return !!id?.publication?.error && !!id.waiting;
    }, 60_000);
    const id = (await agent.identity())!;
    assert.match(id.waiting!, /promotion of next .* waits: publication to s3:\/\/podmin-missing/);
    const s = (await readState(bucket))!;
    assert.deepEqual(s.certificates.map((c) => c.role), ["next"], "never promoted");
    assert.ok(s.publication?.error, "the failure is in the state");

    const status = await podmin(["--bucket", `s3://${bucket}`, "ca", "status"]);
    assert.equal(status.code, 1, status.stderr);
    assert.match(status.stdout, /Publication error: .*podmin-missing/);
    assert.match(status.stdout, /Leader: +node-a \(term 1\)/);
    assert.match(status.stdout, /^next +[0-9a-f]{16} .* promote after /m);
    const json = JSON.parse(
      (await podmin(["--bucket", `s3://${bucket}`, "ca", "status", "-o", "json"])).stdout,
    );
    assert.equal(json.healthy, false);
    assert.equal(json.lease.holder, "node-a");
    assert.equal(json.certificates[0].role, "next");

    // The bucket appears: the agent publishes, then promotes.
    await m.createBucket(ext);
    await waitFor("promotion after the publication", async () => {
      return !!(await readState(bucket))?.certificates.some((c) => c.role === "active");
    }, 30_000);
    const ok = await podmin(["--bucket", `s3://${bucket}`, "ca", "status"]);
    assert.equal(ok.code, 0, ok.stdout + ok.stderr);
    assert.doesNotMatch(ok.stdout, /Publication error/);
    const bundle = await podmin(["--bucket", `s3://${bucket}`, "ca", "bundle"]);
    assert.equal(bundle.code, 0, bundle.stderr);
    assert.equal(parseCertificatesPem(bundle.stdout).length, 1);
  } finally {
    await stopAgent(agent);
    await Deno.remove(tmp, { recursive: true }).catch(() => {});
    await Deno.remove(key.dir, { recursive: true }).catch(() => {});
  }
});

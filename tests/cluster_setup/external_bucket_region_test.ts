/**
 * Buckets outside the cluster's region (`--workload-ca-publish`, `--otel-logs ca=`) on moto behind
 * tests/support/region_redirect_proxy.ts, which answers a request signed for the wrong region as
 * S3 does (301 PermanentRedirect with `x-amz-bucket-region`; moto itself serves any region). The
 * store follows the redirect once and stays aimed at the bucket's region; setup reports the
 * region of each external bucket and refuses a missing one.
 */

import assert from "node:assert/strict";
import { CreateBucketCommand, GetObjectCommand, S3Client } from "@aws-sdk/client-s3";
import { S3Store } from "../../core/store/s3_store.ts";
import { moto } from "../support/moto.ts";
import { podmin } from "../support/programs.ts";
import { regionRedirectProxy } from "../support/region_redirect_proxy.ts";
import { DEFAULT_CATALOG } from "../../cli/setup/default_catalog.ts";

/** A bucket created in eu-west-1 (LocationConstraint), straight on moto. */
async function farBucket(name: string): Promise<S3Client> {
  const s3 = new S3Client({ region: "eu-west-1", forcePathStyle: true });
  await s3.send(
    new CreateBucketCommand({
      Bucket: name,
      CreateBucketConfiguration: { LocationConstraint: "eu-west-1" },
    }),
  );
  return s3;
}

Deno.test("S3 store [moto behind a region-redirect proxy]: a bucket of another region is found by its redirect and used there", async () => {
  const m = await moto();
  await m.reset();
  const far = `far-${Date.now().toString(36)}`;
  const s3 = await farBucket(far);
  const proxy = regionRedirectProxy(m.endpoint);
  try {
    // The proxy answers as S3 does for the wrong region (what moto alone does not).
    const raw = await fetch(`${proxy.endpoint}/${far}/x`, {
      redirect: "manual",
      headers: {
        authorization: "AWS4-HMAC-SHA256 Credential=test/20260101/us-east-1/s3/aws4_request",
      },
    });
    assert.equal(raw.status, 301);
    assert.equal(raw.headers.get("x-amz-bucket-region"), "eu-west-1");
    assert.match(await raw.text(), /<Code>PermanentRedirect<\/Code>/);
    proxy.redirects.length = 0;

    const store = new S3Store({ bucket: far, region: "us-east-1", endpoint: proxy.endpoint });
    await store.put("podmin/prod.pem", new TextEncoder().encode("PEM"));
    assert.equal(store.region, "eu-west-1", "aimed at the bucket's region");
    assert.deepEqual(proxy.redirects, [`PUT /${far}/podmin/prod.pem us-east-1 → eu-west-1`]);
    const got = await store.get("podmin/prod.pem");
    assert.equal(new TextDecoder().decode(got.notModified ? new Uint8Array() : got.body), "PEM");
    assert.equal(proxy.redirects.length, 1, "later requests go to the bucket's region directly");
    const stored = await s3.send(new GetObjectCommand({ Bucket: far, Key: "podmin/prod.pem" }));
    assert.equal(await stored.Body!.transformToString(), "PEM");

    const fresh = new S3Store({ bucket: far, region: "us-east-1", endpoint: proxy.endpoint });
    assert.deepEqual(await fresh.locate(), { region: "eu-west-1", readable: true });
    assert.deepEqual(proxy.redirects.at(-1), `HEAD /${far}/ us-east-1 → eu-west-1`);
    await assert.rejects(
      new S3Store({ bucket: "no-such-far", region: "us-east-1", endpoint: proxy.endpoint })
        .locate(),
      /bucket of s3:\/\/no-such-far does not exist/,
    );
  } finally {
    await proxy.close();
  }
});

Deno.test("setup [moto behind a region-redirect proxy]: the publication and OTel CA buckets' regions are discovered; a missing one is refused", async () => {
  const m = await moto();
  await m.reset();
  const far = `far-setup-${Date.now().toString(36)}`;
  await farBucket(far);
  const proxy = regionRedirectProxy(m.endpoint);
  const tmp = await Deno.makeTempDir({ prefix: "podmin-far-" });
  try {
    // --otel-logs needs a Fluent Bit pin for the NodeGroup's architecture (setup stops at the
    // downloads here, so the URL is never fetched).
    const catalog = `${tmp}/catalog.json`;
    await Deno.writeTextFile(
      catalog,
      JSON.stringify({
        dependencies: [...DEFAULT_CATALOG.dependencies, {
          name: "fluent-bit",
          version: "4.0.3",
          arch: "arm64",
          url: "https://packages.example.com/fluent-bit_4.0.3_arm64.deb",
          sha256: "f".repeat(64),
        }],
      }),
    );
    const args = (publish: string, otelCa: string) => [
      "--bucket",
      `s3://podmin-far-${Date.now().toString(36)}`,
      "setup",
      "--cluster",
      "far",
      "--region",
      "us-east-1",
      "--vpc-cidr",
      "10.0.0.0/16",
      "--nodegroup",
      "default",
      "--ami",
      "arm64=ami-12345678",
      "--workload-ca-publish",
      publish,
      "--otel-logs",
      `https://otel.example.net:4318,ca=${otelCa}`,
      "--dependency-catalog",
      catalog,
    ];
    const env = {
      PODMIN_CACHE_DIR: `${tmp}/cache`,
      PODMIN_HOME: `${tmp}/home`,
      AWS_ENDPOINT_URL_S3: proxy.endpoint,
    };
    const r = await podmin(args(`s3://${far}/podmin/far.pem`, `s3://${far}/otel/ca.pem`), env);
    for (const flag of ["--workload-ca-publish", "--otel-logs ca="]) {
      assert.match(
        r.stderr,
        new RegExp(
          `${flag}: bucket ${far} is in eu-west-1 \\(another region: requests follow S3's redirect\\)`,
        ),
        r.stderr,
      );
    }
    assert.ok(proxy.redirects.some((l) => l.startsWith(`HEAD /${far}/ us-east-1 → eu-west-1`)));
    assert.match(r.stderr, /a new VPC 10\.0\.0\.0\/16 will be created/, "setup went on");

    const missing = await podmin(
      args(`s3://${far}/podmin/far.pem`, "s3://no-such-otel/ca.pem"),
      env,
    );
    assert.equal(missing.code, 2, missing.stderr);
    assert.match(missing.stderr, /--otel-logs: bucket no-such-otel does not exist/);
  } finally {
    await proxy.close();
    await Deno.remove(tmp, { recursive: true });
  }
});

/** Checks a real `podmin setup` makes on moto before it publishes anything. */

import assert from "node:assert/strict";
import { moto } from "../support/moto.ts";
import { podmin } from "../support/programs.ts";

Deno.test("setup [moto]: --workload-ca-publish into a bucket that does not exist is refused before anything is published", async () => {
  const m = await moto();
  await m.reset();
  const tmp = await Deno.makeTempDir({ prefix: "podmin-checks-" });
  try {
    const bucket = `podmin-checks-${Date.now().toString(36)}`;
    const args = (publish: string) => [
      "--bucket",
      `s3://${bucket}`,
      "setup",
      "--cluster",
      "checks",
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
    ];
    const env = { PODMIN_CACHE_DIR: `${tmp}/cache`, PODMIN_HOME: `${tmp}/home` };
    const r = await podmin(args("s3://no-such-publish-bucket/ca.pem"), env);
    assert.equal(r.code, 2, r.stderr);
    assert.match(r.stderr, /--workload-ca-publish: bucket no-such-publish-bucket does not exist/);
    const s3 = await (await fetch(`${m.endpoint}/`)).text();
    assert.doesNotMatch(s3, new RegExp(`<Name>${bucket}</Name>`), "nothing was created");
    // An existing bucket passes the check (setup then goes on; here it stops at the downloads).
    const existing = await m.createBucket();
    const ok = await podmin(args(`s3://${existing}/ca.pem`), {
      ...env,
      PODMIN_CACHE_DIR: `${tmp}/cache`,
    });
    assert.match(
      ok.stderr,
      new RegExp(`--workload-ca-publish: bucket ${existing} is in us-east-1\n`),
    );
    assert.match(ok.stderr, /a new VPC 10\.0\.0\.0\/16 will be created/);
  } finally {
    await Deno.remove(tmp, { recursive: true });
  }
});

Deno.test("setup [moto]: --otel-logs without a Fluent Bit pin is refused before anything is created", async () => {
  const m = await moto();
  await m.reset();
  const tmp = await Deno.makeTempDir({ prefix: "podmin-checks-" });
  try {
    const bucket = `podmin-checks-${Date.now().toString(36)}`;
    const r = await podmin([
      "--bucket",
      `s3://${bucket}`,
      "setup",
      "--cluster",
      "checks",
      "--region",
      "us-east-1",
      "--vpc-cidr",
      "10.0.0.0/16",
      "--nodegroup",
      "default",
      "--ami",
      "arm64=ami-12345678",
      "--otel-logs",
      "https://otel.example.com:4318",
      "--yes",
    ], { PODMIN_CACHE_DIR: `${tmp}/cache`, PODMIN_HOME: `${tmp}/home` });
    assert.equal(r.code, 2, r.stderr);
    assert.match(r.stderr, /--otel-logs needs Fluent Bit .*pins no fluent-bit for arm64/);
    assert.match(r.stderr, /--dependency-catalog FILE with a "fluent-bit" entry/);
    const s3 = await (await fetch(`${m.endpoint}/`)).text();
    assert.doesNotMatch(s3, new RegExp(`<Name>${bucket}</Name>`), "no bucket was created");
    assert.doesNotMatch(r.stderr, /downloading|uploading/i, "nothing was downloaded");
  } finally {
    await Deno.remove(tmp, { recursive: true });
  }
});

Deno.test("agent run: --ipv6-prefix must be an IPv6 prefix", async () => {
  const { agent } = await import("../support/programs.ts");
  const r = await agent([
    "run",
    "--cluster",
    "prod",
    "--nodegroup",
    "w",
    "--bucket",
    "s3://x",
    "--ipv6-prefix",
    "not-a-prefix",
  ]);
  assert.equal(r.code, 2);
  assert.match(r.stderr, /--ipv6-prefix: invalid IPv6 prefix "not-a-prefix"/);
  const hostBits = await agent([
    "run",
    "--cluster",
    "prod",
    "--nodegroup",
    "w",
    "--bucket",
    "s3://x",
    "--ipv6-prefix",
    "2600:1f18:4b2:aa00:1234::1/80",
  ]);
  assert.equal(hostBits.code, 2);
  assert.match(hostBits.stderr, /host bits set/);
});

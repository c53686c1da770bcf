import assert from "node:assert/strict";
import { UsageError } from "../kit/errors.ts";
import { parseS3ObjectUrl, S3ObjectUrlError } from "./object_url.ts";

Deno.test("parseS3ObjectUrl: bucket and key of one object", () => {
  assert.deepEqual(parseS3ObjectUrl("s3://b-1/x/y.pem"), { bucket: "b-1", key: "x/y.pem" });
  assert.deepEqual(parseS3ObjectUrl("s3://my.bucket/k"), { bucket: "my.bucket", key: "k" });
});

Deno.test("parseS3ObjectUrl: refuses a prefix, a bucket alone and other schemes", () => {
  for (
    const bad of [
      "s3://b-1/",
      "s3://b-1",
      "s3://b-1/dir/",
      "https://b-1/k",
      "s3://B/k",
      "",
      "s3://b-1/a//b",
      "s3://b-1/../k",
      "s3://b-1/a/./k",
      "s3://b..1/k",
    ]
  ) {
    assert.throws(() => parseS3ObjectUrl(bad), /exact s3:\/\/BUCKET\/KEY/);
  }
});

Deno.test("parseS3ObjectUrl: a typed usage error naming the flag", () => {
  try {
    parseS3ObjectUrl("s3://b-1/", "--otel-ca");
    throw new Error("not refused");
  } catch (err) {
    assert.ok(err instanceof S3ObjectUrlError);
    assert.ok(err instanceof UsageError);
    assert.equal((err as Error).message, '--otel-ca "s3://b-1/" is not an exact s3://BUCKET/KEY');
  }
});

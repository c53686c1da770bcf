/**
 * Where `S3Store` sends its requests on AWS (no custom endpoint), checked against the AWS SDK's
 * S3 client resolving the same GetObject with dual-stack endpoints on: virtual-hosted style for a
 * plain bucket name, path style for a dotted one, and the key encoded the same way.
 */

import assert from "node:assert/strict";
import { GetObjectCommand, S3Client } from "@aws-sdk/client-s3";
import { S3Store } from "../../core/store/s3_store.ts";

/** Host and path of the SDK's request for `key`. */
async function sdkUrl(bucket: string, key: string, region: string): Promise<string> {
  const client = new S3Client({
    region,
    useDualstackEndpoint: true,
    credentials: { accessKeyId: "a", secretAccessKey: "b" },
  });
  let url = "";
  // deno-lint-ignore no-explicit-any
  (client.middlewareStack as any).add(
    () => (args: { request: { hostname: string; path: string } }) => {
      url = `${args.request.hostname}${args.request.path}`;
      throw new Error("resolved");
    },
    { step: "finalizeRequest" },
  );
  await client.send(new GetObjectCommand({ Bucket: bucket, Key: key })).catch(() => {});
  return url;
}

Deno.test("s3 urls: the store's AWS endpoints and key encoding are the SDK's (dual-stack)", async () => {
  const saved = Deno.env.get("AWS_ENDPOINT_URL");
  Deno.env.delete("AWS_ENDPOINT_URL");
  try {
    for (
      const [bucket, region] of [
        ["podmin-cluster-a", "us-east-1"],
        ["podmin-cluster-b", "eu-central-1"],
        ["podmin.dotted.bucket", "us-west-2"],
      ]
    ) {
      const store = new S3Store({ bucket, region });
      for (const key of ["deployments/index.json", "apps/a b/ü+=&?.json", "x/~y*z"]) {
        const ours = store.objectUrl(key);
        const sdk = await sdkUrl(bucket, key, region);
        assert.ok(sdk, `the SDK resolved ${bucket}/${key}`);
        assert.equal(`${ours.hostname}${ours.pathname}`, sdk, `${bucket} ${key}`);
        assert.equal(ours.protocol, "https:");
      }
    }
  } finally {
    if (saved !== undefined) Deno.env.set("AWS_ENDPOINT_URL", saved);
  }
});

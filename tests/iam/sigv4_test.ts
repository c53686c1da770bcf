/**
 * The user-data's AWS access (vmconfig/lib/aws.sh: curl --aws-sigv4 with the instance role's
 * temporary credentials) against moto with IAM enforced: moto verifies each SigV4 signature and
 * the session token, and authorizes the call with the role's policy (the node role's, as setup
 * generates it). A download succeeds only when curl's signature is right.
 */

import assert from "node:assert/strict";
import { PutObjectCommand, S3Client } from "@aws-sdk/client-s3";
import { assumedRole, generatedNodePolicy, type RoleCredentials } from "./aws_iam.ts";
import { dedicatedMoto } from "../support/moto.ts";
import { testWith } from "../support/requirements.ts";

/** The same secret with its first character changed (never equal to it: the first may be "x"). */
function otherSecret(secret: string): string {
  return `${secret.startsWith("x") ? "y" : "x"}${secret.slice(1)}`;
}

const AWS_LIB = new URL("../../vmconfig/lib/aws.sh", import.meta.url).pathname;

/** Runs a bash snippet with vmconfig/lib/aws.sh sourced and the role credentials loaded. */
async function withAwsLib(creds: RoleCredentials, script: string, env: Record<string, string>) {
  const out = await new Deno.Command("bash", {
    args: [
      "-c",
      `set -uo pipefail; log() { echo "log: $*" >&2; }; source "$AWS_LIB"
AWS_CREDS_KEY=$KEY AWS_CREDS_SECRET=$SECRET AWS_CREDS_TOKEN=$TOKEN
${script}`,
    ],
    env: {
      AWS_LIB,
      KEY: creds.accessKeyId,
      SECRET: creds.secretAccessKey,
      TOKEN: creds.sessionToken,
      PODMIN_CURL_RETRIES: "0",
      ...env,
    },
    stdout: "piped",
    stderr: "piped",
  }).output();
  const dec = new TextDecoder();
  return { code: out.code, stdout: dec.decode(out.stdout), stderr: dec.decode(out.stderr) };
}

testWith(
  "sigv4 [moto, IAM enforced]: user-data's curl --aws-sigv4 requests pass moto's signature check; a wrong secret does not",
  { tools: ["curl"] },
  async () => {
    const m = await dedicatedMoto();
    const tmp = await Deno.makeTempDir({ prefix: "podmin-sigv4-" });
    try {
      const bucket = await m.createBucket();
      const admin = new S3Client({
        region: "us-east-1",
        endpoint: m.endpoint,
        forcePathStyle: true,
        credentials: { accessKeyId: "testing", secretAccessKey: "testing" },
      });
      const body = new TextEncoder().encode("kubelet bytes ".repeat(1000));
      await admin.send(
        new PutObjectCommand({ Bucket: bucket, Key: "dependencies/blobs/abc", Body: body }),
      );
      await admin.send(new PutObjectCommand({ Bucket: bucket, Key: "infra/secret", Body: "x" }));
      const policy = await generatedNodePolicy({ bucket, cluster: "test" });
      const role = await assumedRole({ endpoint: m.endpoint, role: "podmin-node", policy });
      await m.enforceIam(true);
      const env = { BASE: `${m.endpoint}/${bucket}`, OUT: `${tmp}/out` };

      // s3_get as user-data calls it: signed GET with the session token.
      const ok = await withAwsLib(
        role,
        's3_get "$BASE" us-east-1 dependencies/blobs/abc "$OUT"',
        env,
      );
      assert.equal(ok.code, 0, ok.stderr);
      assert.deepEqual(await Deno.readFile(`${tmp}/out`), body);

      // Signed right, but the role may not read infra/: moto's IAM says so (403, not a signature error).
      const denied = await withAwsLib(
        role,
        'aws_request s3 us-east-1 -H "x-amz-content-sha256: $EMPTY_SHA256" "$BASE/infra/secret"',
        env,
      );
      assert.match(denied.stdout, /<Code>AccessDenied<\/Code>/);

      // An EC2 Query call (signed POST body), as bootstrap makes them: the signature passes, and
      // moto's IAM then refuses an action the node role does not have.
      const ec2 = await withAwsLib(role, 'ec2_call us-east-1 "Action=DescribeInstances"', {
        ...env,
        PODMIN_EC2_ENDPOINT: m.endpoint,
      });
      assert.notEqual(ec2.code, 0);
      assert.match(ec2.stdout, /<Code>(AccessDenied|UnauthorizedOperation)<\/Code>/, ec2.stdout);
      const ec2Wrong = await withAwsLib(
        { ...role, secretAccessKey: otherSecret(role.secretAccessKey) },
        'ec2_call us-east-1 "Action=DescribeInstances"',
        { ...env, PODMIN_EC2_ENDPOINT: m.endpoint },
      );
      assert.match(ec2Wrong.stdout, /SignatureDoesNotMatch|AuthFailure/, ec2Wrong.stdout);

      // A wrong secret: moto recomputes the signature and refuses it; nothing is read.
      const wrong = { ...role, secretAccessKey: otherSecret(role.secretAccessKey) };
      const bad = await withAwsLib(
        wrong,
        'aws_request s3 us-east-1 -H "x-amz-content-sha256: $EMPTY_SHA256" "$BASE/dependencies/blobs/abc"',
        env,
      );
      assert.match(bad.stdout.slice(0, 2000), /<Code>SignatureDoesNotMatch<\/Code>/);
      const failed = await withAwsLib(
        { ...role, secretAccessKey: otherSecret(role.secretAccessKey) },
        's3_get "$BASE" us-east-1 dependencies/blobs/abc "$OUT.2"',
        env,
      );
      assert.notEqual(failed.code, 0, "s3_get fails on a rejected signature");
    } finally {
      await m.close();
      await Deno.remove(tmp, { recursive: true });
    }
  },
);

/**
 * Test support for IAM on moto: the node role's policy as `podmin setup` generates it, with the
 * apply-time interpolations resolved, and an IAM user holding exactly that policy.
 */

import * as path from "node:path";
import { podmin } from "../support/programs.ts";

/** moto's account id (every moto resource lives in it). */
export const MOTO_ACCOUNT = "123456789012";

/**
 * The node role's inline policy from the configuration `podmin setup --dry-run` writes, with the
 * partition, DNS suffix and account id resolved as Terraform resolves them at apply time.
 */
export async function generatedNodePolicy(o: { bucket: string; cluster: string }): Promise<string> {
  const out = await Deno.makeTempDir({ prefix: "podmin-iam-config-" });
  try {
    const r = await podmin([
      "--bucket",
      `s3://${o.bucket}`,
      "setup",
      "--cluster",
      o.cluster,
      "--region",
      "us-east-1",
      "--vpc-cidr",
      "10.0.0.0/16",
      "--nodegroup",
      "workers",
      "--dry-run",
      "--out",
      out,
    ], { PODMIN_CACHE_DIR: path.join(out, "cache"), AWS_ENDPOINT_URL: "http://127.0.0.1:9" });
    if (r.code !== 0) throw new Error(`setup --dry-run failed: ${r.stderr}`);
    const config = JSON.parse(await Deno.readTextFile(path.join(out, "main.tf.json")));
    const policy: string = config.resource.aws_iam_role_policy.node.policy;
    const resolved = policy
      .replaceAll("${data.aws_partition.current.partition}", "aws")
      .replaceAll("${data.aws_partition.current.dns_suffix}", "amazonaws.com")
      .replaceAll("${data.aws_caller_identity.current.account_id}", MOTO_ACCOUNT);
    if (resolved.includes("${")) throw new Error(`unresolved interpolation in ${resolved}`);
    return resolved;
  } finally {
    await Deno.remove(out, { recursive: true });
  }
}

/** Access keys of an IAM user. */
export interface UserKeys {
  AWS_ACCESS_KEY_ID: string;
  AWS_SECRET_ACCESS_KEY: string;
}

/**
 * Calls moto's IAM Query API while IAM is not enforced (moto then reads the service from the
 * credential scope and checks no signature).
 */
async function iam(endpoint: string, params: Record<string, string>): Promise<string> {
  const res = await fetch(endpoint, {
    method: "POST",
    headers: {
      "Content-Type": "application/x-www-form-urlencoded",
      Authorization:
        "AWS4-HMAC-SHA256 Credential=testing/20260101/us-east-1/iam/aws4_request, SignedHeaders=host, Signature=0",
    },
    body: new URLSearchParams({ ...params, Version: "2010-05-08" }),
  });
  const text = await res.text();
  if (!res.ok) throw new Error(`IAM ${params.Action}: ${res.status} ${text}`);
  return text;
}

/** Creates an IAM user whose only permissions are `policy` (inline) and returns its keys. */
export async function userWithPolicy(
  o: { endpoint: string; user: string; policy: string },
): Promise<UserKeys> {
  await iam(o.endpoint, { Action: "CreateUser", UserName: o.user });
  await iam(o.endpoint, {
    Action: "PutUserPolicy",
    UserName: o.user,
    PolicyName: `${o.user}-policy`,
    PolicyDocument: o.policy,
  });
  const xml = await iam(o.endpoint, { Action: "CreateAccessKey", UserName: o.user });
  const id = /<AccessKeyId>([^<]+)</.exec(xml)?.[1];
  const secret = /<SecretAccessKey>([^<]+)</.exec(xml)?.[1];
  if (!id || !secret) throw new Error(`no access key in ${xml}`);
  return { AWS_ACCESS_KEY_ID: id, AWS_SECRET_ACCESS_KEY: secret };
}

/** Temporary credentials of an assumed role (what an instance role hands out through IMDS). */
export interface RoleCredentials {
  accessKeyId: string;
  secretAccessKey: string;
  sessionToken: string;
}

/**
 * Creates a role with `policy` inline that the account (or `principal`, an ARN) may assume, and
 * assumes it (as EC2 does for an instance profile). Call while IAM is not enforced.
 */
export async function assumedRole(
  o: { endpoint: string; role: string; policy: string; principal?: string },
): Promise<RoleCredentials> {
  const trust = JSON.stringify({
    Version: "2012-10-17",
    Statement: [{
      Effect: "Allow",
      Principal: { AWS: o.principal ?? `arn:aws:iam::${MOTO_ACCOUNT}:root` },
      Action: "sts:AssumeRole",
    }],
  });
  await iam(o.endpoint, {
    Action: "CreateRole",
    RoleName: o.role,
    AssumeRolePolicyDocument: trust,
  });
  await iam(o.endpoint, {
    Action: "PutRolePolicy",
    RoleName: o.role,
    PolicyName: `${o.role}-policy`,
    PolicyDocument: o.policy,
  });
  const res = await fetch(o.endpoint, {
    method: "POST",
    headers: {
      "Content-Type": "application/x-www-form-urlencoded",
      Authorization:
        "AWS4-HMAC-SHA256 Credential=testing/20260101/us-east-1/sts/aws4_request, SignedHeaders=host, Signature=0",
    },
    body: new URLSearchParams({
      Action: "AssumeRole",
      RoleArn: `arn:aws:iam::${MOTO_ACCOUNT}:role/${o.role}`,
      RoleSessionName: "i-0123456789abcdef0",
      Version: "2011-06-15",
    }),
  });
  const xml = await res.text();
  const field = (name: string) => new RegExp(`<${name}>([^<]+)</${name}>`).exec(xml)?.[1];
  const creds = {
    accessKeyId: field("AccessKeyId") ?? "",
    secretAccessKey: field("SecretAccessKey") ?? "",
    sessionToken: field("SessionToken") ?? "",
  };
  if (!res.ok || !creds.accessKeyId) throw new Error(`AssumeRole: ${res.status} ${xml}`);
  return creds;
}

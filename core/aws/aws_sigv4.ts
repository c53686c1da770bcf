/**
 * AWS Signature Version 4 for the few calls Podmin makes itself (S3 objects, Parameter Store,
 * Secrets Manager). Checked against `@smithy/signature-v4` in `aws_sigv4_test.ts` and against
 * moto with IAM enforced (tests/iam/).
 */

import { createHmac } from "node:crypto";
import { sha256Hex } from "../kit/digest.ts";

/** One set of AWS credentials. */
export interface AwsCredentials {
  accessKeyId: string;
  secretAccessKey: string;
  sessionToken?: string;
  /** When temporary credentials stop working. */
  expiration?: Date;
}

/** The SHA-256 of an empty payload, which every bodiless request signs. */
export const EMPTY_SHA256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

/** What `signV4` signs. */
export interface SignInput {
  method: string;
  url: URL;
  /** Header names in lower case; every one given is signed and must be sent as given. */
  headers: Record<string, string>;
  /** Lower-case hex SHA-256 of the body. */
  payloadSha256: string;
  credentials: AwsCredentials;
  region: string;
  service: string;
  /** Signing time (default now). */
  now?: Date;
  /** S3 sends `x-amz-content-sha256` and signs its path as given; other services do not. */
  s3?: boolean;
}

/** The request's headers plus `authorization`, `x-amz-date` and the token, ready to send. */
export function signV4(input: SignInput): Record<string, string> {
  const amzDate = (input.now ?? new Date()).toISOString().replace(/[-:]|\.\d{3}/g, "");
  const day = amzDate.slice(0, 8);
  const headers: Record<string, string> = { ...input.headers, host: input.url.host };
  headers["x-amz-date"] = amzDate;
  if (input.s3) headers["x-amz-content-sha256"] = input.payloadSha256;
  if (input.credentials.sessionToken) {
    headers["x-amz-security-token"] = input.credentials.sessionToken;
  }
  const names = Object.keys(headers).map((n) => n.toLowerCase()).sort();
  const lower = Object.fromEntries(Object.entries(headers).map(([k, v]) => [k.toLowerCase(), v]));
  const signedHeaders = names.join(";");
  const canonical = [
    input.method,
    canonicalPath(input.url.pathname, input.s3 === true),
    canonicalQuery(input.url.searchParams),
    names.map((n) => `${n}:${lower[n].trim().replace(/\s+/g, " ")}\n`).join(""),
    signedHeaders,
    input.payloadSha256,
  ].join("\n");
  const scope = `${day}/${input.region}/${input.service}/aws4_request`;
  const toSign = ["AWS4-HMAC-SHA256", amzDate, scope, sha256Hex(canonical)].join("\n");
  const signature = createHmac("sha256", signingKey(input.credentials, day, input))
    .update(toSign).digest("hex");
  delete headers.host; // fetch sends it from the URL
  headers.authorization =
    `AWS4-HMAC-SHA256 Credential=${input.credentials.accessKeyId}/${scope}, ` +
    `SignedHeaders=${signedHeaders}, Signature=${signature}`;
  return headers;
}

/** The payload hash a presigned URL signs: the body is not known when the URL is made. */
export const UNSIGNED_PAYLOAD = "UNSIGNED-PAYLOAD";

/** Longest validity SigV4 allows a presigned URL (7 days), in seconds. */
export const PRESIGN_MAX_SECONDS = 7 * 24 * 3600;

/** What `presignV4` signs: a bodiless request whose only signed header is `host`. */
export interface PresignInput {
  method: string;
  url: URL;
  credentials: AwsCredentials;
  region: string;
  service: string;
  /** Seconds the URL stays valid (`X-Amz-Expires`), 1 to `PRESIGN_MAX_SECONDS`. */
  expiresSeconds: number;
  /** Signing time (default now). */
  now?: Date;
}

/**
 * SigV4 query-string authentication (a presigned URL), as S3 defines it: `X-Amz-Algorithm`,
 * `X-Amz-Credential`, `X-Amz-Date`, `X-Amz-Expires`, `X-Amz-SignedHeaders=host`, the session
 * token when the credentials have one (`X-Amz-Security-Token`, signed), then `X-Amz-Signature`.
 * The path is signed as sent (S3's rule) and the payload as `UNSIGNED-PAYLOAD`. The URL carries
 * the access key id, never the secret; anyone holding it can make that one request until it
 * expires, so it is not logged.
 */
export function presignV4(input: PresignInput): URL {
  if (
    !Number.isInteger(input.expiresSeconds) || input.expiresSeconds < 1 ||
    input.expiresSeconds > PRESIGN_MAX_SECONDS
  ) {
    throw new RangeError(
      `presigned URL lifetime ${input.expiresSeconds} s: must be 1 to ${PRESIGN_MAX_SECONDS} s`,
    );
  }
  const amzDate = (input.now ?? new Date()).toISOString().replace(/[-:]|\.\d{3}/g, "");
  const day = amzDate.slice(0, 8);
  const scope = `${day}/${input.region}/${input.service}/aws4_request`;
  const url = new URL(input.url);
  const q = url.searchParams;
  q.set("X-Amz-Algorithm", "AWS4-HMAC-SHA256");
  q.set("X-Amz-Credential", `${input.credentials.accessKeyId}/${scope}`);
  q.set("X-Amz-Date", amzDate);
  q.set("X-Amz-Expires", String(input.expiresSeconds));
  q.set("X-Amz-SignedHeaders", "host");
  if (input.credentials.sessionToken) {
    q.set("X-Amz-Security-Token", input.credentials.sessionToken);
  }
  const canonical = [
    input.method,
    canonicalPath(url.pathname, true),
    canonicalQuery(q),
    `host:${url.host}\n`,
    "host",
    UNSIGNED_PAYLOAD,
  ].join("\n");
  const toSign = ["AWS4-HMAC-SHA256", amzDate, scope, sha256Hex(canonical)].join("\n");
  const signature = createHmac("sha256", signingKey(input.credentials, day, input))
    .update(toSign).digest("hex");
  // The query as signed (RFC 3986 encoded), so that no re-encoding by URLSearchParams differs.
  url.search = `?${canonicalQuery(q)}&X-Amz-Signature=${signature}`;
  return url;
}

function signingKey(
  credentials: AwsCredentials,
  day: string,
  o: { region: string; service: string },
): Uint8Array {
  let key: Uint8Array = hmac(`AWS4${credentials.secretAccessKey}`, day);
  for (const part of [o.region, o.service, "aws4_request"]) key = hmac(key, part);
  return key;
}

/** RFC 3986 encoding as SigV4 wants it: everything but unreserved characters, `/` optional. */
export function uriEncode(value: string, keepSlash = false): string {
  const encoded = encodeURIComponent(value)
    .replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);
  return keepSlash ? encoded.replace(/%2F/g, "/") : encoded;
}

/**
 * S3 signs the path as sent (encoded once); other services sign each segment encoded again.
 * `pathname` is already percent-encoded by `URL`.
 */
function canonicalPath(pathname: string, s3: boolean): string {
  if (s3) return pathname || "/";
  return (pathname || "/").split("/").map((s) => uriEncode(decodeURIComponent(s))).join("/");
}

function canonicalQuery(params: URLSearchParams): string {
  const pairs = [...params].map(([k, v]) => [uriEncode(k), uriEncode(v)]);
  pairs.sort(([a, x], [b, y]) => a < b ? -1 : a > b ? 1 : x < y ? -1 : x > y ? 1 : 0);
  return pairs.map(([k, v]) => `${k}=${v}`).join("&");
}

function hmac(key: string | Uint8Array, data: string): Uint8Array {
  return createHmac("sha256", key).update(data).digest();
}

import assert from "node:assert/strict";
import { SignatureV4 } from "@smithy/signature-v4";
import { EMPTY_SHA256, PRESIGN_MAX_SECONDS, presignV4, signV4 } from "./aws_sigv4.ts";
import { sha256Hex } from "../kit/digest.ts";
import { SmithySha256 } from "../../tests/support/smithy_sha256.ts";

const NOW = new Date("2026-11-30T12:34:56Z");
const CREDS = {
  accessKeyId: "AKIDEXAMPLE",
  secretAccessKey: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
};

interface Case {
  what: string;
  method: string;
  url: URL;
  headers: Record<string, string>;
  body?: string;
  service: string;
  s3: boolean;
  sessionToken?: string;
}

/** The signature `@smithy/signature-v4` (the AWS SDK's signer) computes for the same request. */
async function smithy(o: Omit<Case, "what">): Promise<Record<string, string>> {
  const signer = new SignatureV4({
    credentials: { ...CREDS, sessionToken: o.sessionToken },
    region: "eu-west-1",
    service: o.service,
    sha256: SmithySha256,
    uriEscapePath: !o.s3,
    applyChecksum: o.s3,
  });
  const signed = await signer.sign({
    method: o.method,
    protocol: o.url.protocol,
    hostname: o.url.hostname,
    port: o.url.port ? Number(o.url.port) : undefined,
    path: o.url.pathname,
    query: Object.fromEntries(o.url.searchParams),
    headers: { ...o.headers, host: o.url.host },
    body: o.body,
  }, { signingDate: NOW });
  return signed.headers as Record<string, string>;
}

const cases: Case[] = [
  {
    what: "S3 GET of a key with spaces, unicode and a conditional header",
    method: "GET",
    url: new URL("https://b.s3.dualstack.eu-west-1.amazonaws.com/apps/a%20b/%C3%A9t%C3%A9%2B1"),
    headers: { "if-none-match": '"abc"' },
    service: "s3",
    s3: true,
  },
  {
    what: "S3 multipart part upload with query parameters, on a path-style endpoint with a port",
    method: "PUT",
    url: new URL("http://127.0.0.1:5000/bucket/k/blob?partNumber=2&uploadId=a~b%2Fc%3D"),
    headers: { "content-type": "application/octet-stream" },
    body: "part bytes",
    service: "s3",
    s3: true,
    sessionToken: "token/with+chars=",
  },
  {
    what: "S3 list with an empty and a slash-holding query value",
    method: "GET",
    url: new URL(
      "https://s3.eu-west-1.amazonaws.com/b.with.dots?list-type=2&prefix=a%2Fb%20c&continuation-token=",
    ),
    headers: {},
    service: "s3",
    s3: true,
  },
  {
    what: "Parameter Store JSON call",
    method: "POST",
    url: new URL("https://ssm.eu-west-1.amazonaws.com/"),
    headers: {
      "content-type": "application/x-amz-json-1.1",
      "x-amz-target": "AmazonSSM.GetParameters",
    },
    body: '{"Names":["/a/b"],"WithDecryption":true}',
    service: "ssm",
    s3: false,
  },
];

for (const c of cases) {
  Deno.test(`sigv4: ${c.what}: same signature as the AWS SDK's signer`, async () => {
    const body = c.body ?? "";
    const ours = signV4({
      method: c.method,
      url: c.url,
      headers: c.headers,
      payloadSha256: c.body === undefined ? EMPTY_SHA256 : sha256Hex(body),
      credentials: { ...CREDS, sessionToken: c.sessionToken },
      region: "eu-west-1",
      service: c.service,
      now: NOW,
      s3: c.s3,
    });
    const theirs = await smithy({ ...c, body: c.body });
    assert.equal(ours.authorization, theirs.authorization);
    assert.equal(ours["x-amz-date"], theirs["x-amz-date"]);
    assert.equal(ours["x-amz-security-token"], theirs["x-amz-security-token"]);
    if (c.s3) assert.equal(ours["x-amz-content-sha256"], theirs["x-amz-content-sha256"]);
  });
}

Deno.test("sigv4: a different secret, time or header gives a different signature", () => {
  const base = {
    method: "GET",
    url: new URL("https://s3.eu-west-1.amazonaws.com/b/k"),
    headers: {},
    payloadSha256: EMPTY_SHA256,
    credentials: CREDS,
    region: "eu-west-1",
    service: "s3",
    now: NOW,
    s3: true,
  };
  const sig = (o: Partial<typeof base>) => signV4({ ...base, ...o }).authorization;
  const a = sig({});
  assert.notEqual(sig({ credentials: { ...CREDS, secretAccessKey: "other" } }), a);
  assert.notEqual(sig({ now: new Date(NOW.getTime() + 1000) }), a);
  assert.notEqual(sig({ headers: { range: "bytes=0-1" } }), a);
  assert.match(
    a,
    /^AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE\/20261130\/eu-west-1\/s3\/aws4_request, SignedHeaders=host;x-amz-content-sha256;x-amz-date, Signature=[0-9a-f]{64}$/,
  );
});

for (
  const [what, url, sessionToken] of [
    [
      "a blob key on the dual-stack endpoint",
      "https://b.s3.dualstack.eu-west-1.amazonaws.com/apps/blobs/sha256/ab%2Bc",
      undefined,
    ],
    [
      "a path-style endpoint with a port and a session token",
      "http://127.0.0.1:5000/bucket/k",
      "tok/en+=",
    ],
  ] as const
) {
  Deno.test(`sigv4 presign: ${what}: the same URL as the AWS SDK's presigner`, async () => {
    const u = new URL(url);
    const ours = presignV4({
      method: "GET",
      url: u,
      credentials: { ...CREDS, sessionToken },
      region: "eu-west-1",
      service: "s3",
      expiresSeconds: 300,
      now: NOW,
    });
    const signer = new SignatureV4({
      credentials: { ...CREDS, sessionToken },
      region: "eu-west-1",
      service: "s3",
      sha256: SmithySha256,
      uriEscapePath: false,
    });
    const theirs = await signer.presign({
      method: "GET",
      protocol: u.protocol,
      hostname: u.hostname,
      port: u.port ? Number(u.port) : undefined,
      path: u.pathname,
      query: {},
      // As @aws-sdk/s3-request-presigner asks: an unsigned payload, `host` the only signed header.
      headers: { host: u.host, "x-amz-content-sha256": "UNSIGNED-PAYLOAD" },
    }, {
      signingDate: NOW,
      expiresIn: 300,
      unhoistableHeaders: new Set(["x-amz-content-sha256"]),
      unsignableHeaders: new Set(["x-amz-content-sha256"]),
    });
    const q = theirs.query as Record<string, string>;
    assert.equal(ours.searchParams.get("X-Amz-Signature"), q["X-Amz-Signature"]);
    assert.deepEqual(
      Object.fromEntries(ours.searchParams),
      q,
      "every query parameter as the SDK writes it",
    );
    assert.equal(ours.origin + ours.pathname, u.origin + u.pathname, "the exact object");
    assert.ok(!ours.search.includes(CREDS.secretAccessKey), "the secret is not in the URL");
  });
}

Deno.test("sigv4 presign: the lifetime must be 1 s to 7 days", () => {
  const o = {
    method: "GET",
    url: new URL("https://s3.eu-west-1.amazonaws.com/b/k"),
    credentials: CREDS,
    region: "eu-west-1",
    service: "s3",
    now: NOW,
  };
  assert.throws(() => presignV4({ ...o, expiresSeconds: 0 }), RangeError);
  assert.throws(() => presignV4({ ...o, expiresSeconds: PRESIGN_MAX_SECONDS + 1 }), RangeError);
  const a = presignV4({ ...o, expiresSeconds: 60 });
  assert.equal(a.searchParams.get("X-Amz-Expires"), "60");
  assert.notEqual(
    presignV4({ ...o, expiresSeconds: 61 }).searchParams.get("X-Amz-Signature"),
    a.searchParams.get("X-Amz-Signature"),
  );
});

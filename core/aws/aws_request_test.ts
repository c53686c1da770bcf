import assert from "node:assert/strict";
import { GetObjectCommand, S3Client } from "@aws-sdk/client-s3";
import {
  configuredEndpoint,
  errorFields,
  responseError,
  xmlDecode,
  xmlElements,
  xmlEscape,
  xmlText,
} from "./aws_request.ts";
import { S3Store } from "../store/s3_store.ts";

Deno.test("errorFields: S3's XML error document", () => {
  const xml = `<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>PreconditionFailed</Code>` +
    `<Message>At least one of the pre-conditions you specified did not hold &amp; more</Message>` +
    `<Condition>If-Match</Condition></Error>`;
  assert.deepEqual(errorFields(xml), {
    code: "PreconditionFailed",
    message: "At least one of the pre-conditions you specified did not hold & more",
  });
});

Deno.test("errorFields: the JSON protocols' __type (namespace and suffix dropped)", () => {
  assert.deepEqual(
    errorFields('{"__type":"com.amazonaws.ssm#ParameterNotFound","message":"gone"}'),
    { code: "ParameterNotFound", message: "gone" },
  );
  assert.deepEqual(
    errorFields('{"__type":"AccessDeniedException:http://internal","Message":"no"}'),
    { code: "AccessDeniedException", message: "no" },
  );
  assert.deepEqual(errorFields("{not json"), { code: "", message: "{not json" });
  assert.deepEqual(errorFields(""), { code: "", message: "" });
});

Deno.test("responseError: status kept, body read only up to its bound", async () => {
  const e = await responseError(
    new Response("<Error><Code>NoSuchBucket</Code><Message>m</Message></Error>", { status: 404 }),
  );
  assert.equal(e.status, 404);
  assert.equal(e.code, "NoSuchBucket");
  assert.equal(e.name, "NoSuchBucket");
  // A HEAD answer has no body: the status alone.
  const head = await responseError(new Response(null, { status: 403 }));
  assert.equal(head.code, "");
  assert.match(head.message, /HTTP 403/);
  // An endless body is cut off, not read to the end.
  let pulled = 0;
  const endless = new ReadableStream<Uint8Array>({
    pull(c) {
      pulled++;
      c.enqueue(new Uint8Array(16 * 1024).fill(0x41));
    },
  });
  const big = await responseError(new Response(endless, { status: 500 }));
  assert.equal(big.status, 500);
  assert.ok(pulled < 10, `read ${pulled} chunks`);
});

Deno.test("xml helpers: elements, entities, escaping", () => {
  const page =
    "<Contents><Key>a&lt;b</Key></Contents><Contents><Key>c&#x2F;d&#47;e</Key></Contents>";
  assert.deepEqual(xmlElements(page, "Contents").map((c) => xmlText(c, "Key")), [
    "a<b",
    "c/d/e",
  ]);
  assert.equal(xmlText(page, "Missing"), undefined);
  assert.equal(xmlDecode("&quot;&apos;&gt;&amp;lt;"), `"'>&lt;`);
  assert.equal(xmlEscape("a<b>&c"), "a&lt;b&gt;&amp;c");
  assert.equal(xmlDecode(xmlEscape("x & <y>")), "x & <y>");
});

Deno.test("configuredEndpoint: the service's own variable, then AWS_ENDPOINT_URL, then none", () => {
  const env = (vars: Record<string, string>) => (name: string) => vars[name];
  const all = {
    AWS_ENDPOINT_URL: "http://all:1",
    AWS_ENDPOINT_URL_S3: "http://s3:2",
    AWS_ENDPOINT_URL_SSM: "http://ssm:3",
    AWS_ENDPOINT_URL_SECRETS_MANAGER: "http://sm:4",
  };
  assert.equal(configuredEndpoint("S3", env(all)), "http://s3:2");
  assert.equal(configuredEndpoint("SSM", env(all)), "http://ssm:3");
  assert.equal(configuredEndpoint("Secrets Manager", env(all)), "http://sm:4");
  assert.equal(
    configuredEndpoint("SSM", env({ AWS_ENDPOINT_URL: "http://all:1" })),
    "http://all:1",
  );
  // An empty variable is unset, as in the SDK.
  assert.equal(
    configuredEndpoint("S3", env({ AWS_ENDPOINT_URL_S3: "", AWS_ENDPOINT_URL: "http://all:1" })),
    "http://all:1",
  );
  assert.equal(configuredEndpoint("S3", env({})), undefined);
  assert.equal(
    configuredEndpoint("S3", env({ ...all, AWS_IGNORE_CONFIGURED_ENDPOINT_URLS: "true" })),
    undefined,
  );
});

Deno.test("configuredEndpoint: the SDK's S3 client and S3Store go to the same endpoint", async () => {
  const hits: string[] = [];
  const serve = (name: string) =>
    Deno.serve({ hostname: "127.0.0.1", port: 0, onListen: () => {} }, () => {
      hits.push(name);
      return new Response("x", { status: 200, headers: { etag: '"e"' } });
    });
  const general = serve("AWS_ENDPOINT_URL");
  const s3 = serve("AWS_ENDPOINT_URL_S3");
  const saved = ["AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3"].map((n) =>
    [n, Deno.env.get(n)] as const
  );
  try {
    Deno.env.set("AWS_ENDPOINT_URL", `http://127.0.0.1:${general.addr.port}`);
    Deno.env.set("AWS_ENDPOINT_URL_S3", `http://127.0.0.1:${s3.addr.port}`);
    const credentials = { accessKeyId: "test", secretAccessKey: "test" };
    const sdk = new S3Client({ region: "us-east-1", forcePathStyle: true, credentials });
    const out = await sdk.send(new GetObjectCommand({ Bucket: "b", Key: "k" }));
    await out.Body?.transformToByteArray();
    sdk.destroy();
    const store = new S3Store({
      bucket: "b",
      region: "us-east-1",
      credentials: () => Promise.resolve(credentials),
    });
    await store.get("k");
    assert.deepEqual(hits, ["AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL_S3"]);
  } finally {
    for (const [n, v] of saved) v === undefined ? Deno.env.delete(n) : Deno.env.set(n, v);
    await general.shutdown();
    await s3.shutdown();
  }
});

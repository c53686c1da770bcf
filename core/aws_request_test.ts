import assert from "node:assert/strict";
import {
  errorFields,
  responseError,
  xmlDecode,
  xmlElements,
  xmlEscape,
  xmlText,
} from "./aws_request.ts";

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

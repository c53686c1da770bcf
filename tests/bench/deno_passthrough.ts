/**
 * The runtime's floor for the registry benchmark (`registry_bench.ts`): the least a Deno server
 * can do to serve one stored object, so the agent's registry can be compared with Deno itself as
 * well as with distribution.
 *
 *   deno run -A tests/bench/deno_passthrough.ts PORT plain|verify SOURCE DIGEST
 *
 * Every GET (any path; `/v2/` answers 200 for readiness) streams SOURCE — an http(s) URL (fetched
 * anew per request) or a file path — as the response body. `plain` hands the source's stream to
 * `Deno.serve` untouched (no JavaScript per chunk); `verify` passes it through the registry's own
 * verifying stream (registry/image_reader.ts: a SHA-256 of every chunk, the last chunk held back
 * until the whole matches DIGEST).
 */

import { verifying } from "../../registry/image_reader.ts";

const [port, mode, source, digest] = Deno.args;
if (!port || !["plain", "verify"].includes(mode) || !source || !digest) {
  console.error("usage: deno_passthrough.ts PORT plain|verify SOURCE DIGEST");
  Deno.exit(2);
}

async function open(): Promise<{ body: ReadableStream<Uint8Array>; size: number }> {
  if (/^https?:/.test(source)) {
    const res = await fetch(source);
    if (!res.ok || !res.body) throw new Error(`GET ${source}: ${res.status}`);
    return { body: res.body, size: Number(res.headers.get("content-length")) };
  }
  const file = await Deno.open(source);
  return { body: file.readable, size: (await file.stat()).size };
}

Deno.serve({ port: Number(port), hostname: "127.0.0.1", onListen() {} }, async (req) => {
  if (new URL(req.url).pathname === "/v2/") return new Response("{}");
  const { body, size } = await open();
  return new Response(mode === "plain" ? body : body.pipeThrough(verifying(digest, source)), {
    headers: { "content-length": String(size), "content-type": "application/octet-stream" },
  });
});

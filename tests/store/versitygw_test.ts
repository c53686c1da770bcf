/**
 * What the cluster-scale bench relies on of versitygw (tests/support/versitygw.ts), checked against
 * the real gateway: conditional reads and atomic conditional writes through Podmin's own S3Store,
 * and request counts taken from its access log.
 */

import assert from "node:assert/strict";
import { testWith } from "../support/requirements.ts";
import { checkConditionalWrites, countAccessLog, startVersitygw } from "../support/versitygw.ts";

testWith(
  "versitygw: conditional writes are atomic, and its access log counts each request",
  { tools: ["versitygw"] },
  async () => {
    const g = await startVersitygw();
    try {
      const bucket = await g.createBucket();
      const store = g.store(bucket);
      await checkConditionalWrites(store);
      await g.reset();
      await store.put("deployments/index.json", new TextEncoder().encode("{}"));
      for (let i = 0; i < 3; i++) await store.get("deployments/index.json");
      await store.head("deployments/index.json");
      for await (const _ of store.list("deployments/")) { /* one LIST */ }
      // The log is written after the answer: wait for the six lines.
      let counts = new Map<string, number>();
      for (let i = 0; i < 50; i++) {
        counts = await g.counts();
        if ([...counts.values()].reduce((a, b) => a + b, 0) >= 6) break;
        await new Promise((r) => setTimeout(r, 100));
      }
      assert.deepEqual(
        Object.fromEntries(counts),
        {
          [`s3 PUT ${bucket}/deployments/index.json`]: 1,
          [`s3 GET ${bucket}/deployments/index.json`]: 3,
          [`s3 HEAD ${bucket}/deployments/index.json`]: 1,
          [`s3 LIST ${bucket}/`]: 1,
        },
      );
      await g.reset();
      assert.equal((await g.counts()).size, 0);
    } finally {
      await g.stop();
    }
  },
);

Deno.test("countAccessLog: S3 server access log lines, by method, bucket and key", () => {
  const line = (op: string, key: string) =>
    `testing b1 [02/December/2026:01:19:57 +0000] 127.0.0.1 testing 79ZMFV50062I0V2J ${op} ` +
    `${key} /b1/${key} 200 - 0 0 1 1 - Deno/2.9.6 - K/E= SigV4 - AuthHeader s3.amazonaws.com - x Yes`;
  const text = [
    "log starts 2026-12-02 01:19:55.686499428 +0000 UTC m=+0.026206727",
    line("s3_GetObject", "deployments/index.json"),
    line("s3_GetObject", "deployments/index.json"),
    line("s3_PutObject", "dns/nodes/g/n.json"),
    line("s3_ListObjectsV2", "-"),
    "",
  ].join("\n");
  assert.deepEqual(Object.fromEntries(countAccessLog(text)), {
    "s3 GET b1/deployments/index.json": 2,
    "s3 PUT b1/dns/nodes/g/n.json": 1,
    "s3 LIST b1/": 1,
  });
});

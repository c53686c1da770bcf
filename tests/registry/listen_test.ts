/** The registry binds loopback only, unless an explicit flag says otherwise (spec §3.3). */

import assert from "node:assert/strict";
import { agent } from "../support/programs.ts";

Deno.test("registry: --listen and --registry-listen refuse a non-loopback address and say why", async () => {
  const tmp = await Deno.makeTempDir({ prefix: "podmin-listen-" });
  try {
    const bucket = `file://${tmp}/bucket`;
    const reg = await agent(["registry", "--bucket", bucket, "--listen", "0.0.0.0:0"]);
    assert.equal(reg.code, 2, reg.stderr);
    assert.match(reg.stderr, /not a loopback address/);
    assert.match(reg.stderr, /--allow-non-loopback/);

    const run = await agent([
      "run",
      "--bucket",
      bucket,
      "--cluster",
      "test",
      "--nodegroup",
      "default",
      "--registry-listen",
      "[::]:5000",
      "--once",
      "--state-dir",
      `${tmp}/state`,
    ]);
    assert.notEqual(run.code, 0, run.stderr);
    assert.match(run.stderr, /not a loopback address/);
    assert.match(run.stderr, /--registry-allow-non-loopback/);
  } finally {
    await Deno.remove(tmp, { recursive: true });
  }
});

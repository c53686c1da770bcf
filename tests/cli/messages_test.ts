/** One message format (issue 16, item 3): what is wrong, the value, where, and a fitting hint. */

import assert from "node:assert/strict";
import { agent } from "../support/programs.ts";
import { cli, freshBucket, tempFile } from "./harness.ts";

Deno.test("messages: an invalid but present value is echoed, not called required", async () => {
  const file = await tempFile(
    "apiVersion: podmin.dev/v1\nkind: Service\nmetadata: {name: Web_1}\nspec:\n  selector: {app: web}\n  ports: [{port: 99999}]\n",
  );
  const r = await cli("apply", "-f", file, "--dry-run=client");
  assert.equal(r.code, 1);
  assert.match(
    r.err,
    new RegExp(`^error: ${file}:3:18: document 1: metadata\\.name: invalid value "Web_1"; `, "m"),
  );
  assert.match(
    r.err,
    new RegExp(
      `^${file}:6:18: document 1: spec\\.ports\\[0\\]\\.port: invalid value 99999; 1-65535$`,
      "m",
    ),
  );
  assert.doesNotMatch(r.err, /required/);
  assert.match(r.err, /^hint: fix the fields named above/m);
  const absent = await cli(
    "apply",
    "-f",
    await tempFile(
      "apiVersion: podmin.dev/v1\nkind: Service\nmetadata: {}\nspec: {selector: {a: b}, ports: [{port: 80}]}\n",
    ),
    "--dry-run=client",
  );
  assert.match(absent.err, /metadata\.name: required; /);
});

Deno.test("messages: a YAML syntax error names file, line and column, shows the excerpt, and hints at YAML", async () => {
  const file = await tempFile(
    "apiVersion: podmin.dev/v1\nkind: Deployment\nmetadata:\n  name: web\n   bad: [\n",
  );
  const r = await cli("apply", "-f", file, "--dry-run=client");
  assert.equal(r.code, 1);
  const lines = r.err.split("\n");
  assert.match(lines[0], new RegExp(`^error: ${file}:4:9: document 1: YAML syntax: .*[^:]$`));
  assert.equal(lines[1], "   4 |   name: web");
  assert.equal(lines[2], "     |         ^");
  assert.match(r.err, /^hint: fix the YAML syntax at the line shown/m);
  assert.doesNotMatch(r.err, /fix the fields named above/);
  assert.doesNotMatch(r.err, /:\s*$/m);
});

Deno.test("messages: expected operating-system conditions get a fitting hint, not 'this is unexpected'", async () => {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  try {
    const bucket = await freshBucket();
    const { port } = listener.addr as Deno.NetAddr;
    const r = await agent(["registry", "--bucket", bucket, "--listen", `127.0.0.1:${port}`]);
    assert.equal(r.code, 1);
    assert.match(r.stderr, /^error: address already in use/m);
    assert.match(
      r.stderr,
      /^hint: another process is listening there; stop it or choose another address/m,
    );
    assert.doesNotMatch(r.stderr, /unexpected/);
  } finally {
    listener.close();
  }
  const unreadable = await cli("apply", "-f", "/nonexistent/web.yaml", "--dry-run=client");
  assert.equal(unreadable.code, 2);
  assert.match(
    unreadable.err,
    /^error: cannot read \/nonexistent\/web\.yaml: no such file or directory$/m,
  );
});

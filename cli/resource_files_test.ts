import assert from "node:assert/strict";
import { ValidationError } from "../core/kit/errors.ts";
import { TooLargeError } from "../core/kit/limits.ts";
import { loadResourceFiles, parseResourceText } from "./resource_files.ts";

Deno.test("resource files: a YAML alias bomb is a validation error naming the document", () => {
  const lines = ["a: &a [x, x, x, x, x, x, x, x, x, x]"];
  for (let i = 0; i < 8; i++) {
    const prev = String.fromCharCode(97 + i);
    const next = String.fromCharCode(98 + i);
    lines.push(`${next}: &${next} [${Array(10).fill(`*${prev}`).join(", ")}]`);
  }
  assert.throws(
    () => parseResourceText(lines.join("\n") + "\n", "bomb.yaml"),
    (err: Error) =>
      err instanceof ValidationError && /^bomb\.yaml: document 1: cannot expand the YAML/.test(
        err.message,
      ),
  );
});

Deno.test("resource files: a resource over 1 MiB and a file over 8 MiB are refused, naming the limit", async () => {
  const big = "x".repeat(1100 * 1024);
  const yaml = `apiVersion: podmin.dev/v1
kind: Deployment
metadata: {name: web}
spec:
  nodeGroup: default
  template:
    spec:
      containers: [{name: web, image: x, env: [{name: BIG, value: "${big}"}]}]
`;
  assert.throws(
    () => parseResourceText(yaml, "big.yaml"),
    (err: Error) =>
      err instanceof ValidationError &&
      /big\.yaml: document 1: Deployment default\/web \(canonical JSON\) is 1\.1 MiB, over the limit of 1 MiB/
        .test(err.message),
  );
  const tmp = await Deno.makeTempFile({ suffix: ".yaml" });
  try {
    await Deno.writeTextFile(tmp, "# padding\n".repeat(900 * 1024)); // 9 MiB, never parsed
    const t0 = Date.now();
    await assert.rejects(
      loadResourceFiles([tmp]),
      (err: Error) => err instanceof TooLargeError && /over the limit of 8 MiB/.test(err.message),
    );
    assert.ok(Date.now() - t0 < 5_000);
  } finally {
    await Deno.remove(tmp);
  }
});

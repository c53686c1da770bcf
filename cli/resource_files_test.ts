import assert from "node:assert/strict";
import { ValidationError } from "../core/errors.ts";
import { parseResourceText } from "./resource_files.ts";

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

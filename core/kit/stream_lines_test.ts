import assert from "node:assert/strict";
import { forEachLine } from "./stream_lines.ts";

Deno.test("forEachLine: lines split across chunks, a multi-byte character split too, a last line", async () => {
  const bytes = new TextEncoder().encode("one\ntw€o\nthree");
  const chunks = [bytes.slice(0, 2), bytes.slice(2, 8), bytes.slice(8)];
  const got: string[] = [];
  await forEachLine(ReadableStream.from(chunks), (l) => got.push(l));
  assert.deepEqual(got, ["one", "tw€o", "three"]);
});

Deno.test("forEachLine: a final newline adds no empty line", async () => {
  const got: string[] = [];
  await forEachLine(
    ReadableStream.from([new TextEncoder().encode("a\n\nb\n")]),
    (l) => got.push(l),
  );
  assert.deepEqual(got, ["a", "", "b"]);
});

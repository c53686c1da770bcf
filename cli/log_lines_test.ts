import assert from "node:assert/strict";
import { readableLogLine } from "./log_lines.ts";

Deno.test("log lines: JSON entries become one readable line; anything else passes unchanged", () => {
  assert.equal(
    readableLogLine(
      '{"ts":"2026-12-01T01:04:10.170Z","level":"info","component":"agent","msg":"manifest written","file":"a.json","n":2,"why":"two words"}',
    ),
    '01:04:10.170  info  agent  manifest written  file=a.json n=2 why="two words"',
  );
  for (const other of ["converged: 1 deployment(s)", "[1,2]", "null", '{"no":"msg"}']) {
    assert.equal(readableLogLine(other), other);
  }
});

import assert from "node:assert/strict";
import { lineDiff } from "./line_diff.ts";

Deno.test("lineDiff marks removed and added lines around common ones", () => {
  assert.deepEqual(lineDiff("a\nb\nc", "a\nx\nc\nd"), ["  a", "- b", "+ x", "  c", "+ d"]);
  assert.deepEqual(lineDiff("same", "same"), ["  same"]);
});

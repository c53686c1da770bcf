import assert from "node:assert/strict";
import { parseDuration } from "./duration.ts";

Deno.test("parseDuration understands units and rejects junk", () => {
  assert.equal(parseDuration("500ms"), 500);
  assert.equal(parseDuration("2s"), 2000);
  assert.equal(parseDuration("1.5"), 1500);
  assert.equal(parseDuration("5m"), 300_000);
  assert.throws(() => parseDuration("2 days"), /invalid duration/);
  assert.throws(() => parseDuration("-1s"), /invalid duration/);
});

import assert from "node:assert/strict";
import { UsageError } from "../core/kit/errors.ts";
import type { CommandContext } from "../core/kit/cli_kit.ts";
import { formatAge, outputFormat, table } from "./output_format.ts";

const ctx = (output?: string) => ({ values: { output } }) as unknown as CommandContext;

Deno.test("outputFormat: the fallback, a known format, and the nearest for a typo", () => {
  const o = { formats: ["table", "wide", "json"] as const, fallback: "table" as const };
  assert.equal(outputFormat(ctx(), o), "table");
  assert.equal(outputFormat(ctx("json"), o), "json");
  assert.throws(() => outputFormat(ctx("jsno"), o), (err: Error) => {
    assert.ok(err instanceof UsageError);
    assert.match(err.message, /unknown output format "jsno"; did you mean json\?/);
    return true;
  });
});

Deno.test("table: columns aligned three spaces apart, no trailing space", () => {
  assert.deepEqual(table([["A", "BB"], ["ccc", "d"]]), ["A     BB", "ccc   d"]);
});

Deno.test("formatAge: kubectl's steps, negative clamped unless signed", () => {
  assert.equal(formatAge(45_000), "45s");
  assert.equal(formatAge(3 * 60_000 + 59_000), "3m");
  assert.equal(formatAge(2 * 3600_000), "2h");
  assert.equal(formatAge(4 * 86400_000), "4d");
  assert.equal(formatAge(-5_000), "0s");
  assert.equal(formatAge(-5_000, { signed: true }), "-5s");
});

Deno.test("table: a narrower gap and minimum widths keep fixed columns", () => {
  assert.deepEqual(table([["ROLE", "NOTE"], ["next", "x"]], { gap: 1, minWidths: [8] }), [
    "ROLE     NOTE",
    "next     x",
  ]);
});

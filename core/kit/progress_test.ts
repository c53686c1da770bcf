import assert from "node:assert/strict";
import { isProgressUpdate, progress } from "./progress.ts";

Deno.test("progress: updates are recognised as redrawable, the done line is not", () => {
  const lines: string[] = [];
  const p = progress("blob 0123", 20 * 1024 * 1024, { write: (l) => lines.push(l), intervalMs: 0 });
  p.update(1024);
  p.update(10 * 1024 * 1024);
  p.done();
  assert.deepEqual(lines.map(isProgressUpdate), [true, true, false]);
  assert.equal(lines[2], "blob 0123: 20.0 MiB done");
  assert.equal(isProgressUpdate("uploaded: 2 blob(s), 24.0 MiB; 0 already stored"), false);
});

import assert from "node:assert/strict";
import { createLogger } from "../core/kit/log.ts";
import { ErrorLog, problemKind } from "./error_log.ts";

Deno.test("error log: alternating details are one kind; first, summary and recovery are logged", () => {
  const lines: { level: string; msg: string; kind?: string; occurrences?: number }[] = [];
  const log = createLogger("agent", { level: "debug", sink: (l) => lines.push(JSON.parse(l)) });
  let now = 0;
  const errors = new ErrorLog({ log, summaryEveryMs: 60_000, now: () => now });
  const index = "reading deployments/index.json";
  for (let pass = 0; pass < 100; pass++) {
    now = pass * 2_000; // a pass every 2 s for 200 s
    errors.update([
      `${index}: s3://b unavailable: ${pass % 2 ? "socket hang up" : "read ECONNRESET"}`,
    ]);
  }
  now = 200_000;
  errors.update([]);
  assert.deepEqual(lines.map((l) => `${l.level} ${l.msg}`), [
    "error problem",
    "warn problem persists",
    "warn problem persists",
    "warn problem persists",
    "info recovered",
  ]);
  assert.equal(lines[0].kind, index);
  assert.equal(lines.at(-1)!.occurrences, 100);
  assert.deepEqual(errors.active, []);
  assert.equal(
    problemKind("values of default/web: Secrets Manager x: throttled"),
    "values of default/web",
  );
});

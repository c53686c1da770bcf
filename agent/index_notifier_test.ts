import assert from "node:assert/strict";
import { IndexNotifier } from "./index_notifier.ts";

Deno.test("index notifier: no fallback poll while the mesh elects (hold), then every fallback interval", () => {
  let now = 0;
  let electing = true;
  let connected = true;
  const n = new IndexNotifier({
    connected: () => connected,
    hold: () => electing,
    fallbackMs: 10_000,
    now: () => now,
    random: () => 0.5,
  });
  n.onSnapshot({ term: 1, version: 1, nodes: 3, endpoints: {}, index: { etag: "a" } }, "a");
  assert.equal(n.shouldRead({ hasIndex: true, etag: "a" }), false, "announced what it holds");
  connected = false;
  for (now = 0; now < 40_000; now += 1_000) {
    assert.equal(n.shouldRead({ hasIndex: true, etag: "a" }), false, `held at ${now}`);
  }
  // An agent that never read the object reads it regardless.
  assert.equal(n.shouldRead({ hasIndex: false }), true);
  electing = false;
  now = 50_000;
  assert.equal(n.shouldRead({ hasIndex: true, etag: "a" }), true, "the election window passed");
  now = 55_000;
  assert.equal(n.shouldRead({ hasIndex: true, etag: "a" }), false);
  now = 60_000;
  assert.equal(n.shouldRead({ hasIndex: true, etag: "a" }), true);
  assert.equal(n.counts.fallback, 3);
});

import assert from "node:assert/strict";
import { MESH_LIMITS, parseClusterSnapshot } from "./endpoint_snapshot.ts";
import { ValidationError } from "../kit/errors.ts";

const base = { term: 3, version: 1, nodes: 4, endpoints: {} };

Deno.test("cluster snapshot: successors are distinct node ids, at most the limit; absent stays absent", () => {
  assert.equal(parseClusterSnapshot(base).successors, undefined);
  assert.deepEqual(
    parseClusterSnapshot({ ...base, successors: ["node-2", "node-1"] }).successors,
    ["node-2", "node-1"],
  );
  const refused = (successors: unknown, why: RegExp) =>
    assert.throws(() => parseClusterSnapshot({ ...base, successors }), (err: Error) => {
      assert.ok(err instanceof ValidationError, err.message);
      assert.match(err.message, why);
      return true;
    });
  refused("node-1", /successors must be a list/);
  refused(
    Array.from({ length: MESH_LIMITS.successors + 1 }, (_, i) => `node-${i}`),
    /at most 16/,
  );
  refused(["node-1", "node-1"], /distinct/);
  refused(["../etc"], /successors: /);
  refused([7], /successors: /);
});

Deno.test("cluster snapshot: an index change must result in the announced index", () => {
  const change = {
    base: { etag: '"e1"', generation: 1 },
    etag: '"e2"',
    generation: 2,
    upsert: [],
    remove: ["default/web"],
    specs: {},
  };
  const index = { etag: '"e2"', generation: 2 };
  assert.deepEqual(
    parseClusterSnapshot({ ...base, index, indexChange: change }).indexChange,
    change,
  );
  for (
    const other of [undefined, { etag: '"e3"', generation: 2 }, { etag: '"e2"', generation: 3 }]
  ) {
    assert.throws(
      () => parseClusterSnapshot({ ...base, index: other, indexChange: change }),
      /indexChange does not result in the announced index/,
    );
  }
  assert.throws(
    () => parseClusterSnapshot({ ...base, index, indexChange: { ...change, remove: [1] } }),
    ValidationError,
  );
});

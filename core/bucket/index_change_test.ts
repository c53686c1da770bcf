import assert from "node:assert/strict";
import {
  applyIndexChange,
  diffIndexes,
  INDEX_CHANGE_LIMITS,
  type IndexChange,
  parseIndexChange,
  withInlineSpecs,
} from "./index_change.ts";
import {
  type DeploymentEntry,
  type DeploymentIndex,
  emptyDeploymentIndex,
  parseDeploymentIndex,
  serializeDeploymentIndex,
} from "./deployment_index.ts";
import { ValidationError } from "../kit/errors.ts";

const ref = (c: string) => `sha256:${c.repeat(64)}`;
const entry = (name: string, spec: string, nodeGroup = "workers"): DeploymentEntry => ({
  namespace: "default",
  name,
  nodeGroup,
  spec,
});
const index = (generation: number, deployments: DeploymentEntry[]): DeploymentIndex => ({
  ...emptyDeploymentIndex(),
  generation,
  deployments,
});
/** What a member holds after a bucket read: the index as the bytes parse. */
const roundTrip = (i: DeploymentIndex) => parseDeploymentIndex(serializeDeploymentIndex(i));

Deno.test("index change: applied to its base, it gives exactly the next index", () => {
  const before = index(4, [entry("a", ref("1")), entry("b", ref("2")), entry("c", ref("3"))]);
  const after = index(5, [
    entry("a", ref("1")),
    entry("b", ref("4")), // new spec
    entry("c", ref("3"), "edge"), // moved
    entry("d", ref("5")), // new
  ]);
  const change = diffIndexes({ etag: '"e4"', index: before }, { etag: '"e5"', index: after });
  assert.deepEqual(change.base, { etag: '"e4"', generation: 4 });
  assert.equal(change.etag, '"e5"');
  assert.deepEqual(change.upsert.map((e) => e.name), ["b", "c", "d"]);
  assert.deepEqual(change.remove, []);
  const applied = applyIndexChange(roundTrip(before), change);
  assert.deepEqual(serializeDeploymentIndex(applied), serializeDeploymentIndex(after));

  const removed = index(6, [entry("d", ref("5"))]);
  const second = diffIndexes({ etag: '"e5"', index: after }, { etag: '"e6"', index: removed });
  assert.deepEqual(second.remove, ["default/a", "default/b", "default/c"]);
  assert.deepEqual(
    serializeDeploymentIndex(applyIndexChange(applied, second)),
    serializeDeploymentIndex(removed),
  );
});

Deno.test("index change: specs go inline within the bounds, in entry order", async () => {
  const small = new TextEncoder().encode('{"small":1}');
  const big = new Uint8Array(INDEX_CHANGE_LIMITS.specBytes + 1).fill(0x61);
  const change = diffIndexes(
    { etag: "", index: emptyDeploymentIndex() },
    {
      etag: '"e1"',
      index: index(1, [
        entry("a", ref("1")),
        entry("b", ref("2")),
        entry("c", ref("3")),
        entry("d", ref("1")),
      ]),
    },
  );
  const reads: string[] = [];
  const inline = await withInlineSpecs(change, (r) => {
    reads.push(r);
    if (r === ref("2")) return Promise.resolve(big); // too large: the members read it
    if (r === ref("3")) return Promise.reject(new Error("unreadable")); // left out
    return Promise.resolve(small);
  });
  assert.deepEqual(reads.sort(), [ref("1"), ref("2"), ref("3")], "each digest read once");
  assert.deepEqual(Object.keys(inline.specs), [ref("1")]);
  assert.equal(inline.specs[ref("1")], '{"small":1}');

  // The total bound: 64 KiB of 10 KiB specs is six of them.
  const many = diffIndexes(
    { etag: "", index: emptyDeploymentIndex() },
    {
      etag: '"e2"',
      index: index(1, Array.from({ length: 9 }, (_, i) => entry(`n${i}`, ref(String(i))))),
    },
  );
  const tenK = new Uint8Array(10 * 1024).fill(0x61);
  const bounded = await withInlineSpecs(many, () => Promise.resolve(tenK));
  assert.equal(Object.keys(bounded.specs).length, 6);
});

Deno.test("index change: untrusted input is rejected with a reason", () => {
  const good: IndexChange = {
    base: { etag: '"e1"', generation: 1 },
    etag: '"e2"',
    generation: 2,
    upsert: [entry("a", ref("1"))],
    remove: ["default/b"],
    specs: { [ref("1")]: "{}" },
  };
  assert.deepEqual(parseIndexChange(structuredClone(good)), good);
  const cases: [unknown, RegExp][] = [
    [null, /not an object/],
    [{ ...good, base: { etag: '"e1"', generation: -1 } }, /generation/],
    [{ ...good, etag: '"e1"' }, /same index/],
    [{ ...good, upsert: [{ ...entry("../x", ref("1")) }] }, /name invalid/],
    [{ ...good, upsert: [entry("a", ref("1")), entry("a", ref("2"))] }, /appears twice/],
    [{ ...good, remove: ["default/a"] }, /appears twice/],
    [{ ...good, remove: ["a/b/c"] }, /namespace\/name/],
    [{ ...good, specs: { [ref("9")]: "{}" } }, /not upserted/],
    [{ ...good, specs: { [ref("1")]: 7 } }, /must be a string/],
    [
      { ...good, specs: { [ref("1")]: "a".repeat(INDEX_CHANGE_LIMITS.specBytes + 1) } },
      /inline bound/,
    ],
    [{ ...good, upsert: "a" }, /lists/],
  ];
  for (const [value, why] of cases) {
    assert.throws(() => parseIndexChange(value), (err: Error) => {
      assert.ok(err instanceof ValidationError, String(err));
      assert.match(err.message, why);
      return true;
    });
  }
});

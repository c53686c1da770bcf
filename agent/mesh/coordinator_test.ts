import assert from "node:assert/strict";
import { EventEmitter } from "node:events";
import type { ClusterSnapshot, EndpointSet } from "../../core/model/endpoint_snapshot.ts";
import { silentLogger } from "../../core/kit/log.ts";
import { Coordinator } from "./coordinator.ts";
import type { CoordinatorStream, Serialized } from "./mesh_service.ts";

/** A member's stream as the coordinator sees it: what it was sent, and a report to send. */
function memberStream(c: Coordinator, node: string) {
  const got: ClusterSnapshot[] = [];
  const stream = new EventEmitter() as EventEmitter & { write(x: Serialized): boolean };
  stream.write = (x) => {
    got.push(JSON.parse(x.bytes.toString()));
    return true;
  };
  c.accept(stream as unknown as CoordinatorStream, node);
  let seq = 0;
  return {
    got,
    report: (endpoints: EndpointSet) =>
      stream.emit("data", { nodeId: node, nodeGroup: "workers", seq: ++seq, endpoints }),
  };
}

const settle = (ms = 30) => new Promise((r) => setTimeout(r, ms));

Deno.test("a new term's coordinator keeps the earlier term's endpoints until its members reported", async () => {
  // The earlier term merged three nodes; each hosts one backend of default/hello.
  const c = new Coordinator({
    term: 2,
    coalesceMs: 1,
    graceMs: 60_000,
    inherit: { nodes: 3, endpoints: { "default/hello": ["fd00::a", "fd00::b", "fd00::c"] } },
    log: silentLogger,
  });
  try {
    const a = memberStream(c, "a");
    a.report({ "default/hello": ["fd00::a"] });
    await settle();
    // Nodes b and c have not reconnected yet: their backends stay.
    assert.deepEqual(a.got.at(-1)?.endpoints, {
      "default/hello": ["fd00::a", "fd00::b", "fd00::c"],
    });
    const b = memberStream(c, "b");
    b.report({ "default/hello": ["fd00::b2"] }); // b surged meanwhile: its new Pod only
    await settle();
    assert.deepEqual(b.got.at(-1)?.endpoints["default/hello"], [
      "fd00::a",
      "fd00::b",
      "fd00::b2",
      "fd00::c",
    ]);
    // Every node of the earlier term reported: the snapshot is theirs alone.
    memberStream(c, "c").report({ "default/hello": ["fd00::c"] });
    await settle();
    assert.deepEqual(a.got.at(-1)?.endpoints, {
      "default/hello": ["fd00::a", "fd00::b2", "fd00::c"],
    });
    assert.equal(a.got.at(-1)?.nodes, 3);
  } finally {
    c.stop();
  }
});

Deno.test("the earlier term's endpoints leave after the grace when a node never comes back", async () => {
  const c = new Coordinator({
    term: 5,
    coalesceMs: 1,
    graceMs: 100,
    inherit: { nodes: 2, endpoints: { "default/hello": ["fd00::a", "fd00::dead"] } },
    log: silentLogger,
  });
  try {
    const a = memberStream(c, "a");
    a.report({ "default/hello": ["fd00::a"] });
    await settle();
    assert.deepEqual(a.got.at(-1)?.endpoints["default/hello"], ["fd00::a", "fd00::dead"]);
    await settle(200);
    assert.deepEqual(a.got.at(-1)?.endpoints["default/hello"], ["fd00::a"]);
    assert.equal(a.got.at(-1)?.term, 5);
  } finally {
    c.stop();
  }
});

Deno.test("a coordinator without an earlier term merges its members' reports alone", async () => {
  const c = new Coordinator({ term: 1, coalesceMs: 1, log: silentLogger });
  try {
    const a = memberStream(c, "a");
    a.report({ "default/hello": ["fd00::a"] });
    await settle();
    assert.deepEqual(a.got.at(-1)?.endpoints, { "default/hello": ["fd00::a"] });
  } finally {
    c.stop();
  }
});

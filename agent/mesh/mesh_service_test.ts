import assert from "node:assert/strict";
import { Buffer } from "node:buffer";
import { MESH_SERVICE, Serialized } from "./mesh_service.ts";

Deno.test("mesh service: a Serialized message is sent as its bytes, anything else as JSON", () => {
  const snapshot = { term: 3, version: 7, nodes: 2, endpoints: {} };
  const once = new Serialized(snapshot);
  const serialize = MESH_SERVICE.exchange.responseSerialize;
  // The same bytes for every member: no second serialization.
  assert.equal(serialize(once), once.bytes);
  assert.equal(serialize(once), serialize(once));
  assert.deepEqual(serialize(snapshot), Buffer.from(JSON.stringify(snapshot)));
  assert.deepEqual(MESH_SERVICE.exchange.responseDeserialize(once.bytes), snapshot);
});

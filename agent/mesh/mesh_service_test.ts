import assert from "node:assert/strict";
import { Buffer } from "node:buffer";
import {
  MESH_CHANNEL_OPTIONS,
  MESH_CLIENT_IDLE_MS,
  MESH_SERVER_OPTIONS,
  MESH_SERVICE,
  Serialized,
} from "./mesh_service.ts";

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

Deno.test("mesh service: clients retire idle sessions; nothing enables a server's idle or age GOAWAY", () => {
  assert.equal(MESH_CHANNEL_OPTIONS["grpc.client_idle_timeout_ms"], MESH_CLIENT_IDLE_MS);
  assert.ok(MESH_CLIENT_IDLE_MS >= 1_000, "grpc-js raises anything below 1 s to 1 s");
  assert.ok(MESH_CLIENT_IDLE_MS < 30 * 60_000, "not above grpc-js's default of 30 min");
  for (const option of ["grpc.max_connection_idle_ms", "grpc.max_connection_age_ms"]) {
    assert.equal(MESH_CHANNEL_OPTIONS[option], undefined, `${option} sends a GOAWAY`);
    assert.equal(MESH_SERVER_OPTIONS[option], undefined, `${option} sends a GOAWAY`);
  }
  // A grpc-js server ends the session of a peer that missed a keepalive ping with a GOAWAY.
  assert.equal(MESH_SERVER_OPTIONS["grpc.keepalive_time_ms"], undefined);
});

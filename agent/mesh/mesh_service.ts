/**
 * The mesh's gRPC service, declared by hand (spec §7.9): `podmin.mesh.v1.Mesh/Exchange`, a
 * bidirectional stream. A member sends `NodeReport`s (its complete local endpoints, on every change
 * and as a heartbeat); the coordinator sends `ClusterSnapshot`s (complete, versioned) on every
 * change and once when the member joins. Messages are JSON documents; both sides validate them.
 */

import { Buffer } from "node:buffer";
import * as grpc from "@grpc/grpc-js";
import type { ClusterSnapshot, NodeReport } from "../../core/model/endpoint_snapshot.ts";

/** Largest accepted message (a snapshot of 10,000 Services fits well below). */
export const MESH_MAX_MESSAGE_BYTES = 16 * 1024 * 1024;

/**
 * A message serialized ahead of time: the coordinator serializes each snapshot once and writes the
 * same bytes to every member (a snapshot of 10,000 Services is megabytes; a thousand members would
 * otherwise cost a thousand `JSON.stringify` calls per change).
 */
export class Serialized {
  readonly bytes: Buffer;

  constructor(value: unknown) {
    this.bytes = Buffer.from(JSON.stringify(value));
  }
}

const json = {
  serialize: (value: unknown) =>
    value instanceof Serialized ? value.bytes : Buffer.from(JSON.stringify(value)),
  deserialize: (bytes: Buffer) => JSON.parse(bytes.toString("utf-8")) as unknown,
};

/** The service definition (grpc-js form). */
export const MESH_SERVICE = {
  exchange: {
    path: "/podmin.mesh.v1.Mesh/Exchange",
    requestStream: true,
    responseStream: true,
    requestSerialize: json.serialize,
    requestDeserialize: json.deserialize,
    responseSerialize: json.serialize,
    responseDeserialize: json.deserialize,
    originalName: "exchange",
  },
} satisfies grpc.ServiceDefinition;

/** The stream a member holds: reports out, snapshots in. */
export type MemberStream = grpc.ClientDuplexStream<NodeReport, unknown>;

/** The stream the coordinator holds: reports in, snapshots out (serialized once: `Serialized`). */
export type CoordinatorStream = grpc.ServerDuplexStream<unknown, ClusterSnapshot | Serialized>;

/**
 * Ends a call the server holds with an UNAVAILABLE status its member sees (it then reconnects).
 * Not `destroy()`: a grpc-js server stream has no `_destroy`, so a destroyed one never sends its
 * status and the member's call stays open, the member believing it is still connected.
 */
export function endCall(call: CoordinatorStream, details: string): void {
  call.emit("error", { code: grpc.status.UNAVAILABLE, details });
}

/**
 * The status details a coordinator ends its members' calls with when it hands over — it stops
 * and releases its lease, or lost its lease to another holder — so they look for the successor
 * within a step instead of waiting out a crashed holder's lease (`RecordReadPlan`).
 */
export const MESH_HANDOVER = "coordinator handing over";

/** The client class of the service. */
export const MeshClient = grpc.makeGenericClientConstructor(MESH_SERVICE, "Mesh");

/**
 * How long a mesh channel without a call keeps its session (grpc-js's default is 30 min). Below
 * any peer's idle handling — Podmin's servers have none (no `grpc.max_connection_idle_ms`, no
 * `grpc.max_connection_age_ms`: each would send a GOAWAY) — so a client retires its idle
 * sessions itself and never holds one a peer's GOAWAY could reach (denoland/deno#36788).
 */
export const MESH_CLIENT_IDLE_MS = 10_000;

/** Options of the mesh's server: sizes only. */
export const MESH_SERVER_OPTIONS: grpc.ChannelOptions = {
  "grpc.max_receive_message_length": MESH_MAX_MESSAGE_BYTES,
  "grpc.max_send_message_length": MESH_MAX_MESSAGE_BYTES,
  // No keepalive pings from the server: grpc-js ends the session of a peer that missed one with
  // a GOAWAY, and a member whose event loop stalled for 5 s is alive. A silent member's stream is
  // the coordinator's to end (`silenceMs`); a dead peer's TCP connection closes by TCP keepalive.
};

/**
 * Channel options of every mesh client: keepalives (a half-open stream ends: the client closes
 * its own session, which no server aborts on), sizes, the idle timeout.
 */
export const MESH_CHANNEL_OPTIONS: grpc.ChannelOptions = {
  ...MESH_SERVER_OPTIONS,
  "grpc.keepalive_time_ms": 10_000,
  "grpc.keepalive_timeout_ms": 5_000,
  "grpc.keepalive_permit_without_calls": 1,
  "grpc.client_idle_timeout_ms": MESH_CLIENT_IDLE_MS,
};

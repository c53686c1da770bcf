/**
 * GOAWAY cannot take an agent down (issue 33 item 3, spec §7.9). Deno's HTTP/2 client can abort
 * the whole process while it processes a GOAWAY (denoland/deno#36788: exit 134 on an nghttp2
 * assertion, or SIGSEGV), so:
 *
 * - a mesh node's server sends no GOAWAY to a live, an idle or a fresh session when it stops, when
 *   it crashes and when its coordinator loses the lease — a raw HTTP/2 client records every frame
 *   it receives (tests/support/raw_h2_peer.ts);
 * - a member in a child process, connected to a raw HTTP/2 server as its coordinator, lives
 *   through every GOAWAY sequence that server sends — on a session whose call ended, with its
 *   stream open, refusing it, right after resetting it, the orderings grpc-js servers produce —
 *   and connects again (an abort would be its exit code or signal, printed in the matrix);
 * - a member retires its session the moment its stream ends, before it even reads where to
 *   reconnect: no session of a member sits idle for a peer's GOAWAY to reach; so does the agent's
 *   kubelet Pods API watch (each watch on its own connection, closed when the watch ends).
 */

import assert from "node:assert/strict";
import * as path from "node:path";
import { PodsWatch } from "../../agent/discovery/pods_api.ts";
import { MeshMember } from "../../agent/mesh/member.ts";
import { MeshNode } from "../../agent/mesh/mesh_node.ts";
import { MESH_CLIENT_IDLE_MS } from "../../agent/mesh/mesh_service.ts";
import type { CoordinatorRecord } from "../../agent/mesh/coordinator_record.ts";
import {
  type ClusterCa,
  issueNodeTls,
  nodeServerName,
  type NodeTls,
  parseClusterCa,
} from "../../agent/mesh/node_tls.ts";
import { newCaPem } from "../../cli/setup/cluster_cas.ts";
import { UnavailableError } from "../../core/kit/errors.ts";
import { silentLogger } from "../../core/kit/log.ts";
import { createFsBucket } from "../../core/store/fs_store.ts";
import type { ObjectStore } from "../../core/store/object_store.ts";
import { openStore } from "../../core/store/store_url.ts";
import {
  ErrorCode,
  Flag,
  FrameType,
  goaway,
  MAX_STREAM_ID,
  parseGoaway,
  rstStream,
} from "../support/h2_frames.ts";
import { MemberProcess } from "../support/member_process.ts";
import { type RawConnection, RawH2Client, RawH2Server } from "../support/raw_h2_peer.ts";

const CLUSTER = "test";
const EXCHANGE = "/podmin.mesh.v1.Mesh/Exchange";
const SNAPSHOT = { term: 1, version: 1, nodes: 1, endpoints: {} };
const UNAVAILABLE = 14;

async function clusterCa(): Promise<ClusterCa> {
  const { certPem, keyPem } = await newCaPem("podmin cluster CA test");
  return await parseClusterCa(certPem + keyPem);
}

const nodeTls = (ca: ClusterCa, nodeId: string) =>
  issueNodeTls({ ca, cluster: CLUSTER, nodeGroup: "workers", nodeId });

async function until(what: string, f: () => boolean, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!f()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

/** `inner` until `cut()`: then every request fails as an unreachable bucket does. */
function partitionable(inner: ObjectStore) {
  let cut = false;
  const guard = <T>(op: () => Promise<T>) =>
    cut ? Promise.reject(new UnavailableError("partitioned from the bucket")) : op();
  const store: ObjectStore = {
    url: inner.url,
    get: (k, o) => guard(() => inner.get(k, o)),
    head: (k) => guard(() => inner.head(k)),
    put: (k, b, o) => guard(() => inner.put(k, b, o)),
    putStream: (k, b, o) => guard(() => inner.putStream(k, b, o)),
    getStream: (k, o) => guard(() => inner.getStream(k, o)),
    delete: (k, o) => guard(() => inner.delete(k, o)),
    list: (p) => {
      if (cut) throw new UnavailableError("partitioned from the bucket");
      return inner.list(p);
    },
  };
  return { store, cut: () => (cut = true) };
}

/** The GOAWAY frames a raw client received, described for a failure message. */
function goaways(c: RawConnection): string[] {
  return c.received(FrameType.GOAWAY).map((f) => JSON.stringify(parseGoaway(f)));
}

/** A stream's end as trailers (HEADERS with END_STREAM). */
const trailersOn = (c: RawConnection, stream: number) => () =>
  c.received(FrameType.HEADERS).some((f) => f.streamId === stream && f.flags & Flag.END_STREAM);

/**
 * A coordinator with three raw clients: `live` (its call open, a snapshot received), `idle` (its
 * call ended by the coordinator: a report under another node's name) and `fresh` (no call).
 */
async function coordinatorWithClients(ca: ClusterCa) {
  const dir = await Deno.makeTempDir({ prefix: "podmin-goaway-" });
  await createFsBucket(dir);
  const link = partitionable(openStore(`file://${dir}`));
  const mesh = new MeshNode({
    store: link.store,
    cluster: CLUSTER,
    nodeGroup: "workers",
    nodeId: "node-0",
    ca,
    listen: "127.0.0.1:0",
    advertiseHost: "127.0.0.1",
    leaseMs: 1_500,
    heartbeatMs: 500,
    onSnapshot: () => {},
    log: silentLogger,
  });
  await mesh.start();
  await until("node-0 coordinating", () => mesh.coordinator !== undefined);
  const serverName = nodeServerName(CLUSTER, "node-0");
  const connect = async (nodeId: string) =>
    await RawH2Client.connect({
      ...(await nodeTls(ca, nodeId)),
      host: "127.0.0.1",
      port: mesh.port,
      serverName,
    });
  const report = (nodeId: string) => ({ nodeId, nodeGroup: "workers", seq: 1, endpoints: {} });
  const live = await connect("raw-live");
  const liveStream = live.call(EXCHANGE, serverName, report("raw-live"));
  await live.connection.until(
    "a snapshot",
    () => live.connection.received(FrameType.DATA).length > 0,
  );
  const idle = await connect("raw-idle");
  const idleStream = idle.call(EXCHANGE, serverName, report("someone-else"));
  await idle.connection.until("the refused call's end", trailersOn(idle.connection, idleStream));
  const fresh = await connect("raw-fresh");
  const clients = { live: live.connection, idle: idle.connection, fresh: fresh.connection };
  const cleanup = async () => {
    for (const c of Object.values(clients)) c.destroy();
    await Deno.remove(dir, { recursive: true }).catch(() => {});
  };
  return { mesh, link, clients, liveStream, cleanup };
}

function assertNoGoaway(clients: Record<string, RawConnection>, when: string): void {
  for (const [name, c] of Object.entries(clients)) {
    assert.deepEqual(
      goaways(c),
      [],
      `${when}: the ${name} session received a GOAWAY; frames: ${c.summary()}`,
    );
  }
}

Deno.test("mesh: a mesh node's server sends no GOAWAY to a live, idle or fresh session when it stops", async () => {
  const { mesh, clients, liveStream, cleanup } = await coordinatorWithClients(await clusterCa());
  try {
    await mesh.stop();
    for (const c of Object.values(clients)) await c.closed();
    assertNoGoaway(clients, "stop");
    // The live member was told first: its call ended with UNAVAILABLE before the socket closed.
    assert.ok(
      trailersOn(clients.live, liveStream)(),
      `no status before the close: ${clients.live.summary()}`,
    );
  } finally {
    await cleanup();
  }
});

Deno.test("mesh: a mesh node's server sends no GOAWAY when it crashes", async () => {
  const { mesh, clients, cleanup } = await coordinatorWithClients(await clusterCa());
  try {
    mesh.crash();
    for (const c of Object.values(clients)) await c.closed();
    assertNoGoaway(clients, "crash");
  } finally {
    await cleanup();
  }
});

Deno.test("mesh: a coordinator that loses its lease ends its calls with a status, no GOAWAY", async () => {
  const { mesh, link, clients, liveStream, cleanup } = await coordinatorWithClients(
    await clusterCa(),
  );
  try {
    link.cut();
    await clients.live.until("the live call's end", trailersOn(clients.live, liveStream));
    assert.equal(mesh.coordinator, undefined, "still coordinating after its call ended");
    assert.equal(clients.live.closedAt, undefined, "the session itself was closed");
    // Until the node stops, and while it stops, its sessions get no GOAWAY either.
    await mesh.stop();
    for (const c of Object.values(clients)) await c.closed();
    assertNoGoaway(clients, "lease loss");
  } finally {
    await cleanup();
  }
});

Deno.test("mesh: a member that stops answering gets its call ended with a status, no GOAWAY", async () => {
  const { mesh, clients, liveStream, cleanup } = await coordinatorWithClients(await clusterCa());
  try {
    // The live raw client sends no report after its first and acknowledges no PING: a stalled
    // member. The coordinator ends its call after three heartbeats of silence.
    clients.live.stopPingAcks();
    await clients.live.until("the silent call's end", trailersOn(clients.live, liveStream));
    assert.equal(clients.live.closedAt, undefined, "the session itself was closed");
    await mesh.stop();
    for (const c of Object.values(clients)) await c.closed();
    assertNoGoaway(clients, "silence");
  } finally {
    await cleanup();
  }
});

/** One GOAWAY sequence a peer (or its grpc-js server) can send, on the member's call `s`. */
interface GoawayCase {
  name: string;
  run(c: RawConnection, s: number): Promise<void> | void;
  /** Runs (each with its own member process) for a sequence that aborted only sometimes. */
  repeat?: number;
}

/**
 * How long after resetting the member's stream the peer sends its GOAWAY: part of the stimulus
 * (the frames' timing), not a wait for a state. Before members retired their sessions when their
 * stream ended, this sequence aborted 4 of 16 member processes (2 × exit 134 on nghttp2's
 * `find_stream_on_goaway_func` assertion, 2 × SIGSEGV), see spec §7.9.
 */
const RESET_TO_GOAWAY_MS = 20;

/** Answers the call with a snapshot and waits for the member's next report (it took the snapshot). */
async function answered(c: RawConnection, s: number): Promise<void> {
  const reports = c.received(FrameType.DATA).length;
  c.respond(s);
  c.message(s, SNAPSHOT);
  await c.until("a report after the snapshot", () => c.received(FrameType.DATA).length > reports);
}

const CASES: GoawayCase[] = [
  {
    name: "fresh session: GOAWAY(NO_ERROR, 0) before any answer, refusing the open call",
    run: (c) => c.send(goaway(0, ErrorCode.NO_ERROR)),
  },
  {
    name: "idle session: the call ended, GOAWAY(NO_ERROR, 1) in the same write",
    run: async (c, s) => {
      await answered(c, s);
      c.send(c.trailers(s, UNAVAILABLE, "bye"), goaway(s, ErrorCode.NO_ERROR));
    },
  },
  {
    name: "idle session: the call ended, GOAWAY(NO_ERROR, 0) in the next write",
    run: async (c, s) => {
      await answered(c, s);
      c.send(c.trailers(s, UNAVAILABLE, "bye"));
      c.send(goaway(0, ErrorCode.NO_ERROR));
    },
  },
  {
    name: "grpc-js tryShutdown: GOAWAY(NO_ERROR, 1) on the open stream, the call ended later",
    run: async (c, s) => {
      await answered(c, s);
      c.send(goaway(s, ErrorCode.NO_ERROR));
      const reports = c.received(FrameType.DATA).length;
      await c.until("a report after the GOAWAY", () => c.received(FrameType.DATA).length > reports);
      c.send(c.trailers(s, UNAVAILABLE, "draining"));
    },
  },
  {
    name: "open stream refused: GOAWAY(CANCEL, 0)",
    run: async (c, s) => {
      await answered(c, s);
      c.send(goaway(0, ErrorCode.CANCEL));
    },
  },
  {
    name:
      "grpc-js max_connection_age: GOAWAY(NO_ERROR, 2^31-1) then GOAWAY(NO_ERROR, 1), call ended",
    run: async (c, s) => {
      await answered(c, s);
      c.send(goaway(MAX_STREAM_ID, ErrorCode.NO_ERROR, "max_age"));
      c.send(goaway(s, ErrorCode.NO_ERROR), c.trailers(s, UNAVAILABLE, "max age"));
    },
  },
  {
    name: "reset then GOAWAY(NO_ERROR, 1) in one write",
    run: async (c, s) => {
      await answered(c, s);
      c.send(rstStream(s, ErrorCode.CANCEL), goaway(s, ErrorCode.NO_ERROR));
    },
  },
  {
    name: `reset, then GOAWAY(NO_ERROR, 1) ${RESET_TO_GOAWAY_MS} ms later`,
    run: async (c, s) => {
      await answered(c, s);
      c.send(rstStream(s, ErrorCode.CANCEL));
      await new Promise((r) => setTimeout(r, RESET_TO_GOAWAY_MS));
      c.send(goaway(s, ErrorCode.NO_ERROR));
    },
    repeat: 8,
  },
  {
    name: "reset then GOAWAY(CANCEL, 0) in one write",
    run: async (c, s) => {
      await answered(c, s);
      c.send(rstStream(s, ErrorCode.CANCEL), goaway(0, ErrorCode.CANCEL));
    },
  },
  {
    name:
      "grpc-js forceShutdown as Deno writes it: GOAWAY(NO_ERROR, 1) then RST_STREAM(CANCEL), close",
    run: async (c, s) => {
      await answered(c, s);
      c.send(goaway(s, ErrorCode.NO_ERROR), rstStream(s, ErrorCode.CANCEL));
      c.socket.end();
    },
  },
  {
    name:
      "grpc-js drain(port, grace): GOAWAY(NO_ERROR, 1), after the grace RST_STREAM(CANCEL), close",
    run: async (c, s) => {
      await answered(c, s);
      c.send(goaway(s, ErrorCode.NO_ERROR));
      const reports = c.received(FrameType.DATA).length;
      await c.until("a report after the GOAWAY", () => c.received(FrameType.DATA).length > reports);
      c.send(rstStream(s, ErrorCode.CANCEL));
      c.socket.end();
    },
  },
  {
    name: "stop with a status first: trailers, then GOAWAY(NO_ERROR, 1) and RST_STREAM(CANCEL)",
    run: async (c, s) => {
      await answered(c, s);
      c.send(c.trailers(s, UNAVAILABLE, "coordinator stopped"));
      c.send(goaway(s, ErrorCode.NO_ERROR), rstStream(s, ErrorCode.CANCEL));
    },
  },
  {
    name: "two GOAWAYs: close() then destroy(CANCEL), the second naming 0",
    run: async (c, s) => {
      await answered(c, s);
      c.send(goaway(s, ErrorCode.NO_ERROR), goaway(0, ErrorCode.CANCEL));
    },
  },
  {
    name: "GOAWAY(ENHANCE_YOUR_CALM, 1, too_many_pings)",
    run: async (c, s) => {
      await answered(c, s);
      c.send(goaway(s, ErrorCode.ENHANCE_YOUR_CALM, "too_many_pings"));
    },
  },
];

Deno.test("mesh: a member lives through every GOAWAY sequence of its coordinator and connects again", async () => {
  const ca = await clusterCa();
  const serverTls = await nodeTls(ca, "coordinator");
  const memberTls = await nodeTls(ca, "member-0");
  const outcomes: string[] = [];
  for (const c of CASES.flatMap((c) => Array.from({ length: c.repeat ?? 1 }, () => c))) {
    const server = await RawH2Server.listen(serverTls);
    const member = await MemberProcess.spawn({
      nodeId: "member-0",
      caPem: memberTls.caPem,
      certPem: memberTls.certPem,
      keyPem: memberTls.keyPem,
      endpoint: `127.0.0.1:${server.port}`,
      serverName: nodeServerName(CLUSTER, "coordinator"),
    });
    try {
      const first = await server.connection(0);
      await c.run(first, first.streams[0]);
      // Either it connects again (it lived), or it ended: then `exit` says how.
      const again = server.connection(1, 60_000);
      await Promise.race([again, member.ended()]);
      const exit = member.exit;
      outcomes.push(
        `${c.name} → ${
          exit
            ? `exit ${exit.code}${exit.signal ? ` (${exit.signal})` : ""}`
            : "lived, connected again"
        }`,
      );
      assert.equal(
        exit,
        undefined,
        `${c.name}: the member ended (exit ${exit?.code}, signal ${exit?.signal}):\n${member.tail()}`,
      );
      await again;
      const stopped = await member.stop();
      assert.equal(
        stopped.code,
        0,
        `${c.name}: the member did not stop cleanly:\n${member.tail()}`,
      );
    } finally {
      await member.stop();
      await server.close();
    }
  }
  console.log(`GOAWAY matrix (member in a child process):\n  ${outcomes.join("\n  ")}`);
});

Deno.test("mesh: a member retires its session when its stream ends, before it looks for a coordinator again", async () => {
  const ca = await clusterCa();
  const server = await RawH2Server.listen(await nodeTls(ca, "coordinator"));
  const tls: NodeTls = await nodeTls(ca, "member-0");
  const record: CoordinatorRecord = {
    nodeId: "coordinator",
    term: 1,
    endpoint: `127.0.0.1:${server.port}`,
    serverName: nodeServerName(CLUSTER, "coordinator"),
  };
  // The first read answers; the next one is held until the test releases it.
  let reads = 0;
  let release: () => void = () => {};
  const held = new Promise<void>((r) => release = r);
  const member = new MeshMember({
    nodeId: "member-0",
    nodeGroup: "workers",
    tls: () => tls,
    coordinator: async () => {
      if (reads++ > 0) await held;
      return record;
    },
    heartbeatMs: 200,
    onSnapshot: () => {},
    log: silentLogger,
  });
  member.start();
  try {
    const first = await server.connection(0);
    await answered(first, first.streams[0]);
    first.send(first.trailers(first.streams[0], UNAVAILABLE, "bye"));
    await until("the member's next read of the coordinator record", () => reads > 1);
    // Its session closed while it still waits to learn where to go: nothing to send a GOAWAY to.
    // (Not by the channel's idle timeout, which would retire it only after MESH_CLIENT_IDLE_MS.)
    await first.closed(MESH_CLIENT_IDLE_MS / 2);
    release();
    await server.connection(1);
  } finally {
    release();
    member.stop();
    await server.close();
  }
});

Deno.test("pods api: each watch runs on its own connection, closed when the watch ends", async () => {
  const dir = await Deno.makeTempDir({ prefix: "podmin-pods-goaway-" });
  const socket = path.join(dir, "pods.sock");
  const server = await RawH2Server.listenUnix(socket);
  const watch = new PodsWatch({ socket, onChange: () => {}, maxBackoffMs: 200 });
  watch.start();
  try {
    const first = await server.connection(0);
    const s = first.streams[0];
    first.respond(s);
    first.send(first.trailers(s, UNAVAILABLE, "kubelet restarting"));
    // The ended watch's session is closed (kept, a GOAWAY of kubelet's could reach it) ...
    await first.closed();
    // ... and the next watch comes on a new connection.
    const second = await server.connection(1);
    assert.equal(second.closedAt, undefined);
  } finally {
    watch.stop();
    await server.close();
    await Deno.remove(dir, { recursive: true }).catch(() => {});
  }
});

/**
 * Records a kubelet Pods API session as a client lives it, and replays it on the simulated kubelet
 * (`pods_api_server.ts`), so that the simulator the scale tests use is compared with a real kubelet
 * over time: restarts mid-watch, refused and "initializing" reconnects, re-created static Pods.
 *
 * - `RecordingProxy` sits between a client (the product's `PodsWatch`) and a Pods API socket and
 *   forwards `WatchPods` byte for byte, recording each connection: the events it carried (decoded)
 *   and the gRPC status it ended with.
 * - `replayOnSimulator` drives a `PodsApiServer` through a recording, connection by connection —
 *   the same initial Pods, the same events in order (of the recorded type), the same ends (a stopped server for a kubelet
 *   gone, `initializing` for FAILED_PRECONDITION, `endWatches` for RESOURCE_EXHAUSTED) — while a
 *   fresh `PodsWatch` watches it through another `RecordingProxy`; it returns that client's views
 *   and what the simulator sent, for comparison with the recording.
 */

import { Buffer } from "node:buffer";
import * as path from "node:path";
import * as grpc from "@grpc/grpc-js";
import {
  decodeWatchEvent,
  type PodInfo,
  type WatchEvent,
} from "../../agent/discovery/pod_proto.ts";
import { PodsWatch } from "../../agent/discovery/pods_api.ts";
import { PodsApiServer } from "./pods_api_server.ts";

/** One event a client received. */
export interface RecordedEvent {
  type: WatchEvent["type"];
  pod?: PodInfo;
}

/** One `WatchPods` stream, from the client's connect to its end. */
export interface RecordedConnection {
  events: RecordedEvent[];
  /**
   * The gRPC status the stream ended with (0: ended by the server without error); `byClient`
   * when the client cancelled it.
   */
  end?: { code: number; details: string; byClient?: boolean };
}

/** A recorded session. */
export interface PodsApiRecording {
  /** Who answered (e.g. "kubelet v1.36.3"). */
  peer: string;
  connections: RecordedConnection[];
  /** The client's views (`viewLine` of each Pod), one per change, as it saw them. */
  views: string[][];
}

const WATCH = "/v1alpha1.Pods/WatchPods";
const raw = {
  serialize: (b: Uint8Array) => Buffer.from(b),
  deserialize: (b: Buffer) => new Uint8Array(b),
};

/** Forwards `WatchPods` from `listen` to `upstream`, recording every connection. */
export class RecordingProxy {
  readonly connections: RecordedConnection[] = [];
  readonly #server: grpc.Server;
  readonly #upstream: string;
  readonly #listen: string;
  readonly #clients = new Set<grpc.Client>();

  private constructor(listen: string, upstream: string) {
    this.#listen = listen;
    this.#upstream = upstream;
    this.#server = new grpc.Server();
    this.#server.addService({
      WatchPods: {
        path: WATCH,
        requestStream: false,
        responseStream: true,
        requestSerialize: raw.serialize,
        requestDeserialize: raw.deserialize,
        responseSerialize: raw.serialize,
        responseDeserialize: raw.deserialize,
      },
    }, {
      WatchPods: (call: grpc.ServerWritableStream<Uint8Array, Uint8Array>) => this.#watch(call),
    });
  }

  /** Listens on `unix://<listen>` (a stale socket file is replaced). */
  static async start(o: { listen: string; upstream: string }): Promise<RecordingProxy> {
    await Deno.remove(o.listen).catch(() => {});
    const p = new RecordingProxy(o.listen, o.upstream);
    await new Promise<void>((resolve, reject) =>
      p.#server.bindAsync(
        `unix://${o.listen}`,
        grpc.ServerCredentials.createInsecure(),
        (err) => err ? reject(err) : resolve(),
      )
    );
    return p;
  }

  /** Stops forwarding (open streams are cancelled). */
  async stop(): Promise<void> {
    this.#server.forceShutdown();
    for (const c of this.#clients) c.close();
    await Deno.remove(this.#listen).catch(() => {});
  }

  #watch(call: grpc.ServerWritableStream<Uint8Array, Uint8Array>): void {
    const rec: RecordedConnection = { events: [] };
    this.connections.push(rec);
    // A channel per connection: each client connect is one connect upstream (a shared channel's
    // own reconnect backoff would refuse calls after the upstream came back).
    const client = new grpc.Client(`unix://${this.#upstream}`, grpc.credentials.createInsecure());
    this.#clients.add(client);
    const up = client.makeServerStreamRequest(
      WATCH,
      raw.serialize,
      raw.deserialize,
      new Uint8Array(),
    );
    let ended = false;
    const end = (code: number, details: string, byClient = false) => {
      if (ended) return;
      ended = true;
      rec.end = byClient ? { code, details, byClient } : { code, details };
      client.close();
      this.#clients.delete(client);
    };
    up.on("data", (bytes: Uint8Array) => {
      const e = decodeWatchEvent(bytes);
      rec.events.push(e.pod ? { type: e.type, pod: e.pod } : { type: e.type });
      call.write(bytes);
    });
    up.on("error", (err: grpc.ServiceError) => {
      end(err.code, err.details);
      call.emit("error", { code: err.code, details: err.details });
    });
    up.on("end", () => {
      end(grpc.status.OK, "");
      call.end();
    });
    call.on("cancelled", () => {
      end(grpc.status.CANCELLED, "the client went away", true);
      up.cancel();
    });
  }
}

/** One Pod of a client's view as a line: what discovery uses of it. */
export function viewLine(p: PodInfo): string {
  const labels = Object.entries(p.labels).sort(([a], [b]) => (a < b ? -1 : 1));
  return `${p.namespace}/${p.name} uid=${p.uid} phase=${p.phase} ready=${p.ready} ` +
    `ips=${p.ips.join(",")} labels=${JSON.stringify(labels)}`;
}

/** A client's view as sorted lines. */
export function viewLines(pods: PodInfo[]): string[] {
  return pods.map(viewLine).sort();
}

/** The views with consecutive repeats folded (an event that changes nothing discovery uses). */
export function distinctViews(views: string[][]): string[][] {
  return views.filter((v, i) => i === 0 || JSON.stringify(v) !== JSON.stringify(views[i - 1]));
}

/** A connection as lines: each event (type and Pod), then how it ended (for comparison). */
export function connectionLines(c: RecordedConnection): string[] {
  const lines = c.events.map((e) => `${e.type}${e.pod ? ` ${viewLine(e.pod)}` : ""}`);
  const synced = c.events.some((e) => e.type === "INITIAL_SYNC_COMPLETE");
  // Before a sync, only whether the connect was refused or told to wait is compared.
  if (!synced) lines.push(`failed before sync: ${endKind(c.end)}`);
  else lines.push(`ended: ${endKind(c.end)}`);
  return lines;
}

/** How a stream ended, in the terms the replay reproduces. */
function endKind(end: RecordedConnection["end"]): string {
  if (end?.byClient) return "cancelled by the client";
  switch (end?.code) {
    case grpc.status.FAILED_PRECONDITION:
      return "initializing";
    case grpc.status.RESOURCE_EXHAUSTED:
      return "dropped as slow";
    case undefined:
      return "open";
    default:
      // UNAVAILABLE (refused, reset), CANCELLED or INTERNAL (a stream cut by a server shutting
      // down or dying): kubelet gone.
      return "server gone";
  }
}

/** What `replayOnSimulator` saw. */
export interface Replay {
  /** The product's views on the simulator, one per change. */
  views: string[][];
  /** What the simulator sent, connection by connection (through the proxy). */
  connections: RecordedConnection[];
}

/**
 * Replays `recording` on a simulated kubelet in `dir` with a fresh `PodsWatch` (reconnect backoff
 * capped at `maxBackoffMs`, as in the recording) as the client. Every step waits for an event (the
 * client's connect, a forwarded event, the client's change), never a time; `timeoutMs` bounds the
 * whole replay.
 */
export async function replayOnSimulator(
  recording: PodsApiRecording,
  o: { dir: string; maxBackoffMs?: number; timeoutMs?: number },
): Promise<Replay> {
  const simSocket = path.join(o.dir, "replay-kubelet.sock");
  const proxy = await RecordingProxy.start({
    listen: path.join(o.dir, "replay-proxy.sock"),
    upstream: simSocket,
  });
  let sim: PodsApiServer | undefined;
  const views: string[][] = [];
  let changes = 0;
  const watch: PodsWatch = new PodsWatch({
    socket: path.join(o.dir, "replay-proxy.sock"),
    maxBackoffMs: o.maxBackoffMs ?? 1_000,
    onChange: () => {
      changes++;
      views.push(viewLines(watch.view().pods));
    },
  });
  const deadline = Date.now() + (o.timeoutMs ?? 120_000);
  /** Waits for `f` (polled), failing at the replay's deadline. */
  const step = async (what: string, f: () => boolean) => {
    while (!f()) {
      if (Date.now() > deadline) {
        throw new Error(`replay: timed out waiting for ${what}; saw ${JSON.stringify(views)}`);
      }
      await new Promise((r) => setTimeout(r, 5));
    }
  };
  const running = async () => sim ??= await PodsApiServer.start(simSocket);
  try {
    for (const [i, c] of recording.connections.entries()) {
      const sync = c.events.findIndex((e) => e.type === "INITIAL_SYNC_COMPLETE");
      const kind = endKind(c.end);
      if (sync < 0) {
        // A connect that failed: kubelet starting ("initializing") or gone (nothing listening).
        if (kind === "initializing") (await running()).initializing = true;
        else if (sim) {
          await sim.stop();
          sim = undefined;
        }
      } else {
        // The Pods of the initial list, set while no one watches (no events are sent).
        const s = await running();
        s.initializing = false;
        const initial = new Map(c.events.slice(0, sync).map((e) => [e.pod!.uid, e.pod!]));
        for (const p of s.pods()) if (!initial.has(p.uid)) s.delete(p.uid);
        for (const p of initial.values()) s.set(p);
      }
      const before = changes;
      if (i === 0) watch.start();
      await step(`connection ${i} of the client`, () => proxy.connections.length > i);
      if (sync < 0) {
        await step(`connection ${i} refused`, () => proxy.connections[i].end !== undefined);
        continue;
      }
      let expected = before + 1; // the view replaced at INITIAL_SYNC_COMPLETE
      await step(`the client's view of connection ${i}`, () => changes >= expected);
      for (const e of c.events.slice(sync + 1)) {
        if (e.type === "DELETED") sim!.delete(e.pod!.uid);
        else if (e.type === "ADDED" || e.type === "MODIFIED") sim!.set(e.pod!, { event: e.type });
        expected++;
        await step(`the client's change after ${e.type}`, () => changes >= expected);
      }
      if (kind === "cancelled by the client" || kind === "open") break; // the recording's end
      if (kind === "dropped as slow") sim!.endWatches();
      else if (kind === "server gone") {
        await sim!.stop();
        sim = undefined;
      }
      await step(`connection ${i} ended`, () => proxy.connections[i].end !== undefined);
    }
    // The recording ends with the client's cancel: so does the replay.
    watch.stop();
    await step("the client's cancel", () => proxy.connections.every((c) => c.end !== undefined));
  } finally {
    watch.stop();
    await proxy.stop();
    await sim?.stop();
  }
  return { views, connections: proxy.connections };
}

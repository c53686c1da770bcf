/**
 * A simulated kubelet local Pods API for tests (KEP-4188): gRPC service `v1alpha1.Pods` on a unix
 * socket, speaking the contract of kubelet 1.37's server (`k8s.io/kubelet/pkg/apis/pods/v1alpha1`
 * `api.proto` and `pkg/kubelet/apis/pods/server.go`):
 *
 * - `WatchPods`: one ADDED event per Pod, sorted by UID, then INITIAL_SYNC_COMPLETE (no Pod bytes),
 *   then ADDED / MODIFIED / DELETED as Pods change; a DELETED event carries only name, namespace
 *   and UID. `endWatches()` ends every stream with RESOURCE_EXHAUSTED, as kubelet drops a watcher
 *   whose channel is full.
 * - `ListPods`: every Pod, sorted by UID. `GetPod`: one Pod by UID, NOT_FOUND otherwise.
 * - While `initializing`, every call fails with FAILED_PRECONDITION "Kubelet is initializing".
 * - Recorded from a real kubelet 1.36.3 (tests/support/pods_api_recorder.ts, replayed by
 *   tests/mesh/pods_api_replay_test.ts): right after a restart it answers a watch with an empty
 *   initial list (INITIAL_SYNC_COMPLETE first), then ADDED for each Pod it re-adopts, repeated
 *   for the same UID as their status changes; a re-created static Pod keeps its UID (DELETED,
 *   then ADDED while Pending with its previous IP).
 *
 * Messages: `WatchPodsEvent { EventType type = 1; bytes pod = 2; }`, `ListPodsResponse { repeated
 * bytes pods = 1; }`, `GetPodRequest { string podUID = 1; }`, `GetPodResponse { bytes pod = 1; }`
 * (proto3: zero values are omitted); Pods are `v1.Pod` protobuf bytes, encoded here from the field
 * numbers of `k8s.io/api/core/v1/generated.proto` and `k8s.io/apimachinery/.../meta/v1/
 * generated.proto` the way gogo's generated `Marshal` writes them (fields in ascending order,
 * non-pointer strings written even when empty, nested messages always present).
 */

import { Buffer } from "node:buffer";
import * as grpc from "@grpc/grpc-js";
import { concatBytes } from "../../core/kit/bytes.ts";

/** A Pod as the simulated kubelet reports it. */
export interface SimPod {
  namespace: string;
  name: string;
  uid: string;
  labels?: Record<string, string>;
  /** `metadata.annotations` (a static Pod carries its manifest's, e.g. `podmin.dev/spec`). */
  annotations?: Record<string, string>;
  /** `status.phase` (default `Running`). */
  phase?: string;
  /** The PodReady condition (True/False). */
  ready?: boolean;
  /** `status.podIPs`; `status.podIP` is the first. */
  ips?: string[];
}

/** `v1alpha1.EventType`. */
export const EVENT_TYPE = {
  UNSPECIFIED: 0,
  ADDED: 1,
  MODIFIED: 2,
  DELETED: 3,
  INITIAL_SYNC_COMPLETE: 4,
} as const;

// --- protobuf encoding (written here, independent of the product's decoder) ---

const utf8 = new TextEncoder();

function varint(n: number): number[] {
  const out: number[] = [];
  let v = n;
  while (v >= 0x80) {
    out.push((v % 0x80) | 0x80);
    v = Math.floor(v / 0x80);
  }
  out.push(v);
  return out;
}

function concat(parts: Uint8Array[]): Uint8Array {
  return concatBytes(parts, parts.reduce((n, p) => n + p.length, 0));
}

/** A length-delimited field (wire type 2). */
function bytesField(field: number, value: Uint8Array): Uint8Array {
  return concat([Uint8Array.from([...varint((field << 3) | 2), ...varint(value.length)]), value]);
}

const str = (field: number, s: string) => bytesField(field, utf8.encode(s));
const msg = (field: number, ...parts: Uint8Array[]) => bytesField(field, concat(parts));
/** A varint field (wire type 0). */
const num = (field: number, n: number) => Uint8Array.from([...varint(field << 3), ...varint(n)]);

/** Encodes a `v1.Pod` with the fields discovery reads and a few it must skip. */
export function encodePod(p: SimPod): Uint8Array {
  const sorted = (m: Record<string, string> | undefined) =>
    Object.entries(m ?? {}).sort(([a], [b]) => (a < b ? -1 : 1));
  const labels = sorted(p.labels);
  const meta = [
    str(1, p.name),
    str(2, ""), // generateName
    str(3, p.namespace),
    str(4, ""), // selfLink
    str(5, p.uid),
    str(6, ""), // resourceVersion
    num(7, 0), // generation
    msg(8, num(1, 1_767_225_600), num(2, 0)), // creationTimestamp {seconds, nanos}
    ...labels.map(([k, v]) => msg(11, str(1, k), str(2, v))),
    ...sorted(p.annotations).map(([k, v]) => msg(12, str(1, k), str(2, v))),
  ];
  // PodSpec: containers = 2 (Container: name = 1, image = 2); restartPolicy = 3.
  const spec = [msg(2, str(1, "main"), str(2, "registry.podmin.internal/app:1")), str(3, "Always")];
  const ips = p.ips ?? [];
  const ready = p.ready ?? false;
  const status = [
    str(1, p.phase ?? "Running"),
    // PodCondition: type = 1, status = 2, lastProbeTime = 3, lastTransitionTime = 4.
    msg(2, str(1, "Initialized"), str(2, "True"), msg(3), msg(4, num(1, 1_767_225_601))),
    msg(
      2,
      str(1, "Ready"),
      str(2, ready ? "True" : "False"),
      msg(3),
      msg(4, num(1, 1_767_225_602)),
    ),
    str(3, ""), // message
    str(4, ""), // reason
    str(5, "fd00::1"), // hostIP
    str(6, ips[0] ?? ""), // podIP
    ...ips.map((ip) => msg(12, str(1, ip))), // podIPs
  ];
  return concat([msg(1, ...meta), msg(2, ...spec), msg(3, ...status)]);
}

/** What kubelet sends for a removed Pod: only name, namespace and UID. */
function encodeRemovedPod(p: SimPod): Uint8Array {
  return concat([
    msg(
      1,
      str(1, p.name),
      str(2, ""),
      str(3, p.namespace),
      str(4, ""),
      str(5, p.uid),
      str(6, ""),
      num(7, 0),
      msg(8),
    ),
    msg(2),
    msg(3),
  ]);
}

/** Encodes a `WatchPodsEvent` (proto3: type 0 and empty pod bytes are omitted). */
export function encodeWatchEvent(type: number, pod?: Uint8Array): Uint8Array {
  return concat([
    type ? num(1, type) : new Uint8Array(),
    pod?.length ? bytesField(2, pod) : new Uint8Array(),
  ]);
}

/** Reads `GetPodRequest.podUID` (field 1); other fields are skipped. */
function decodePodUid(bytes: Uint8Array): string {
  let at = 0;
  const read = (): number => {
    let v = 0, mul = 1;
    for (;;) {
      if (at >= bytes.length) throw new Error("truncated varint");
      const b = bytes[at++];
      v += (b & 0x7f) * mul;
      if (!(b & 0x80)) return v;
      mul *= 0x80;
    }
  };
  let uid = "";
  while (at < bytes.length) {
    const key = read();
    const wire = key & 7;
    if (wire === 0) read();
    else if (wire === 2) {
      const len = read();
      if ((key >>> 3) === 1) uid = new TextDecoder().decode(bytes.subarray(at, at + len));
      at += len;
    } else throw new Error(`unexpected wire type ${wire}`);
  }
  return uid;
}

// --- the server ---

const raw = {
  serialize: (b: Uint8Array) => Buffer.from(b),
  deserialize: (b: Buffer) => new Uint8Array(b),
};

function method(name: string, responseStream: boolean) {
  return {
    path: `/v1alpha1.Pods/${name}`,
    requestStream: false,
    responseStream,
    requestSerialize: raw.serialize,
    requestDeserialize: raw.deserialize,
    responseSerialize: raw.serialize,
    responseDeserialize: raw.deserialize,
  };
}

const PODS_SERVICE = {
  WatchPods: method("WatchPods", true),
  ListPods: method("ListPods", false),
  GetPod: method("GetPod", false),
} satisfies grpc.ServiceDefinition;

type Watch = grpc.ServerWritableStream<Uint8Array, Uint8Array>;

/** Counters a test reads. */
export interface PodsApiCounters {
  /** Watch streams opened. */
  watches: number;
  /** Events written to watchers (initial ADDED and INITIAL_SYNC_COMPLETE included). */
  eventsSent: number;
  lists: number;
  gets: number;
}

/** The simulated kubelet Pods API of one node. */
export class PodsApiServer {
  readonly socket: string;
  readonly #server: grpc.Server;
  readonly #pods = new Map<string, SimPod>();
  readonly #watches = new Set<Watch>();
  #waiters: { f: () => boolean; resolve(): void }[] = [];
  /** While true, every call fails with FAILED_PRECONDITION (kubelet's sources not ready). */
  initializing = false;
  readonly counters: PodsApiCounters = { watches: 0, eventsSent: 0, lists: 0, gets: 0 };

  private constructor(socket: string) {
    this.socket = socket;
    this.#server = new grpc.Server();
    this.#server.addService(PODS_SERVICE, {
      WatchPods: (call: Watch) => this.#watch(call),
      ListPods: (
        _call: grpc.ServerUnaryCall<Uint8Array, Uint8Array>,
        done: grpc.sendUnaryData<Uint8Array>,
      ) => {
        this.counters.lists++;
        this.#wake();
        if (this.initializing) return done(initializingError());
        done(null, concat(this.#sorted().map((p) => bytesField(1, encodePod(p)))));
      },
      GetPod: (
        call: grpc.ServerUnaryCall<Uint8Array, Uint8Array>,
        done: grpc.sendUnaryData<Uint8Array>,
      ) => {
        this.counters.gets++;
        this.#wake();
        if (this.initializing) return done(initializingError());
        const uid = decodePodUid(call.request);
        const pod = this.#pods.get(uid);
        if (!pod) {
          return done({ code: grpc.status.NOT_FOUND, details: `pod with UID ${uid} not found` });
        }
        done(null, bytesField(1, encodePod(pod)));
      },
    });
  }

  /** Binds `unix://<socket>` (a stale socket file is replaced). */
  static async start(socket: string): Promise<PodsApiServer> {
    await Deno.remove(socket).catch(() => {});
    const s = new PodsApiServer(socket);
    await new Promise<void>((resolve, reject) =>
      s.#server.bindAsync(
        `unix://${socket}`,
        grpc.ServerCredentials.createInsecure(),
        (err) => err ? reject(err) : resolve(),
      )
    );
    return s;
  }

  /** Watch streams open now. */
  get watchers(): number {
    return this.#watches.size;
  }

  /** Resolves once `f()` holds, checked after every call and stream change the server sees. */
  until(f: () => boolean): Promise<void> {
    if (f()) return Promise.resolve();
    return new Promise((resolve) => this.#waiters.push({ f, resolve }));
  }

  /** Resolves once at least `n` watch streams are open. */
  whenWatched(n = 1): Promise<void> {
    return this.until(() => this.#watches.size >= n);
  }

  /** The Pods, sorted by UID. */
  pods(): SimPod[] {
    return this.#sorted();
  }

  /**
   * Adds or replaces a Pod: ADDED for a new UID, MODIFIED otherwise, to every watcher. `event`
   * names the type instead: a real kubelet (1.36.3, recorded) sends ADDED again for a known UID
   * while it re-adopts its Pods after a restart; a replay of a recording passes the recorded type.
   */
  set(pod: SimPod, options: { event?: "ADDED" | "MODIFIED" } = {}): void {
    const type = options.event
      ? EVENT_TYPE[options.event]
      : this.#pods.has(pod.uid)
      ? EVENT_TYPE.MODIFIED
      : EVENT_TYPE.ADDED;
    this.#pods.set(pod.uid, { ...pod });
    this.#broadcast(encodeWatchEvent(type, encodePod(pod)));
  }

  /** Removes a Pod: DELETED with name, namespace and UID only. */
  delete(uid: string): void {
    const pod = this.#pods.get(uid);
    if (!pod) return;
    this.#pods.delete(uid);
    this.#broadcast(encodeWatchEvent(EVENT_TYPE.DELETED, encodeRemovedPod(pod)));
  }

  /** Ends every watch stream with RESOURCE_EXHAUSTED, as kubelet drops a slow watcher. */
  endWatches(): void {
    for (const w of this.#watches) {
      this.#watches.delete(w);
      w.emit("error", {
        code: grpc.status.RESOURCE_EXHAUSTED,
        details: "watch client channel closed",
      });
    }
    this.#wake();
  }

  /** Stops serving (open streams are cancelled). */
  async stop(): Promise<void> {
    for (const w of this.#watches) w.end();
    this.#watches.clear();
    this.#server.forceShutdown();
    await Deno.remove(this.socket).catch(() => {});
  }

  #sorted(): SimPod[] {
    return [...this.#pods.values()].sort((a, b) => (a.uid < b.uid ? -1 : a.uid > b.uid ? 1 : 0));
  }

  #watch(call: Watch): void {
    this.counters.watches++;
    if (this.initializing) {
      call.emit("error", initializingError());
      this.#wake();
      return;
    }
    for (const p of this.#sorted()) {
      this.#send(call, encodeWatchEvent(EVENT_TYPE.ADDED, encodePod(p)));
    }
    this.#send(call, encodeWatchEvent(EVENT_TYPE.INITIAL_SYNC_COMPLETE));
    this.#watches.add(call);
    const gone = () => {
      if (this.#watches.delete(call)) this.#wake();
    };
    call.on("cancelled", gone);
    call.on("close", gone);
    call.on("error", gone);
    this.#wake();
  }

  #wake(): void {
    this.#waiters = this.#waiters.filter((w) => (w.f() ? (w.resolve(), false) : true));
  }

  #broadcast(event: Uint8Array): void {
    for (const w of this.#watches) this.#send(w, event);
  }

  #send(call: Watch, event: Uint8Array): void {
    call.write(event);
    this.counters.eventsSent++;
  }
}

function initializingError(): Partial<grpc.StatusObject> {
  return { code: grpc.status.FAILED_PRECONDITION, details: "Kubelet is initializing" };
}

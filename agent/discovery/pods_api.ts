/**
 * A client of kubelet's local Pods API (KEP-4188): gRPC service `v1alpha1.Pods` on the unix socket
 * `/var/lib/kubelet/pods-api/pods-api.sock` (gate `PodsAPI`: on by default from kubelet 1.37, alpha
 * in 1.36), messages hand-declared in `pod_proto.ts` and sent through `@grpc/grpc-js` with raw
 * byte (de)serializers.
 *
 * `PodsWatch` keeps a complete view: on every (re)connect it collects ADDED events until
 * INITIAL_SYNC_COMPLETE and then replaces its view at once (a full resync), then applies
 * ADDED / MODIFIED / DELETED. A broken stream keeps the last view (nothing is withdrawn because a
 * read failed) and reconnects with bounded, jittered backoff.
 */

import { Buffer } from "node:buffer";
import * as grpc from "@grpc/grpc-js";
import { UnavailableError } from "../../core/kit/errors.ts";
import type { Logger } from "../../core/kit/log.ts";
import { silentLogger } from "../../core/kit/log.ts";
import { backoffMs } from "../../core/kit/retry.ts";
import { decodeListPods, decodeWatchEvent, type PodInfo, type WatchEvent } from "./pod_proto.ts";

/** kubelet's Pods API socket (measured on kubelet 1.37.2). */
export const PODS_API_SOCKET = "/var/lib/kubelet/pods-api/pods-api.sock";

/** The keepalive ping interval: above kubelet's server minimum (grpc-go's default, 5 min). */
export const PODS_API_KEEPALIVE_MS = 330_000;

const SERVICE = "/v1alpha1.Pods";
const empty = () => Buffer.alloc(0);
const raw = (b: Buffer) => new Uint8Array(b);

/** A connection to the Pods API. */
export class PodsApiClient {
  readonly #client: grpc.Client;
  readonly #socket: string;

  constructor(socket = PODS_API_SOCKET) {
    this.#socket = socket;
    this.#client = new grpc.Client(`unix://${socket}`, grpc.credentials.createInsecure(), {
      // kubelet's gRPC server enforces grpc-go's default keepalive policy (pings at most every
      // 5 min): with 30 s, kubelet 1.36.3 ended the watch after about 2 min with GOAWAY
      // too_many_pings (RESOURCE_EXHAUSTED) and grpc-js doubled its interval at each reconnect.
      "grpc.keepalive_time_ms": PODS_API_KEEPALIVE_MS,
    });
  }

  /** `ListPods`, bounded by `timeoutMs`. */
  list(timeoutMs = 10_000): Promise<PodInfo[]> {
    return new Promise((resolve, reject) => {
      this.#client.makeUnaryRequest(
        `${SERVICE}/ListPods`,
        empty,
        raw,
        new Uint8Array(),
        { deadline: Date.now() + timeoutMs },
        (err, value) => {
          if (err) {
            reject(
              new UnavailableError(`kubelet Pods API ListPods: ${err.message}`, {
                hint: "is kubelet running with its Pods API (gate PodsAPI, on by default from " +
                  `1.37)? The socket is ${this.#socket}`,
              }),
            );
          } else {
            try {
              resolve(decodeListPods(value!));
            } catch (e) {
              reject(e);
            }
          }
        },
      );
    });
  }

  /** `WatchPods`: calls `onEvent` per event until the stream ends; `onEnd` once, with the error. */
  watch(handlers: { onEvent(e: WatchEvent): void; onEnd(err?: Error): void }): { cancel(): void } {
    const call = this.#client.makeServerStreamRequest(
      `${SERVICE}/WatchPods`,
      empty,
      raw,
      new Uint8Array(),
    );
    let ended = false;
    const end = (err?: Error) => {
      if (ended) return;
      ended = true;
      handlers.onEnd(err);
    };
    call.on("data", (bytes: Uint8Array) => {
      try {
        handlers.onEvent(decodeWatchEvent(bytes));
      } catch (err) {
        call.cancel();
        end(err as Error);
      }
    });
    call.on("error", (err: Error) => end(err));
    call.on("end", () => end());
    return { cancel: () => call.cancel() };
  }

  close(): void {
    this.#client.close();
  }
}

/** Options of `PodsWatch`. */
export interface PodsWatchOptions {
  socket?: string;
  /** Called after every change of the view (coalesce in the caller). */
  onChange(): void;
  /** Called when the watch's error changes (a new failure, or cleared by a sync). */
  onError?(error: string | undefined): void;
  log?: Logger;
  /** Reconnect backoff cap (default 10 s). */
  maxBackoffMs?: number;
}

/** A complete, self-healing view of the node's Pods. */
export class PodsWatch {
  readonly #o: PodsWatchOptions;
  readonly #log: Logger;
  #client?: PodsApiClient;
  #call?: { cancel(): void };
  #pods = new Map<string, PodInfo>();
  #pending?: Map<string, PodInfo>;
  #synced = false;
  #stopped = true;
  #failures = 0;
  #timer?: ReturnType<typeof setTimeout>;
  #lastError?: string;

  constructor(options: PodsWatchOptions) {
    this.#o = options;
    this.#log = options.log ?? silentLogger;
  }

  /** The current view: synced once a first INITIAL_SYNC_COMPLETE arrived. */
  view(): { synced: boolean; pods: PodInfo[]; error?: string } {
    return { synced: this.#synced, pods: [...this.#pods.values()], error: this.#lastError };
  }

  start(): void {
    if (!this.#stopped) return;
    this.#stopped = false;
    this.#connect();
  }

  stop(): void {
    this.#stopped = true;
    clearTimeout(this.#timer);
    this.#call?.cancel();
    this.#client?.close();
  }

  #connect(): void {
    if (this.#stopped) return;
    this.#pending = new Map();
    // A channel per watch, closed when the watch ends: no session with ended streams stays open
    // for a GOAWAY of kubelet's to reach (Deno's HTTP/2 client can abort on one: spec §7.9).
    const client = this.#client = new PodsApiClient(this.#o.socket);
    this.#call = client.watch({
      onEvent: (e) => this.#event(e),
      onEnd: (err) => {
        client.close();
        if (this.#stopped) return;
        const previous = this.#lastError;
        this.#lastError = err ? err.message : "stream ended";
        if (this.#lastError !== previous) this.#o.onError?.(this.#lastError);
        this.#failures++;
        const delay = Math.max(
          100,
          backoffMs(
            { attempts: 0, baseMs: 200, maxMs: this.#o.maxBackoffMs ?? 10_000 },
            this.#failures,
          ),
        );
        this.#log.warn("pods api watch ended; reconnecting", {
          error: this.#lastError,
          delayMs: delay,
        });
        // A one-shot reconnect after the watch's own backoff, not a periodic pass: no Loop.
        this.#timer = setTimeout(() => this.#connect(), delay);
      },
    });
  }

  #event(e: WatchEvent): void {
    if (e.type === "INITIAL_SYNC_COMPLETE") {
      this.#pods = this.#pending ?? new Map();
      this.#pending = undefined;
      this.#synced = true;
      this.#failures = 0;
      const hadError = this.#lastError !== undefined;
      this.#lastError = undefined;
      if (hadError) this.#o.onError?.(undefined);
      this.#o.onChange();
      return;
    }
    if (!e.pod) return;
    const target = this.#pending ?? this.#pods;
    if (e.type === "DELETED") target.delete(e.pod.uid);
    else target.set(e.pod.uid, e.pod);
    if (!this.#pending) this.#o.onChange();
  }
}

/**
 * A mesh member (spec §7.9): every agent holds one stream to the coordinator the bucket names
 * (`dns/coordinator.json`), sends its complete local endpoints on every change and as a heartbeat,
 * and keeps the newest complete snapshot it received (term first, then version). When the
 * coordinator is unreachable it keeps its last snapshot (the dataplane keeps running) and
 * reconnects with jittered backoff; it reads the record only on its `RecordReadPlan` (a few
 * reads per failover, about one per lease period while leaderless) and between reads retries the
 * endpoint it knows, which costs the bucket nothing.
 */

import { Loop } from "../loop.ts";
import type * as grpc from "@grpc/grpc-js";
import {
  type ClusterSnapshot,
  compareSnapshots,
  type EndpointSet,
  type NodeReport,
  parseClusterSnapshot,
} from "../../core/model/endpoint_snapshot.ts";
import type { Logger } from "../../core/kit/log.ts";
import { backoffMs } from "../../core/kit/retry.ts";
import type { CoordinatorRecord } from "./coordinator_record.ts";
import { RecordReadPlan, type RecordReadPlanOptions } from "./record_read_plan.ts";
import {
  type MemberStream,
  MESH_CHANNEL_OPTIONS,
  MESH_HANDOVER,
  MeshClient,
} from "./mesh_service.ts";
import { clientCredentials, type NodeTls } from "./node_tls.ts";

/** Options of `MeshMember`. */
export interface MeshMemberOptions {
  nodeId: string;
  nodeGroup: string;
  /** The current node TLS identity (renewed by the caller). */
  tls(): NodeTls;
  /** Reads the coordinator record (undefined when there is none yet). */
  coordinator(): Promise<CoordinatorRecord | undefined>;
  /** Called with every newer snapshot. */
  onSnapshot(snapshot: ClusterSnapshot): void;
  /** Heartbeat interval of reports (default 5 s). */
  heartbeatMs?: number;
  /** Reconnect backoff cap (default 2 s: a new coordinator is found quickly). */
  maxBackoffMs?: number;
  /** When it reads the coordinator record (default: at every attempt). */
  recordPlan?: Omit<RecordReadPlanOptions, "now">;
  log: Logger;
}

/** One agent's membership. */
export class MeshMember {
  readonly #o: MeshMemberOptions;
  #endpoints: EndpointSet = {};
  #seq = 0;
  #snapshot?: ClusterSnapshot;
  #stream?: MemberStream;
  #client?: grpc.Client;
  #stopped = true;
  #failures = 0;
  #timer?: ReturnType<typeof setTimeout>;
  #heartbeat?: Loop;
  #connectedTo?: string;
  /** When the last stream that delivered snapshots ended (performance.now()); cleared on connect. */
  #lostAt?: number;
  #lastError?: string;
  #record?: CoordinatorRecord;
  /** A reconnect attempt waits for its backoff timer. */
  #waiting = false;
  /** When the waiting attempt comes (performance.now() time). */
  #attemptAt = 0;
  /** When attempts read the coordinator record. */
  readonly recordPlan: RecordReadPlan;
  /** Reports this member sent (the scale test counts messages). */
  reportsOut = 0;
  /** Streams this member opened to a coordinator (the renewal test counts reconnects). */
  streamsOpened = 0;

  constructor(options: MeshMemberOptions) {
    this.#o = options;
    this.recordPlan = new RecordReadPlan(
      options.recordPlan ?? { stepMs: 0, takeoverMs: 0, everyMs: 0 },
    );
  }

  /** The newest snapshot received. */
  get snapshot(): ClusterSnapshot | undefined {
    return this.#snapshot;
  }

  /** True while its stream to the coordinator is up and has delivered a snapshot. */
  connected(): boolean {
    return this.#stream !== undefined && this.#connectedTo !== undefined;
  }

  /**
   * When its last snapshot-delivering stream ended (`performance.now()` time), undefined while
   * connected or before its first connection: the lease contention gate's loss time.
   */
  lostAt(): number | undefined {
    return this.#lostAt;
  }

  /** Where it is connected, and the last connection error. */
  get state(): { connectedTo?: string; lastError?: string } {
    return { connectedTo: this.#connectedTo, lastError: this.#lastError };
  }

  start(): void {
    if (!this.#stopped) return;
    this.#stopped = false;
    this.#heartbeat = new Loop({
      name: "mesh-heartbeat",
      intervalMs: this.#o.heartbeatMs ?? 5_000,
      log: this.#o.log,
      pass: () => {
        this.#report();
        return Promise.resolve({});
      },
    });
    this.#heartbeat.start();
    void this.#connect();
  }

  stop(): void {
    this.#stopped = true;
    clearTimeout(this.#timer);
    void this.#heartbeat?.stop(); // its timer is cleared at once
    this.#stream?.cancel();
    this.#client?.close();
  }

  /**
   * The record was just rewritten (by this node): the next attempt reads it, and comes now when
   * one is waiting for its backoff (an attempt under way or a stream's end brings the next one).
   */
  recordChanged(): void {
    this.recordPlan.changed();
    if (this.#stopped || !this.#waiting) return;
    this.#wait(0); // the waiting reconnect, brought forward
  }

  /** A new lease holder was seen (not this node): its record is read soon (`RecordReadPlan`). */
  recordChanging(): void {
    this.recordPlan.changing();
    // A waiting attempt that would come after the read is due is brought forward to it.
    const due = Math.max(0, this.recordPlan.nextAt - performance.now());
    if (!this.#stopped && this.#waiting && performance.now() + due < this.#attemptAt) {
      this.#wait(due);
    }
  }

  /** Sets this node's complete local endpoints; sent at once when they changed. */
  setEndpoints(endpoints: EndpointSet): void {
    if (JSON.stringify(endpoints) === JSON.stringify(this.#endpoints)) return;
    this.#endpoints = endpoints;
    this.#seq++;
    this.#report();
  }

  #report(): void {
    if (!this.#stream) return;
    const report: NodeReport = {
      nodeId: this.#o.nodeId,
      nodeGroup: this.#o.nodeGroup,
      seq: this.#seq,
      endpoints: this.#endpoints,
    };
    try {
      this.#stream.write(report);
      this.reportsOut++;
    } catch { /* the stream's error handler reconnects */ }
  }

  async #connect(): Promise<void> {
    if (this.#stopped) return;
    let record = this.#record;
    if (this.recordPlan.due()) {
      this.recordPlan.read();
      try {
        record = this.#record = await this.#o.coordinator();
      } catch (err) {
        this.#retry(`reading the coordinator record: ${(err as Error).message}`);
        return;
      }
    }
    if (!record) {
      this.#retry("no coordinator yet");
      return;
    }
    if (this.#stopped) return;
    this.#client?.close();
    const client = new MeshClient(record.endpoint, clientCredentials(this.#o.tls()), {
      ...MESH_CHANNEL_OPTIONS,
      // Peers are addressed by IP; the certificate names the node: verify that name.
      "grpc.ssl_target_name_override": record.serverName,
      "grpc.default_authority": record.serverName,
    });
    this.#client = client;
    const stream = (client as unknown as {
      exchange(): MemberStream;
    }).exchange();
    this.#stream = stream;
    this.streamsOpened++;
    let ended = false;
    const end = (why: string) => {
      if (ended) return;
      ended = true;
      // Its session is retired at once, not at the next attempt: a session whose stream ended
      // must not sit idle where a peer's GOAWAY can reach it (denoland/deno#36788, spec §7.9).
      client.close();
      if (this.#stream === stream) {
        // A stream that delivered snapshots is lost: the record is read on the plan after a
        // loss (a step after a handover, else after a takeover; then once per lease).
        if (this.#connectedTo !== undefined) {
          this.#lostAt = performance.now();
          this.recordPlan.lost({
            at: this.#lostAt,
            nodes: this.#snapshot?.nodes,
            handover: why.includes(MESH_HANDOVER),
          });
        }
        this.#stream = undefined;
        this.#connectedTo = undefined;
      }
      this.#retry(why);
    };
    stream.on("data", (raw: unknown) => {
      let s: ClusterSnapshot;
      try {
        s = parseClusterSnapshot(raw);
      } catch (err) {
        this.#o.log.warn("mesh snapshot refused", { error: (err as Error).message });
        stream.cancel();
        return;
      }
      this.#failures = 0;
      this.#connectedTo = record!.nodeId;
      this.recordPlan.connected();
      this.#lostAt = undefined;
      this.#lastError = undefined;
      if (!this.#snapshot || compareSnapshots(s, this.#snapshot) > 0) {
        this.#snapshot = s;
        this.#o.onSnapshot(s);
      }
    });
    stream.on("error", (err: Error) => end(err.message));
    stream.on("end", () => end("coordinator ended the stream"));
    this.#report();
  }

  #retry(why: string): void {
    if (this.#stopped) return;
    this.#lastError = why;
    this.#failures++;
    const delay = Math.max(
      50,
      backoffMs({ attempts: 0, baseMs: 100, maxMs: this.#o.maxBackoffMs ?? 2_000 }, this.#failures),
    );
    this.#wait(delay);
  }

  /** The next attempt after `delay` ms (replacing a waiting one). */
  #wait(delay: number): void {
    clearTimeout(this.#timer);
    this.#waiting = true;
    this.#attemptAt = performance.now() + delay;
    // A one-shot reconnect after a backoff the stream's state decides, not a periodic pass: no Loop.
    this.#timer = setTimeout(() => {
      this.#waiting = false;
      void this.#connect();
    }, delay);
  }
}

/**
 * One agent's part of the endpoint mesh (spec §7.9): a TLS 1.3 mutual-auth gRPC server (cluster-CA
 * node certificate), a contender for the coordinator lease (`dns/coordinator-lease.json`, the
 * bucket lease of core/bucket/bucket_lease.ts), the coordinator while it holds that lease, and a member
 * that streams to whichever agent the bucket names as coordinator (itself included).
 */

import { Loop } from "../loop.ts";
import * as grpc from "@grpc/grpc-js";
import { BucketLease, type LeaseStatus } from "../../core/bucket/bucket_lease.ts";
import { MESH_COORDINATOR_LEASE } from "../../core/bucket/bucket_layout.ts";
import type { ClusterSnapshot } from "../../core/model/endpoint_snapshot.ts";
import type { Logger } from "../../core/kit/log.ts";
import type { ObjectStore } from "../../core/store/object_store.ts";
import {
  ContentionGate,
  DEFAULT_CONTENDERS,
  type GateSnapshot,
  LISTED_ROUNDS,
} from "./contention_gate.ts";
import { type Announcers, Coordinator } from "./coordinator.ts";
import { readCoordinatorRecord, writeCoordinatorRecord } from "./coordinator_record.ts";
import { MeshMember } from "./member.ts";
import {
  type CoordinatorStream,
  endCall,
  MESH_HANDOVER,
  MESH_SERVER_OPTIONS,
  MESH_SERVICE,
} from "./mesh_service.ts";
import { MeshServer } from "./mesh_server.ts";
import { type NodeCertificateStatus, NodeIdentity } from "./node_identity.ts";
import { type ClusterCa, nodeServerName, type NodeTls, peerNodeId } from "./node_tls.ts";

/**
 * How long a stopping coordinator waits at most for its members to close their connections after
 * their calls ended (a member closes its channel when its stream ends); then it closes the rest.
 */
const SESSION_DRAIN_MS = 2_500;

/** Options of `MeshNode`. */
export interface MeshNodeOptions {
  store: ObjectStore;
  cluster: string;
  nodeGroup: string;
  nodeId: string;
  ca: ClusterCa;
  /** Address the server binds, e.g. `[::]:7443` or `127.0.0.1:0`. */
  listen: string;
  /** Host peers reach it at (its node address); the bound port is appended. */
  advertiseHost: string;
  /** Coordinator lease duration (default 15 s). */
  leaseMs?: number;
  /**
   * The last snapshot of an earlier run of this agent (`<state-dir>/mesh.json`): until its member
   * has a snapshot of its own, the agent contends in its round of that term, counted from its
   * start, not at once — a whole cluster restarting together does not step the lease 1,000 times.
   */
  previous?: GateSnapshot;
  /** Disconnected agents per contention round (default 3; `ContentionGate`). */
  contenders?: number;
  /** Member heartbeat (default 5 s). */
  heartbeatMs?: number;
  /** How long a disconnected member's endpoints stay (default 10 s). */
  graceMs?: number;
  onSnapshot(snapshot: ClusterSnapshot): void;
  /** The coordinator's polls of announced objects (change notification, §7.9). */
  announce?: Announcers;
  /** Their interval (default 2 s). */
  pollMs?: number;
  /** Lifetime of the node certificate, renewed at half of it (default 24 h; `--node-cert-lifetime`). */
  nodeCertLifetimeMs?: number;
  /** After each renewal of the node certificate, or failed renewal. */
  onNodeCertificate?: (status: NodeCertificateStatus) => void;
  /** Issues node certificates (default from `ca`; tests make it fail). */
  issueNodeTls?: ConstructorParameters<typeof NodeIdentity>[0]["issue"];
  log: Logger;
}

/** The agent's mesh: server, election, coordinator, member. */
export class MeshNode {
  readonly #o: MeshNodeOptions;
  readonly member: MeshMember;
  readonly #lease: BucketLease;
  readonly #gate: ContentionGate;
  readonly #identity: NodeIdentity;
  #server?: MeshServer;
  #coordinator?: Coordinator;
  /** The election: one step per third of the lease (never backs off: the lease would run out). */
  readonly #election: Loop;
  #stopped = true;

  constructor(options: MeshNodeOptions) {
    this.#o = options;
    this.#lease = new BucketLease({
      store: options.store,
      key: MESH_COORDINATOR_LEASE,
      holder: options.nodeId,
      durationMs: options.leaseMs ?? 15_000,
    });
    this.#election = new Loop({
      name: "mesh-election",
      intervalMs: this.#stepMs(),
      log: options.log,
      pass: async () => {
        await this.#elect();
        return {};
      },
    });
    // A round of contenders lasts a full takeover of a crashed holder's lease: the lease, the
    // margin, and the step in which the contender saw it first.
    const leaseMs = options.leaseMs ?? 15_000;
    const takeoverMs = leaseMs + this.#lease.marginMs + this.#stepMs();
    this.#gate = new ContentionGate({
      nodeId: options.nodeId,
      contenders: options.contenders,
      stepMs: this.#stepMs(),
      roundMs: takeoverMs,
    });
    this.#identity = new NodeIdentity({
      ca: options.ca,
      cluster: options.cluster,
      nodeGroup: options.nodeGroup,
      nodeId: options.nodeId,
      lifetimeMs: options.nodeCertLifetimeMs,
      issue: options.issueNodeTls,
      onChange: options.onNodeCertificate,
      log: options.log,
    });
    this.member = new MeshMember({
      nodeId: options.nodeId,
      nodeGroup: options.nodeGroup,
      // Each new channel presents the current certificate; an open stream keeps its session.
      tls: (): NodeTls => this.#identity.current,
      coordinator: () => readCoordinatorRecord(options.store),
      // A record changes only when a lease is won: after a loss, two reads when a successor has
      // had time to take over (spread over the cluster), then one per lease (RecordReadPlan).
      recordPlan: { stepMs: this.#stepMs(), takeoverMs, everyMs: leaseMs },
      onSnapshot: options.onSnapshot,
      heartbeatMs: options.heartbeatMs,
      log: options.log,
    });
  }

  /** The coordinator, while this node is it. */
  get coordinator(): Coordinator | undefined {
    return this.#coordinator;
  }

  /**
   * Whether this agent steps the leases now (the coordinator lease here, the CA lease in the
   * identity-ca loop): the coordinator does; a connected member does not; a disconnected one
   * while its `ContentionGate` round contends.
   */
  contends(): boolean {
    if (this.#coordinator) return true;
    const own = this.member.snapshot;
    return this.#gate.contend(
      this.member.connected(),
      own ?? this.#o.previous,
      own ? this.member.lostAt() : this.#startedAt,
    );
  }

  /**
   * True while this member lost its coordinator and a successor is due: from the loss until its
   * plan's second record read after a takeover (`RecordReadPlan.electionEndsAt`). Direct fallback
   * polls wait that long (`IndexNotifier.hold`), so a leaderless cluster spends its requests on
   * the election.
   */
  electing(): boolean {
    if (this.member.connected() || this.#coordinator) return false;
    const ends = this.member.recordPlan.electionEndsAt();
    return ends !== undefined && performance.now() < ends;
  }

  /** The bound port. */
  get port(): number {
    return this.#server?.port ?? 0;
  }

  /** The node certificate's status (when it expires, renewal failures); undefined before start. */
  nodeCertificate(): NodeCertificateStatus | undefined {
    return this.#identity.status();
  }

  /**
   * Issues the node certificate (renewed at half-life from then on), binds the server, starts the
   * election and the member.
   */
  async start(): Promise<void> {
    this.#stopped = false;
    this.#startedAt = performance.now();
    await this.#identity.start();
    try {
      await this.#bind();
    } catch (err) {
      await this.#identity.stop();
      throw err;
    }
    this.member.start();
    this.#election.start();
  }

  /**
   * Leaves the mesh: member, coordinator (every member's call ended with UNAVAILABLE), lease
   * (released), server. A coordinator first waits (at most `SESSION_DRAIN_MS`) for its members
   * to close their connections; the server then closes the rest without a GOAWAY (MeshServer).
   */
  async stop(): Promise<void> {
    this.#stopped = true;
    void this.#election.stop(); // its timer is cleared at once; a running step is not awaited
    clearTimeout(this.#expiryTimer);
    this.member.stop();
    await this.#identity.stop();
    const wasCoordinator = this.#coordinator !== undefined;
    this.#coordinator?.stop(MESH_HANDOVER);
    this.#coordinator = undefined;
    await this.#lease.release().catch(() => false);
    if (wasCoordinator) await this.#server?.drained(SESSION_DRAIN_MS);
    this.#server?.close();
  }

  /** Stops without releasing the lease or saying goodbye (a crash, for tests). */
  crash(): void {
    this.#stopped = true;
    void this.#election.stop();
    clearTimeout(this.#expiryTimer);
    this.member.stop();
    void this.#identity.stop();
    this.#coordinator?.stop();
    this.#coordinator = undefined;
    this.#server?.close();
  }

  async #bind(): Promise<void> {
    const server = new grpc.Server(MESH_SERVER_OPTIONS);
    server.addService(MESH_SERVICE, {
      exchange: (call: CoordinatorStream) => {
        const peer = peerNodeId(call.getAuthContext()?.sslPeerCertificate, this.#o.cluster);
        if (!peer) {
          endCall(call, "no cluster node certificate");
          return;
        }
        if (!this.#coordinator || !this.#lease.holds()) {
          endCall(call, "not the coordinator");
          return;
        }
        this.#coordinator.accept(call, peer);
      },
    });
    // Bound once: each renewal swaps the certificate of new handshakes (NodeServerCredentials).
    this.#server = await MeshServer.listen(
      server,
      this.#o.listen,
      this.#identity.serverCredentials,
    );
  }

  /** One election step per third of the lease; becomes or stops being the coordinator. */
  async #elect(): Promise<void> {
    if (this.#stopped) return;
    // A member with a live stream to a coordinator does not contend (no lease reads while idle:
    // the cluster's election reads are the coordinator's renewals alone); once its stream ends,
    // it steps the lease when its contention slot comes and takes over after the holder's lease
    // ran out.
    if (!this.contends()) return;
    try {
      const step = await this.#lease.step();
      if (step.leader && (!this.#coordinator || this.#coordinatorTerm !== step.term)) {
        this.#coordinator?.stop();
        const previous = this.member.snapshot;
        this.#coordinator = new Coordinator({
          term: step.term!,
          graceMs: this.#o.graceMs,
          // The last snapshot of an earlier term: its endpoints stay until its members reported.
          ...(previous && previous.term < step.term!
            ? { inherit: { endpoints: previous.endpoints, nodes: previous.nodes } }
            : {}),
          // Three heartbeats without a report: the member is gone or stalled.
          silenceMs: 3 * (this.#o.heartbeatMs ?? 5_000),
          announce: this.#o.announce,
          pollMs: this.#o.pollMs,
          nodeId: this.#o.nodeId,
          successors: LISTED_ROUNDS * (this.#o.contenders ?? DEFAULT_CONTENDERS),
          log: this.#o.log,
        });
        this.#coordinatorTerm = step.term!;
        const host = this.#o.advertiseHost.includes(":")
          ? `[${this.#o.advertiseHost}]`
          : this.#o.advertiseHost;
        await writeCoordinatorRecord(this.#o.store, {
          nodeId: this.#o.nodeId,
          term: step.term!,
          endpoint: `${host}:${this.port}`,
          serverName: nodeServerName(this.#o.cluster, this.#o.nodeId),
        });
        this.member.recordChanged();
        this.#o.log.info("mesh coordinator", { term: step.term });
      } else if (!step.leader && this.#newHolder(step)) {
        // Another contender won (a lost race, or a holder newer than our snapshot's term): its
        // record follows within a request or two.
        this.member.recordChanging();
      } else if (step.action === "observed") {
        this.#stepAtExpiry(step);
      }
      if (!step.leader && this.#coordinator) {
        this.#coordinator.stop(MESH_HANDOVER);
        this.#coordinator = undefined;
        this.#o.log.info("mesh coordinator lease lost", {});
      }
    } catch (err) {
      this.#o.log.warn("mesh election step failed", { error: (err as Error).message });
      // Cut off from the bucket: the lease runs out on our own clock, and so does our term.
      if (this.#coordinator && !this.#lease.holds()) {
        this.#coordinator.stop();
        this.#coordinator = undefined;
        this.#o.log.info("mesh coordinator lease expired", {});
      }
    }
  }

  /**
   * A contender that saw the holder's lease unchanged steps again the moment it may take it over
   * (a hint of the election loop), not at the next step: a crashed holder's lease is taken up to a
   * step sooner. The lease's own duration is assumed to be this node's (a lease of another
   * duration only makes that step observe once more).
   */
  #stepAtExpiry(step: LeaseStatus): void {
    const seen = step.seen;
    if (!seen || seen.released || seen.corrupt) return;
    const leftMs = (this.#o.leaseMs ?? 15_000) + this.#lease.marginMs - seen.unchangedMs;
    if (!(leftMs > 0 && leftMs < this.#stepMs()) || this.#expiryTimer !== undefined) return;
    // A hint given during a pass would run the next pass at once (Loop), so a one-shot timer
    // hints after the wait; not a periodic pass: no Loop.
    this.#expiryTimer = setTimeout(() => {
      this.#expiryTimer = undefined;
      this.#election.hint({ delayMs: 0 });
    }, leftMs + 20);
  }

  /** The timer of `#stepAtExpiry`. */
  #expiryTimer?: ReturnType<typeof setTimeout>;

  /** True the first time a step shows a holder of a term newer than this member knows. */
  #newHolder(step: LeaseStatus): boolean {
    const term = step.action === "raced" ? Infinity : step.seen?.term;
    if (term === undefined || step.seen?.released) return false;
    const known = Math.max(this.member.snapshot?.term ?? 0, this.#holderSeen);
    if (term <= known) return false;
    if (term !== Infinity) this.#holderSeen = term;
    return true;
  }

  /** The newest lease term a step showed held by another node. */
  #holderSeen = 0;
  /** When `start` was called (the wait of a restarted agent's round counts from it). */
  #startedAt?: number;

  /** The election step: a third of the lease. */
  #stepMs(): number {
    return Math.max(50, Math.floor((this.#o.leaseMs ?? 15_000) / 3));
  }

  #coordinatorTerm?: number;
}

/**
 * The mesh coordinator (spec §7.9): the elected agent keeps every member's latest complete report,
 * merges them into one complete cluster snapshot, and pushes it to every connected member on each
 * change (coalesced) and once to a member that joins. A change costs one report in and one snapshot
 * out per member: O(N) messages, never N². The first snapshot announcing a new deployments index
 * carries the change its poller found (`indexChange`, specs inline), once.
 *
 * A member's report is accepted only from the node its verified certificate names. A member whose
 * stream ends keeps its endpoints for `graceMs` (a reconnect in between changes nothing); after
 * that its endpoints leave the snapshot (a node that never comes back). A stream without a report
 * for `silenceMs` is ended with a status (the server sends no keepalive pings: spec §7.9).
 *
 * A new term's coordinator starts with no member: until as many members as the previous term's
 * last snapshot merged have reported, or `graceMs` passed, its snapshots keep that snapshot's
 * endpoints too (`inherit`), so a member that has not reconnected yet is kept as one whose stream
 * ended would be, and a coordinator change withdraws no live backend from any dataplane.
 */

import { Loop } from "../loop.ts";
import {
  ANNOUNCED_OBJECTS,
  type AnnouncedObject,
  type ClusterSnapshot,
  type EndpointSet,
  type IndexAnnouncement,
  mergeReports,
  type NodeReport,
  parseNodeReport,
  sameEndpoints,
} from "../../core/model/endpoint_snapshot.ts";
import type { Logger } from "../../core/kit/log.ts";
import type { IndexChange } from "../../core/bucket/index_change.ts";
import { type CoordinatorStream, endCall, Serialized } from "./mesh_service.ts";
import { DEFAULT_CONTENDERS, electionHash, LISTED_ROUNDS } from "./contention_gate.ts";

/** Options of `Coordinator`. */
export interface CoordinatorOptions {
  /** The lease term this coordinator holds (the snapshots' term). */
  term: number;
  /** This coordinator's node id (never its own successor). */
  nodeId?: string;
  /**
   * How many successors its snapshots list (default `LISTED_ROUNDS` × `DEFAULT_CONTENDERS`; spec
   * §7.9, bounded election).
   */
  successors?: number;
  /** How long a disconnected member's endpoints stay (default 10 s). */
  graceMs?: number;
  /**
   * The newest snapshot of an earlier term this agent's member held: its endpoints stay in this
   * coordinator's snapshots until `nodes` members reported or `graceMs` passed.
   */
  inherit?: Pick<ClusterSnapshot, "endpoints" | "nodes">;
  /**
   * A member stream without a report for this long is ended with UNAVAILABLE (default 15 s: three
   * heartbeats). It replaces the server's HTTP/2 keepalive, which ends a silent peer's session
   * with a GOAWAY (spec §7.9).
   */
  silenceMs?: number;
  /** Coalescing delay of broadcasts (default 20 ms). */
  coalesceMs?: number;
  /**
   * Conditional GETs of the announced objects (`deployments/index.json`, `services/index.json`,
   * the CA state): each ETag is announced in the snapshots so members read the object only when
   * it changed. An object without a poller is not announced (members poll it themselves).
   */
  announce?: Announcers;
  /** Interval of the polls that name none (default 2 s). */
  pollMs?: number;
  log: Logger;
}

/**
 * What one poll of an announced object found: its announcement and, for the deployments index,
 * the change from the previous index the poller read (specs inline: `indexPoller`).
 */
export type PolledAnnouncement = IndexAnnouncement & { change?: IndexChange };

/** One announced object: its conditional GET and, optionally, its own poll interval. */
export interface Announcer {
  poll: () => Promise<PolledAnnouncement>;
  everyMs?: number;
}

/** The coordinator's pollers, by announced object. */
export type Announcers = Partial<Record<AnnouncedObject, Announcer>>;

/** One announced object's poll state. */
interface Announced {
  poll: () => Promise<PolledAnnouncement>;
  everyMs?: number;
  current?: IndexAnnouncement;
  failures: number;
  loop?: Loop;
}

interface Member {
  report: NodeReport;
  /** `electionHash(node id, term)`: its place among the successors. */
  hash: number;
  streams: Set<CoordinatorStream>;
  /** Timer that drops the member after its last stream ended. */
  drop?: ReturnType<typeof setTimeout>;
}

/** Counters the scale test prints. */
export interface CoordinatorCounters {
  reportsIn: number;
  snapshotsOut: number;
  broadcasts: number;
  indexReads: number;
  /** Reads of every announced object (the index included). */
  objectReads: number;
  /** Snapshots built with an index change, and the inline specs they carried. */
  changes: number;
  inlineSpecs: number;
}

/** One term's coordinator. */
export class Coordinator {
  readonly #o: CoordinatorOptions;
  readonly #members = new Map<string, Member>();
  #snapshot: ClusterSnapshot;
  /** `#snapshot` as sent (serialized once per snapshot, for every member). */
  #wire?: Serialized;
  #timer?: ReturnType<typeof setTimeout>;
  /** The earlier term's endpoints, kept until its members reported (`inherit`). */
  #inherited?: EndpointSet;
  #inheritTimer?: ReturnType<typeof setTimeout>;
  readonly #announced = new Map<AnnouncedObject, Announced>();
  #stopped = false;
  readonly counters: CoordinatorCounters = {
    reportsIn: 0,
    snapshotsOut: 0,
    broadcasts: 0,
    indexReads: 0,
    objectReads: 0,
    changes: 0,
    inlineSpecs: 0,
  };
  /** The index change the next snapshot carries (the first announcing its index only). */
  #change?: IndexChange;

  constructor(options: CoordinatorOptions) {
    this.#o = options;
    this.#snapshot = { term: options.term, version: 0, nodes: 0, endpoints: {} };
    if (options.inherit && options.inherit.nodes > 0) {
      this.#inherited = options.inherit.endpoints;
      // A one-shot grace, as for a member whose stream ended: no Loop.
      this.#inheritTimer = setTimeout(() => this.#endInheritance(), options.graceMs ?? 10_000);
    }
    for (const field of ANNOUNCED_OBJECTS) {
      const announcer = options.announce?.[field];
      if (!announcer) continue;
      const a: Announced = { ...announcer, failures: 0 };
      this.#announced.set(field, a);
      // A failed read keeps the interval (never backs off): the announcement is withdrawn instead.
      a.loop = new Loop({
        name: `mesh-announce-${field}`,
        intervalMs: a.everyMs ?? options.pollMs ?? 2_000,
        // The poll's period bounds apply → announcement: a slow read must not stretch it.
        fixedRate: true,
        log: options.log,
        pass: async () => {
          await this.#poll(field, a);
          return {};
        },
      });
      a.loop.start();
    }
  }

  /** One poll (its loop brings the next after the interval); a failed read keeps the announcement. */
  async #poll(field: AnnouncedObject, a: Announced): Promise<void> {
    if (this.#stopped) return;
    try {
      const got = await a.poll();
      if (field === "index") this.counters.indexReads++;
      this.counters.objectReads++;
      a.failures = 0;
      if (got.etag !== a.current?.etag) {
        const { change, ...announcement } = got;
        a.current = announcement;
        if (field === "index") this.#change = change?.etag === got.etag ? change : undefined;
        this.#schedule();
      }
    } catch (err) {
      this.#o.log.warn("mesh announcement poll failed", {
        object: field,
        error: (err as Error).message,
      });
      // An announcement that can no longer be refreshed is withdrawn: members poll directly.
      if (++a.failures >= 3 && a.current) {
        a.current = undefined;
        if (field === "index") this.#change = undefined;
        this.#schedule();
      }
    }
  }

  /** The current snapshot. */
  get snapshot(): ClusterSnapshot {
    return this.#snapshot;
  }

  /** Serves one member stream whose peer certificate names `peer`. */
  accept(stream: CoordinatorStream, peer: string): void {
    if (this.#stopped) {
      endCall(stream, "not the coordinator");
      return;
    }
    let joined = false;
    // A one-shot deadline re-armed by every report, not a periodic pass: no Loop.
    let silence: ReturnType<typeof setTimeout> | undefined;
    const listen = () => {
      clearTimeout(silence);
      const ms = this.#o.silenceMs ?? 15_000;
      silence = setTimeout(() => endCall(stream, `no report for ${ms} ms`), ms);
    };
    listen();
    stream.on("data", (raw: unknown) => {
      listen();
      let report: NodeReport;
      try {
        report = parseNodeReport(raw);
        if (report.nodeId !== peer) {
          throw new Error(`report for ${report.nodeId} on ${peer}'s connection`);
        }
      } catch (err) {
        this.#o.log.warn("mesh report refused", { peer, error: (err as Error).message });
        endCall(stream, (err as Error).message);
        return;
      }
      this.counters.reportsIn++;
      let m = this.#members.get(peer);
      const isNew = !m;
      if (!m) {
        m = { report, hash: electionHash(peer, this.#o.term), streams: new Set() };
        this.#members.set(peer, m);
        if (this.#members.size >= (this.#o.inherit?.nodes ?? 0)) this.#endInheritance();
      }
      clearTimeout(m.drop);
      m.drop = undefined;
      m.streams.add(stream);
      const changed = isNew ||
        (report.seq >= m.report.seq && !sameEndpoints(report.endpoints, m.report.endpoints));
      if (report.seq >= m.report.seq) m.report = report;
      if (!joined) {
        // A joining member gets the current snapshot at once (a reconnect changes nothing else).
        joined = true;
        if (this.#snapshot.version > 0) this.#send(stream);
      }
      if (changed || this.#snapshot.version === 0) this.#schedule();
    });
    const gone = () => {
      clearTimeout(silence);
      const m = this.#members.get(peer);
      if (!m || !m.streams.delete(stream) || m.streams.size || this.#stopped) return;
      // A one-shot grace per member, not a periodic pass: no Loop.
      m.drop = setTimeout(() => {
        this.#members.delete(peer);
        this.#o.log.info("mesh member dropped", { peer });
        this.#schedule();
      }, this.#o.graceMs ?? 10_000);
    };
    stream.on("error", gone);
    stream.on("end", () => {
      gone();
      stream.end();
    });
    stream.on("close", gone);
  }

  /**
   * Ends every stream (the lease was lost or the agent stops) with UNAVAILABLE and `details`
   * (`MESH_HANDOVER` when a successor comes at once).
   */
  stop(details = "coordinator stopped"): void {
    this.#stopped = true;
    clearTimeout(this.#timer);
    clearTimeout(this.#inheritTimer);
    for (const a of this.#announced.values()) void a.loop?.stop(); // timers cleared at once
    for (const m of this.#members.values()) {
      clearTimeout(m.drop);
      for (const s of m.streams) endCall(s, details);
    }
    this.#members.clear();
  }

  /** The earlier term's endpoints leave the snapshots (its members reported, or the grace ended). */
  #endInheritance(): void {
    clearTimeout(this.#inheritTimer);
    if (this.#inherited === undefined) return;
    this.#inherited = undefined;
    if (this.#snapshot.version > 0) this.#schedule();
  }

  #schedule(): void {
    if (this.#timer !== undefined || this.#stopped) return;
    // A one-shot coalescing delay of broadcasts, not a periodic pass: no Loop.
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      this.#broadcast();
    }, this.#o.coalesceMs ?? 20);
  }

  #broadcast(): void {
    const reports = [...this.#members.values()].map((m) => m.report);
    if (this.#inherited) {
      reports.push({ nodeId: "", nodeGroup: "", seq: 0, endpoints: this.#inherited });
    }
    const endpoints = mergeReports(reports);
    const announcements: Partial<Record<AnnouncedObject, IndexAnnouncement>> = {};
    for (const [field, a] of this.#announced) if (a.current) announcements[field] = a.current;
    const same = (field: AnnouncedObject) =>
      announcements[field]?.etag === this.#snapshot[field]?.etag &&
      (announcements[field] === undefined) === (this.#snapshot[field] === undefined);
    const listed = this.#snapshot.successors ?? [];
    const successors = this.#listStale(listed) ? this.#successors() : listed;
    if (
      this.#snapshot.version > 0 && sameEndpoints(endpoints, this.#snapshot.endpoints) &&
      ANNOUNCED_OBJECTS.every(same) && successors.join() === listed.join() &&
      this.#nodesClose(this.#snapshot.nodes)
    ) return;
    // The change travels once, with the first snapshot announcing its index (spec §7.9).
    const change = this.#change?.etag === announcements.index?.etag ? this.#change : undefined;
    this.#change = undefined;
    this.#snapshot = {
      term: this.#o.term,
      version: this.#snapshot.version + 1,
      nodes: this.#members.size,
      endpoints,
      ...announcements,
      ...(change ? { indexChange: change } : {}),
      successors,
    };
    this.#wire = undefined;
    this.counters.broadcasts++;
    if (change) {
      this.counters.changes++;
      this.counters.inlineSpecs += Object.keys(change.specs).length;
    }
    for (const m of this.#members.values()) for (const s of m.streams) this.#send(s);
  }

  /**
   * Whether the listed successors must be made again: one of them left, or the list is short of
   * its count while members are missing from it. A member with a lower hash joining later does
   * not change a good list (every member holds the same list: that is what matters, and a new
   * snapshot for each such join would cost a message per member).
   */
  #listStale(listed: readonly string[]): boolean {
    if (listed.some((id) => !this.#members.has(id))) return true;
    const count = this.#o.successors ?? LISTED_ROUNDS * DEFAULT_CONTENDERS;
    const others = this.#members.size - (this.#members.has(this.#o.nodeId ?? "") ? 1 : 0);
    return listed.length < Math.min(count, others);
  }

  /**
   * Whether a snapshot's `nodes` is still within a factor of two of the members (members size
   * their contention rounds and spread their record reads by it: spec §7.9). A join or a leave
   * that changes nothing else makes a new snapshot only when it is not, so a cluster of N that
   * joins one by one costs about log₂ N extra broadcasts, not N.
   */
  #nodesClose(nodes: number): boolean {
    const members = this.#members.size;
    return members <= 2 * nodes && nodes <= 2 * members;
  }

  /** The members with the lowest election hashes, itself excepted, lowest first. */
  #successors(): string[] {
    const count = this.#o.successors ?? LISTED_ROUNDS * DEFAULT_CONTENDERS;
    const best: { id: string; hash: number }[] = [];
    for (const [id, m] of this.#members) {
      if (id === this.#o.nodeId) continue;
      if (best.length === count && m.hash >= best[count - 1].hash) continue;
      best.push({ id, hash: m.hash });
      best.sort((a, b) => a.hash - b.hash || (a.id < b.id ? -1 : 1));
      if (best.length > count) best.pop();
    }
    return best.map((b) => b.id);
  }

  #send(stream: CoordinatorStream): void {
    try {
      this.#wire ??= new Serialized(this.#snapshot);
      stream.write(this.#wire);
      this.counters.snapshotsOut++;
    } catch (err) {
      this.#o.log.warn("mesh snapshot not sent", { error: (err as Error).message });
    }
  }
}

/**
 * The dataplane: turns Service snapshots into eBPF map contents and tc
 * attachments in the agent's network namespace.
 *
 * Input: a `ServiceSnapshot` (service_snapshot.ts). Effect: the
 * programs of bpf/dataplane.c loaded unpinned while the snapshot has
 * Services, attached to the discovered interfaces, their maps kept equal to
 * the snapshot; nothing of ours anywhere when it has none.
 *
 * Rules:
 * - A snapshot is validated completely (where it is read) before anything is written; an
 *   invalid one changes nothing (the last applied state stays).
 * - Changes are applied as a diff of the last applied state (no flush):
 *   backend slots are written before the count that exposes them, removed
 *   Service ports are unlinked before their slots are freed, and conntrack
 *   entries of removed backends are deleted last.
 * - When a write fails halfway, the next apply first reads the maps back
 *   from the kernel and diffs against what is really there.
 * - A full pass (`converge`) also reads the maps back, re-discovers the
 *   interfaces and re-attaches filters that someone removed or replaced.
 *
 * This module sequences a pass; loading and attaching live in loader.ts, the
 * map writes in map_diff.ts, the map layouts in the per-map modules.
 */

import { parseIpv6Prefix } from "../../core/model/ipv6.ts";
import { type Logger, silentLogger } from "../../core/kit/log.ts";
import type { ServiceSnapshot } from "./service_snapshot.ts";
import type { CtEntry } from "./ct_map.ts";
import {
  compileSnapshot,
  DEFAULT_CAPACITY,
  type DesiredState,
  type MapCapacity,
} from "./desired_state.ts";
import { discoverTargets, type Discovery } from "./interfaces.ts";
import {
  type Attachment,
  type AttachMode,
  DataplaneLoader,
  removeLeftovers,
  type SocketAttachment,
} from "./loader.ts";
import { MapDiff } from "./map_diff.ts";

/** Options of `Dataplane`. */
export interface DataplaneOptions {
  /** The node's delegated Pod prefix (`--ipv6-prefix`); without it only the default-route interface is used. */
  podPrefix?: string;
  log?: Logger;
  /** Map capacities (defaults: `DEFAULT_CAPACITY`). */
  capacity?: Partial<MapCapacity>;
  /** The object to load (default: the embedded bpf/dataplane_object.ts). */
  object?: Uint8Array;
  /** "auto" (default): tcx when libbpf has it, tc otherwise. */
  attach?: "auto" | AttachMode;
  /** Interface discovery (default: the routes of this network namespace). */
  discover?: () => Promise<Discovery>;
  /**
   * Attach the socket programs to the root cgroup v2 while loaded (default true): connections
   * host processes of this network namespace open to VIPs are translated at connect/sendmsg.
   */
  hostSockets?: boolean;
  /** Where a cgroup2 is mounted (briefly) when none is (default /run/podmin). */
  cgroupMountDir?: string;
}

/** What one apply changed. */
export interface ApplyResult {
  /** Programs are loaded after the apply. */
  loaded: boolean;
  /** Programs were loaded (true) or unloaded (false) by this apply; undefined: neither. */
  loadedNow?: boolean;
  svcWrites: number;
  svcDeletes: number;
  backendWrites: number;
  backendDeletes: number;
  conntrackDeleted: number;
  /** Conntrack entries taken over from a previous agent's programs (on load). */
  conntrackAdopted?: number;
  attached: string[];
  detached: string[];
  /** Interfaces that could not be attached this time (retried next pass). */
  attachErrors: string[];
  ms: number;
}

/** An apply that changed nothing (not loaded, nothing written or attached). */
export function noChanges(): ApplyResult {
  return {
    loaded: false,
    svcWrites: 0,
    svcDeletes: 0,
    backendWrites: 0,
    backendDeletes: 0,
    conntrackDeleted: 0,
    attached: [],
    detached: [],
    attachErrors: [],
    ms: 0,
  };
}

/** The dataplane's own view of itself (for logs and `status()`). */
export interface DataplaneLocalStatus {
  loaded: boolean;
  mode?: AttachMode;
  programs: { name: string; id: number }[];
  attachments: Omit<Attachment, "links" | "createdHook">[];
  /** The socket programs' root cgroup v2 attachment (host processes to VIPs). */
  sockets?: SocketAttachment;
  servicePorts: number;
  backendSlots: number;
  generation?: number;
}

/** One node's dataplane. Methods are serialized; call `close()` to detach and unload. */
export class Dataplane {
  readonly #options: DataplaneOptions;
  readonly #log: Logger;
  readonly #capacity: MapCapacity;
  readonly #loader: DataplaneLoader;
  readonly #diff: MapDiff;
  #leftoversChecked = false;
  #generation?: number;
  #queue: Promise<unknown> = Promise.resolve();

  constructor(options: DataplaneOptions = {}) {
    this.#options = options;
    this.#log = options.log ?? silentLogger;
    this.#capacity = { ...DEFAULT_CAPACITY, ...options.capacity };
    if (options.podPrefix !== undefined) parseIpv6Prefix(options.podPrefix);
    this.#loader = new DataplaneLoader({
      capacity: this.#capacity,
      object: options.object,
      attach: options.attach,
      hostSockets: options.hostSockets,
      cgroupMountDir: options.cgroupMountDir,
      log: this.#log,
    });
    this.#diff = new MapDiff(this.#log);
  }

  #serial<T>(fn: () => Promise<T>): Promise<T> {
    const run = this.#queue.then(fn, fn);
    this.#queue = run.catch(() => {});
    return run;
  }

  /** True while programs are loaded. */
  get loaded(): boolean {
    return this.#loader.loaded;
  }

  /**
   * Applies a snapshot (validated by whoever read it from untrusted input: `parseServiceSnapshot`;
   * a snapshot that does not fit the maps throws before anything is changed). With `full`, also
   * reads the maps back, re-discovers interfaces and re-checks every filter.
   */
  async apply(snapshot: ServiceSnapshot, options: { full?: boolean } = {}): Promise<ApplyResult> {
    const desired = compileSnapshot(snapshot, this.#capacity);
    return await this.#serial(async () => {
      const r = await this.#apply(desired, options.full ?? false);
      this.#generation = snapshot.generation;
      return r;
    });
  }

  /** Detaches everything and unloads the programs. */
  close(): Promise<void> {
    return this.#serial(async () => {
      await this.#unload();
    });
  }

  /** Program fds (for `bpf_prog_test_run` benchmarks); undefined when not loaded. */
  programFds(): { ingress: number; egress: number } | undefined {
    return this.#loader.programFds();
  }

  /** The conntrack entries (decoded); empty when not loaded. */
  conntrack(): CtEntry[] {
    return this.#loader.loaded ? this.#loader.maps.ct.flows() : [];
  }

  /** The dataplane's own state. */
  status(): DataplaneLocalStatus {
    return {
      loaded: this.loaded,
      mode: this.#loader.mode,
      programs: this.#loader.programs(),
      attachments: this.#loader.attachments().map((a) => ({
        ifindex: a.ifindex,
        name: a.name,
        roles: a.roles,
        mode: a.mode,
        ingress: a.ingress,
        egress: a.egress,
      })),
      sockets: this.#loader.sockets(),
      ...this.#diff.summary(),
      generation: this.#generation,
    };
  }

  async #apply(desired: DesiredState, full: boolean): Promise<ApplyResult> {
    const t0 = performance.now();
    const result = noChanges();
    if (desired.ports.size === 0) {
      if (this.#loader.loaded) {
        result.detached = await this.#unload();
        result.loadedNow = false;
      }
      if (full || !this.#leftoversChecked) {
        result.detached.push(...await removeLeftovers(this.#log));
        this.#leftoversChecked = true;
      }
      result.ms = performance.now() - t0;
      return result;
    }
    const discovery = await this.#discover();
    let adopted = 0;
    if (!this.#loader.loaded) {
      this.#loader.load();
      this.#diff.reset();
      result.loadedNow = true;
      adopted = this.#loader.adoptConntrack(discovery.targets);
      result.conntrackAdopted = adopted;
    }
    Object.assign(
      result,
      this.#diff.write({ maps: this.#loader.maps, desired, full, purgeAll: adopted > 0 }),
    );
    await this.#loader.syncAttachments({ discovery, changes: result, verify: full });
    this.#leftoversChecked = true;
    result.loaded = true;
    result.ms = performance.now() - t0;
    return result;
  }

  async #unload(): Promise<string[]> {
    const detached = await this.#loader.unload();
    this.#diff.reset();
    return detached;
  }

  #discover(): Promise<Discovery> {
    if (this.#options.discover) return this.#options.discover();
    return discoverTargets(
      this.#options.podPrefix ? parseIpv6Prefix(this.#options.podPrefix) : undefined,
    );
  }
}

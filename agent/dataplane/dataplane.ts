/**
 * The dataplane: turns Service snapshots into eBPF map contents and tc
 * attachments in the agent's network namespace.
 *
 * Input: a `ServiceSnapshot` (core/service_snapshot.ts). Effect: the
 * programs of bpf/dataplane.c loaded unpinned while the snapshot has
 * Services, attached to the discovered interfaces, their maps kept equal to
 * the snapshot; nothing of ours anywhere when it has none.
 *
 * Rules:
 * - A snapshot is validated completely before anything is written; an
 *   invalid one changes nothing (the last applied state stays).
 * - Changes are applied as a diff of the last applied state (no flush):
 *   backend slots are written before the count that exposes them, removed
 *   Service ports are unlinked before their slots are freed, and conntrack
 *   entries of removed backends are deleted last.
 * - When a write fails halfway, the next apply first reads the maps back
 *   from the kernel and diffs against what is really there.
 * - A full pass (`converge`) also reads the maps back, re-discovers the
 *   interfaces and re-attaches filters that someone removed or replaced.
 */

import { dataplaneObject } from "../../bpf/dataplane_object.ts";
import { PodminError } from "../../core/errors.ts";
import { parseIpv6Prefix } from "../../core/ipv6.ts";
import { type Logger, silentLogger } from "../../core/log.ts";
import { parseServiceSnapshot } from "../../core/service_snapshot.ts";
import { openMapById, programIdOfFd, programInfo } from "../../ffi/bpf_info.ts";
import type { BpfMap } from "../../ffi/bpf_map.ts";
import {
  BPF_TCX_EGRESS,
  BPF_TCX_INGRESS,
  BpfObject,
  type BpfProgram,
} from "../../ffi/bpf_object.ts";
import { BpfError } from "../../ffi/libbpf.ts";
import {
  tcAttach,
  type TcAttachPoint,
  tcDetach,
  tcHookCreate,
  tcHookDestroy,
  tcQuery,
  tcxAttach,
  tcxAvailable,
  tcxDetach,
} from "../../ffi/tc.ts";
import {
  type AttachTarget,
  discoverTargets,
  type Discovery,
  type InterfaceRole,
  listLinks,
} from "./interfaces.ts";
import {
  type Backend,
  compileSnapshot,
  type CtEntry,
  decodeBeKey,
  decodeBeVal,
  decodeCfg,
  decodeCt,
  decodeSvcKey,
  decodeSvcVal,
  DEFAULT_CAPACITY,
  type DesiredState,
  DIR,
  encodeBeKey,
  encodeBeVal,
  encodeCfg,
  encodeSvcKey,
  encodeSvcVal,
  LAYOUT_VERSION,
  type MapCapacity,
  MAPS,
  PROGRAMS,
  SIZES,
  type SvcKey,
  svcKeyId,
} from "./maps.ts";

/** tc filter handle of our filters ("PM"). */
export const TC_HANDLE = 0x504d;
/** tc filter priority of our filters. */
export const TC_PRIORITY = 1;

/** How programs are attached. */
export type AttachMode = "tc" | "tcx";

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

/** An interface we attached to. */
export interface Attachment {
  ifindex: number;
  name: string;
  roles: InterfaceRole[];
  mode: AttachMode;
  /** Program ids attached at ingress and egress. */
  ingress?: number;
  egress?: number;
  /** We created the clsact qdisc (tc mode). */
  createdHook: boolean;
  links?: { ingress: Deno.PointerObject; egress: Deno.PointerObject };
}

/** The dataplane's own view of itself (for logs and `status()`). */
export interface DataplaneLocalStatus {
  loaded: boolean;
  mode?: AttachMode;
  programs: { name: string; id: number }[];
  attachments: Omit<Attachment, "links" | "createdHook">[];
  servicePorts: number;
  backendSlots: number;
  generation?: number;
}

interface AppliedPort {
  key: SvcKey;
  id: number;
  /** Slot contents; undefined = slot missing in the kernel (read back). */
  backends: (Backend | undefined)[];
}

interface Loaded {
  obj: BpfObject;
  mode: AttachMode;
  maps: { cfg: BpfMap; svc: BpfMap; be: BpfMap; ct: BpfMap; stats: BpfMap };
  progs: { ingress: BpfProgram; egress: BpfProgram };
  progIds: { ingress: number; egress: number };
}

/** Allocates backend-slot namespaces (podmin_svc value `id`). */
class IdAllocator {
  #next = 1;
  #free: number[] = [];

  alloc(): number {
    return this.#free.pop() ?? this.#next++;
  }

  release(ids: number[]): void {
    this.#free.push(...ids);
  }

  reset(used: Iterable<number> = []): void {
    const set = new Set(used);
    let max = 0;
    for (const id of set) if (id > max) max = id;
    this.#next = max + 1;
    this.#free = [];
    for (let i = this.#next - 1; i >= 1; i--) if (!set.has(i)) this.#free.push(i);
  }
}

function concat(parts: Uint8Array[], size: number): Uint8Array {
  const out = new Uint8Array(parts.length * size);
  parts.forEach((p, i) => out.set(p, i * size));
  return out;
}

function sameBackend(a: Backend | undefined, b: Backend): boolean {
  return a !== undefined && a.addr === b.addr && a.port === b.port;
}

const beId = (addr: bigint, port: number) => `${addr}|${port}`;

/** One node's dataplane. Methods are serialized; call `close()` to detach and unload. */
export class Dataplane {
  readonly #o: DataplaneOptions;
  readonly #log: Logger;
  readonly #capacity: MapCapacity;
  #l?: Loaded;
  #applied = new Map<string, AppliedPort>();
  #cfg?: string;
  readonly #ids = new IdAllocator();
  #dirty = false;
  readonly #attached = new Map<number, Attachment>();
  #leftoversChecked = false;
  #generation?: number;
  #queue: Promise<unknown> = Promise.resolve();

  constructor(options: DataplaneOptions = {}) {
    this.#o = options;
    this.#log = options.log ?? silentLogger;
    this.#capacity = { ...DEFAULT_CAPACITY, ...options.capacity };
    if (options.podPrefix !== undefined) parseIpv6Prefix(options.podPrefix);
  }

  #serial<T>(fn: () => Promise<T>): Promise<T> {
    const run = this.#queue.then(fn, fn);
    this.#queue = run.catch(() => {});
    return run;
  }

  /** True while programs are loaded. */
  get loaded(): boolean {
    return this.#l !== undefined;
  }

  /**
   * Applies a snapshot (validated first: a `ValidationError` means nothing
   * was changed). With `full`, also reads the maps back, re-discovers
   * interfaces and re-checks every filter.
   */
  async apply(snapshot: unknown, options: { full?: boolean } = {}): Promise<ApplyResult> {
    const parsed = parseServiceSnapshot(snapshot);
    const desired = compileSnapshot(parsed, this.#capacity);
    return await this.#serial(async () => {
      const r = await this.#apply(desired, options.full ?? false);
      this.#generation = parsed.generation;
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
    if (!this.#l) return undefined;
    return { ingress: this.#l.progs.ingress.fd, egress: this.#l.progs.egress.fd };
  }

  /** The conntrack entries (decoded); empty when not loaded. */
  conntrack(): CtEntry[] {
    if (!this.#l) return [];
    return this.#l.maps.ct.entries().map(([k, v]) => decodeCt(k, v));
  }

  /** The dataplane's own state. */
  status(): DataplaneLocalStatus {
    let slots = 0;
    for (const p of this.#applied.values()) slots += p.backends.length;
    return {
      loaded: this.loaded,
      mode: this.#l?.mode,
      programs: this.#l
        ? [
          { name: PROGRAMS.ingress, id: this.#l.progIds.ingress },
          { name: PROGRAMS.egress, id: this.#l.progIds.egress },
        ]
        : [],
      attachments: [...this.#attached.values()].map((a) => ({
        ifindex: a.ifindex,
        name: a.name,
        roles: a.roles,
        mode: a.mode,
        ingress: a.ingress,
        egress: a.egress,
      })),
      servicePorts: this.#applied.size,
      backendSlots: slots,
      generation: this.#generation,
    };
  }

  async #apply(desired: DesiredState, full: boolean): Promise<ApplyResult> {
    const t0 = performance.now();
    const result: ApplyResult = {
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
    if (desired.ports.size === 0) {
      if (this.#l) {
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
    if (!this.#l) {
      this.#load();
      result.loadedNow = true;
      adopted = this.#adoptConntrack(discovery.targets);
      result.conntrackAdopted = adopted;
    }
    if (this.#dirty || full) this.#readBack();
    try {
      this.#writeMaps(desired, result, full || adopted > 0);
    } catch (err) {
      this.#dirty = true;
      throw err;
    }
    await this.#syncAttachments(discovery, result, full);
    this.#leftoversChecked = true;
    result.loaded = true;
    result.ms = performance.now() - t0;
    return result;
  }

  #load(): void {
    const obj = BpfObject.openMem(this.#o.object ?? dataplaneObject(), { name: "podmin_dp" });
    try {
      obj.setMaxEntries(MAPS.svc, this.#capacity.services);
      obj.setMaxEntries(MAPS.be, this.#capacity.backends);
      obj.setMaxEntries(MAPS.ct, this.#capacity.conntrack);
      const want = this.#o.attach ?? "auto";
      const mode: AttachMode = want === "auto" ? (tcxAvailable() ? "tcx" : "tc") : want;
      if (mode === "tcx") {
        obj.setExpectedAttachType(PROGRAMS.ingress, BPF_TCX_INGRESS);
        obj.setExpectedAttachType(PROGRAMS.egress, BPF_TCX_EGRESS);
      }
      obj.load();
      const maps = {
        cfg: obj.map(MAPS.cfg),
        svc: obj.map(MAPS.svc),
        be: obj.map(MAPS.be),
        ct: obj.map(MAPS.ct),
        stats: obj.map(MAPS.stats),
      };
      for (const [k, m] of Object.entries(maps)) {
        const want = SIZES[k as keyof typeof SIZES];
        if (m.keySize !== want.key || m.valueSize !== want.value) {
          throw new PodminError(
            `dataplane object: map ${m.name} is ${m.keySize}/${m.valueSize} bytes, the agent expects ${want.key}/${want.value}`,
            { hint: "rebuild the object with bpf/build.sh" },
          );
        }
      }
      const progs = {
        ingress: obj.program(PROGRAMS.ingress),
        egress: obj.program(PROGRAMS.egress),
      };
      const ids = {
        ingress: programIdOfFd(progs.ingress.fd),
        egress: programIdOfFd(progs.egress.fd),
      };
      this.#l = { obj, mode, maps, progs, progIds: ids };
    } catch (err) {
      obj.close();
      throw err;
    }
    this.#applied.clear();
    this.#cfg = undefined;
    this.#ids.reset();
    this.#dirty = false;
    this.#log.info("dataplane programs loaded", { mode: this.#l.mode, programs: this.#l.progIds });
  }

  async #unload(): Promise<string[]> {
    const detached: string[] = [];
    for (const a of [...this.#attached.values()]) {
      try {
        await this.#detach(a);
        detached.push(a.name);
      } catch (err) {
        this.#log.warn("dataplane detach failed", { interface: a.name, error: String(err) });
      }
    }
    this.#attached.clear();
    if (this.#l) {
      this.#l.obj.close();
      this.#l = undefined;
      this.#log.info("dataplane programs unloaded", { detached });
    }
    this.#applied.clear();
    this.#cfg = undefined;
    return detached;
  }

  /** Rebuilds the applied mirror from the kernel maps; deletes orphaned slots. */
  #readBack(): void {
    const { svc, be, cfg } = this.#l!.maps;
    const slots = new Map<number, Map<number, Backend>>();
    for (const [k, v] of be.entries()) {
      const { id, slot } = decodeBeKey(k);
      if (!slots.has(id)) slots.set(id, new Map());
      slots.get(id)!.set(slot, decodeBeVal(v));
    }
    const applied = new Map<string, AppliedPort>();
    const used = new Set<number>();
    for (const [k, v] of svc.entries()) {
      const key = decodeSvcKey(k);
      const { id, count } = decodeSvcVal(v);
      used.add(id);
      const s = slots.get(id);
      applied.set(svcKeyId(key), {
        key,
        id,
        backends: Array.from({ length: count }, (_, i) => s?.get(i)),
      });
    }
    const countOf = new Map<number, number>();
    for (const p of applied.values()) countOf.set(p.id, p.backends.length);
    const orphans: Uint8Array[] = [];
    for (const [id, s] of slots) {
      const count = countOf.get(id);
      for (const slot of s.keys()) {
        if (count === undefined || slot >= count) orphans.push(encodeBeKey({ id, slot }));
      }
    }
    if (orphans.length) be.deleteMany(concat(orphans, SIZES.be.key));
    const c = cfg.lookup(new Uint8Array(4));
    this.#cfg = c ? hexOf(c) : undefined;
    this.#applied = applied;
    this.#ids.reset(used);
    this.#dirty = false;
  }

  #writeMaps(desired: DesiredState, result: ApplyResult, full: boolean): void {
    const { svc, be, cfg } = this.#l!.maps;
    const svcDel: Uint8Array[] = [];
    const svcUpdK: Uint8Array[] = [];
    const svcUpdV: Uint8Array[] = [];
    const beUpdK: Uint8Array[] = [];
    const beUpdV: Uint8Array[] = [];
    const beDel: Uint8Array[] = [];
    const freed: number[] = [];
    const next = new Map<string, AppliedPort>();
    let removals = false;

    for (const [kid, cur] of this.#applied) {
      if (desired.ports.has(kid)) continue;
      svcDel.push(encodeSvcKey(cur.key));
      for (let i = 0; i < cur.backends.length; i++) {
        beDel.push(encodeBeKey({ id: cur.id, slot: i }));
      }
      freed.push(cur.id);
      removals = true;
    }
    for (const [kid, want] of desired.ports) {
      const cur = this.#applied.get(kid);
      const id = cur?.id ?? this.#ids.alloc();
      const have = cur?.backends ?? [];
      want.backends.forEach((b, i) => {
        if (!sameBackend(have[i], b)) {
          beUpdK.push(encodeBeKey({ id, slot: i }));
          beUpdV.push(encodeBeVal(b));
        }
      });
      if (!cur || have.length !== want.backends.length) {
        svcUpdK.push(encodeSvcKey(want.key));
        svcUpdV.push(encodeSvcVal({ id, count: want.backends.length }));
      }
      for (let i = want.backends.length; i < have.length; i++) {
        beDel.push(encodeBeKey({ id, slot: i }));
      }
      if (cur) {
        const keep = new Set(want.backends.map((b) => beId(b.addr, b.port)));
        if (have.some((b) => b && !keep.has(beId(b.addr, b.port)))) removals = true;
      }
      next.set(kid, { key: want.key, id, backends: [...want.backends] });
    }

    // 1. Unlink removed Service ports: no new flow can pick their slots.
    if (svcDel.length) svc.deleteMany(concat(svcDel, SIZES.svc.key));
    // 2. Slots before the counts that expose them.
    if (beUpdK.length) {
      be.updateMany(concat(beUpdK, SIZES.be.key), concat(beUpdV, SIZES.be.value));
    }
    // 3. New Service ports and changed counts.
    if (svcUpdK.length) {
      svc.updateMany(concat(svcUpdK, SIZES.svc.key), concat(svcUpdV, SIZES.svc.value));
    }
    // 4. Slots no count exposes any more.
    if (beDel.length) be.deleteMany(concat(beDel, SIZES.be.key));
    // 5. Configuration.
    const cfgBytes = encodeCfg(desired.serviceCIDR);
    if (this.#cfg !== hexOf(cfgBytes)) {
      cfg.update(new Uint8Array(4), cfgBytes);
      this.#cfg = hexOf(cfgBytes);
    }
    this.#applied = next;
    this.#ids.release(freed);
    result.svcDeletes = svcDel.length;
    result.svcWrites = svcUpdK.length;
    result.backendWrites = beUpdK.length;
    result.backendDeletes = beDel.length;
    // 6. Conntrack entries of flows whose backend or Service port is gone.
    if (removals || full) result.conntrackDeleted = this.#purgeConntrack(desired);
    if (svcDel.length + svcUpdK.length + beUpdK.length + beDel.length) {
      this.#log.info("dataplane maps updated", {
        servicePorts: next.size,
        svcWrites: result.svcWrites,
        svcDeletes: result.svcDeletes,
        backendWrites: result.backendWrites,
        backendDeletes: result.backendDeletes,
        conntrackDeleted: result.conntrackDeleted,
      });
    }
  }

  /** Deletes conntrack entries not consistent with the desired state. */
  #purgeConntrack(desired: DesiredState): number {
    const { ct } = this.#l!.maps;
    const live = new Map<string, Set<string>>();
    for (const [kid, p] of desired.ports) {
      live.set(kid, new Set(p.backends.map((b) => beId(b.addr, b.port))));
    }
    const stale: Uint8Array[] = [];
    for (const [k, v] of ct.entries()) {
      const e = decodeCt(k, v);
      let kid: string, backend: string;
      if (e.value.dir === DIR.forward) {
        kid = svcKeyId({ vip: e.key.daddr, port: e.key.dport, proto: e.key.proto });
        backend = beId(e.value.daddr, e.value.dport);
      } else if (e.value.dir === DIR.reply) {
        kid = svcKeyId({ vip: e.value.saddr, port: e.value.sport, proto: e.key.proto });
        backend = beId(e.key.saddr, e.key.sport);
      } else {
        stale.push(k);
        continue;
      }
      if (!live.get(kid)?.has(backend)) stale.push(k);
    }
    return stale.length ? ct.deleteMany(concat(stale, SIZES.ct.key)) : 0;
  }

  #discover(): Promise<Discovery> {
    if (this.#o.discover) return this.#o.discover();
    return discoverTargets(this.#o.podPrefix ? parseIpv6Prefix(this.#o.podPrefix) : undefined);
  }

  /**
   * Copies the conntrack entries of a previous agent's programs still
   * attached to our interfaces (an agent restart: tc filters outlive the
   * process) into the freshly loaded map, so open flows keep their backend
   * and their reply translation when the new programs replace the old ones.
   * Only from a map with the same layout version. Returns entries copied.
   */
  #adoptConntrack(targets: AttachTarget[]): number {
    const l = this.#l!;
    for (const t of targets) {
      const progId = tcQuery({
        ifindex: t.ifindex,
        point: "ingress",
        handle: TC_HANDLE,
        priority: TC_PRIORITY,
      });
      if (progId === undefined || progId === l.progIds.ingress) continue;
      const info = programInfo(progId);
      if (info?.name !== PROGRAMS.ingress) continue;
      const opened = info.mapIds.map((id) => openMapById(id)).filter((m) => m !== undefined);
      try {
        const cfg = opened.find((m) => m.info.name === MAPS.cfg)?.map.lookup(new Uint8Array(4));
        const ct = opened.find((m) => m.info.name === MAPS.ct);
        if (!cfg || decodeCfg(cfg).version !== LAYOUT_VERSION || !ct) continue;
        if (ct.info.keySize !== SIZES.ct.key || ct.info.valueSize !== SIZES.ct.value) continue;
        const entries = ct.map.entries();
        if (entries.length) {
          l.maps.ct.updateMany(
            concat(entries.map(([k]) => k), SIZES.ct.key),
            concat(entries.map(([, v]) => v), SIZES.ct.value),
          );
        }
        this.#log.info("dataplane conntrack adopted from the previous programs", {
          program: progId,
          entries: entries.length,
        });
        return entries.length;
      } catch (err) {
        this.#log.warn("dataplane conntrack adoption failed", { error: String(err) });
        return 0;
      } finally {
        for (const m of opened) m.map.close();
      }
    }
    return 0;
  }

  async #syncAttachments(
    discovery: Discovery,
    result: ApplyResult,
    verify: boolean,
  ): Promise<void> {
    const wanted = new Map<number, AttachTarget>();
    for (const t of discovery.targets) wanted.set(t.ifindex, t);

    for (const a of [...this.#attached.values()]) {
      const t = wanted.get(a.ifindex);
      if (t && t.name === a.name) continue;
      try {
        await this.#detach(a);
      } catch (err) {
        this.#log.warn("dataplane detach failed", { interface: a.name, error: String(err) });
      }
      this.#attached.delete(a.ifindex);
      result.detached.push(a.name);
    }
    for (const t of wanted.values()) {
      const a = this.#attached.get(t.ifindex);
      if (a) {
        a.roles = t.roles;
        if (verify && a.mode === "tc" && !this.#filtersIntact(a)) {
          this.#log.warn("dataplane filter missing or replaced, re-attaching", {
            interface: a.name,
          });
          this.#attached.delete(a.ifindex);
        } else continue;
      }
      try {
        this.#attached.set(t.ifindex, this.#attach(t));
        result.attached.push(t.name);
      } catch (err) {
        // ENODEV: the interface went away since discovery; the next pass settles it.
        const reason = err instanceof BpfError ? err.errno : String(err);
        result.attachErrors.push(`${t.name}: ${reason}`);
        this.#log.warn("dataplane attach failed", { interface: t.name, error: String(err) });
      }
    }
    if (verify) {
      // Filters of earlier programs on interfaces we no longer use.
      const keep = new Set(this.#attached.keys());
      result.detached.push(...await removeLeftovers(this.#log, keep));
    }
    if (result.attached.length || result.detached.length) {
      this.#log.info("dataplane attachments changed", {
        attached: result.attached,
        detached: result.detached,
      });
    }
  }

  #filtersIntact(a: Attachment): boolean {
    const l = this.#l!;
    const q = (point: TcAttachPoint) =>
      tcQuery({ ifindex: a.ifindex, point, handle: TC_HANDLE, priority: TC_PRIORITY });
    return q("ingress") === l.progIds.ingress && q("egress") === l.progIds.egress;
  }

  #attach(t: AttachTarget): Attachment {
    const l = this.#l!;
    if (l.mode === "tcx") {
      try {
        const ingress = tcxAttach(l.progs.ingress.handle, t.ifindex);
        let egress: Deno.PointerObject;
        try {
          egress = tcxAttach(l.progs.egress.handle, t.ifindex);
        } catch (err) {
          tcxDetach(ingress);
          throw err;
        }
        return {
          ...t,
          mode: "tcx",
          ingress: l.progIds.ingress,
          egress: l.progIds.egress,
          createdHook: false,
          links: { ingress, egress },
        };
      } catch (err) {
        // A kernel without tcx: cls_bpf does not care about the expected attach type.
        if (
          !(err instanceof BpfError) || !["EINVAL", "EOPNOTSUPP", "ENOTSUPP"].includes(err.errno)
        ) {
          throw err;
        }
        this.#log.info("tcx attach refused, using tc", { interface: t.name, errno: err.errno });
      }
    }
    const createdHook = tcHookCreate(t.ifindex);
    const id = { ifindex: t.ifindex, handle: TC_HANDLE, priority: TC_PRIORITY };
    const ingress = tcAttach({
      ...id,
      point: "ingress",
      progFd: l.progs.ingress.fd,
      replace: true,
    });
    const egress = tcAttach({ ...id, point: "egress", progFd: l.progs.egress.fd, replace: true });
    return { ...t, mode: "tc", ingress, egress, createdHook };
  }

  async #detach(a: Attachment): Promise<void> {
    if (a.mode === "tcx" && a.links) {
      tcxDetach(a.links.ingress);
      tcxDetach(a.links.egress);
      return;
    }
    const id = { ifindex: a.ifindex, handle: TC_HANDLE, priority: TC_PRIORITY };
    tcDetach({ ...id, point: "ingress" });
    tcDetach({ ...id, point: "egress" });
    await destroyHookIfEmpty(a.ifindex, a.name);
  }
}

function hexOf(b: Uint8Array): string {
  return [...b].map((x) => x.toString(16).padStart(2, "0")).join("");
}

/** Deletes the clsact qdisc of an interface when no filter is left on it. */
async function destroyHookIfEmpty(ifindex: number, name: string): Promise<void> {
  const show = async (point: string) => {
    const out = await new Deno.Command("tc", {
      args: ["-j", "filter", "show", "dev", name, point],
      stdout: "piped",
      stderr: "null",
    }).output();
    if (!out.success) return undefined;
    const text = new TextDecoder().decode(out.stdout).trim();
    return text === "" ? [] : JSON.parse(text) as unknown[];
  };
  const [ing, egr] = await Promise.all([show("ingress"), show("egress")]);
  if (ing && egr && ing.length === 0 && egr.length === 0) tcHookDestroy(ifindex);
}

/**
 * Detaches our filters (handle/priority and program name) from every
 * interface of this namespace except `keep` (ifindexes): leftovers of an
 * agent that stopped without unloading (tc filters keep programs alive).
 * Returns the interfaces cleaned.
 */
export async function removeLeftovers(
  log: Logger = silentLogger,
  keep: Set<number> = new Set(),
): Promise<string[]> {
  const ours = new Set<string>(Object.values(PROGRAMS));
  const cleaned: string[] = [];
  for (const link of await listLinks()) {
    if (keep.has(link.ifindex)) continue;
    let found = false;
    for (const point of ["ingress", "egress"] as const) {
      const id = { ifindex: link.ifindex, point, handle: TC_HANDLE, priority: TC_PRIORITY };
      const progId = tcQuery(id);
      if (progId === undefined) continue;
      const info = programInfo(progId);
      if (info && ours.has(info.name)) {
        tcDetach(id);
        found = true;
      }
    }
    if (found) {
      await destroyHookIfEmpty(link.ifindex, link.ifname);
      cleaned.push(link.ifname);
    }
  }
  if (cleaned.length) log.info("dataplane leftovers removed", { interfaces: cleaned });
  return cleaned;
}

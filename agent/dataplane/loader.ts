/**
 * The dataplane loader: loads the programs of bpf/dataplane.c unpinned (map capacities set, map
 * layouts checked), attaches the tc programs to interfaces (tcx when available, tc otherwise)
 * and detaches them, attaches the socket programs to the root cgroup v2 through bpf links for as
 * long as the object is loaded (host processes' connections to VIPs), adopts a previous agent's
 * conntrack on load, and removes leftover filters of earlier programs. It never writes the
 * Service maps' contents: that is the map diff's job.
 */

import { dataplaneObject } from "../../bpf/dataplane_object.ts";
import { PodminError } from "../../core/kit/errors.ts";
import { type Logger, silentLogger } from "../../core/kit/log.ts";
import { openMapById, programIdOfFd, programInfo } from "../../ffi/bpf_info.ts";
import {
  cgroupAttach,
  cgroupDetach,
  closeCgroup,
  netnsCookie,
  openCgroup2Root,
} from "../../ffi/cgroup.ts";
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
import { CfgMap, LAYOUT_VERSION } from "./cfg_map.ts";
import type { MapCapacity } from "./desired_state.ts";
import { type AttachTarget, type Discovery, type InterfaceRole, listLinks } from "./interfaces.ts";
import { type DataplaneMaps, MAPS, PROGRAMS, SIZES, SOCK_PROGRAMS, typedMaps } from "./maps.ts";

/** tc filter handle of our filters ("PM"). */
export const TC_HANDLE = 0x504d;
/** tc filter priority of our filters. */
export const TC_PRIORITY = 1;

/** How programs are attached. */
export type AttachMode = "tc" | "tcx";

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

/** Where `syncAttachments` reports what it changed (an `ApplyResult` fits). */
export interface AttachChanges {
  attached: string[];
  detached: string[];
  /** Interfaces that could not be attached this time (retried next pass). */
  attachErrors: string[];
}

/** Options of `DataplaneLoader`. */
export interface LoaderOptions {
  capacity: MapCapacity;
  /** The object to load (default: the embedded bpf/dataplane_object.ts). */
  object?: Uint8Array;
  /** "auto" (default): tcx when libbpf has it, tc otherwise. */
  attach?: "auto" | AttachMode;
  /**
   * Attach the socket programs to the root cgroup v2 (default true): host processes of this
   * network namespace reach Service VIPs.
   */
  hostSockets?: boolean;
  /** Where a cgroup2 is mounted (briefly) when none is (default /run/podmin). */
  cgroupMountDir?: string;
  log?: Logger;
}

/** The socket programs' attachment to the root cgroup v2. */
export interface SocketAttachment {
  attached: boolean;
  /** The cgroup2 mount used; "mounted": one mounted for the attach and detached again. */
  cgroup?: string;
  how?: "found" | "mounted";
  /** Program name → id, while attached. */
  programs: Record<string, number>;
  /** Why they are not attached (the packet path still serves Pods). */
  error?: string;
}

interface Loaded {
  obj: BpfObject;
  mode: AttachMode;
  maps: DataplaneMaps;
  progs: { ingress: BpfProgram; egress: BpfProgram };
  progIds: { ingress: number; egress: number };
  sockets: SocketAttachment;
  sockLinks: Deno.PointerObject[];
}

/** Owns the loaded programs and their attachments. */
export class DataplaneLoader {
  readonly #options: LoaderOptions;
  readonly #log: Logger;
  #loaded?: Loaded;
  readonly #attached = new Map<number, Attachment>();

  constructor(options: LoaderOptions) {
    this.#options = options;
    this.#log = options.log ?? silentLogger;
  }

  /** True while programs are loaded. */
  get loaded(): boolean {
    return this.#loaded !== undefined;
  }

  /** The typed maps of the loaded object. Throws when nothing is loaded. */
  get maps(): DataplaneMaps {
    if (!this.#loaded) throw new PodminError("dataplane: programs are not loaded");
    return this.#loaded.maps;
  }

  /** How programs are attached (undefined when not loaded). */
  get mode(): AttachMode | undefined {
    return this.#loaded?.mode;
  }

  /** Program names and ids (empty when not loaded). */
  programs(): { name: string; id: number }[] {
    const l = this.#loaded;
    if (!l) return [];
    return [
      { name: PROGRAMS.ingress, id: l.progIds.ingress },
      { name: PROGRAMS.egress, id: l.progIds.egress },
    ];
  }

  /** Program fds (for `bpf_prog_test_run` benchmarks); undefined when not loaded. */
  programFds(): { ingress: number; egress: number } | undefined {
    const l = this.#loaded;
    return l && { ingress: l.progs.ingress.fd, egress: l.progs.egress.fd };
  }

  /** The socket programs' cgroup attachment (undefined when not loaded). */
  sockets(): SocketAttachment | undefined {
    const s = this.#loaded?.sockets;
    return s && { ...s, programs: { ...s.programs } };
  }

  /** The interfaces we are attached to. */
  attachments(): Attachment[] {
    return [...this.#attached.values()];
  }

  /** Loads the object: capacities set, attach type chosen, map layouts checked. */
  load(): void {
    const capacity = this.#options.capacity;
    const obj = BpfObject.openMem(this.#options.object ?? dataplaneObject(), {
      name: "podmin_dp",
    });
    try {
      obj.setMaxEntries(MAPS.svc, capacity.services);
      obj.setMaxEntries(MAPS.be, capacity.backends);
      obj.setMaxEntries(MAPS.ct, capacity.conntrack);
      const want = this.#options.attach ?? "auto";
      const mode: AttachMode = want === "auto" ? (tcxAvailable() ? "tcx" : "tc") : want;
      if (mode === "tcx") {
        obj.setExpectedAttachType(PROGRAMS.ingress, BPF_TCX_INGRESS);
        obj.setExpectedAttachType(PROGRAMS.egress, BPF_TCX_EGRESS);
      }
      obj.load();
      const raw = {
        cfg: obj.map(MAPS.cfg),
        svc: obj.map(MAPS.svc),
        be: obj.map(MAPS.be),
        ct: obj.map(MAPS.ct),
        stats: obj.map(MAPS.stats),
        sockCfg: obj.map(MAPS.sockCfg),
        sock: obj.map(MAPS.sock),
      };
      for (const [k, m] of Object.entries(raw)) {
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
      const progIds = {
        ingress: programIdOfFd(progs.ingress.fd),
        egress: programIdOfFd(progs.egress.fd),
      };
      this.#loaded = {
        obj,
        mode,
        maps: typedMaps(raw),
        progs,
        progIds,
        sockets: { attached: false, programs: {} },
        sockLinks: [],
      };
    } catch (err) {
      obj.close();
      throw err;
    }
    if (this.#options.hostSockets ?? true) this.#attachSockets(this.#loaded);
    else this.#loaded.sockets.error = "disabled";
    this.#log.info("dataplane programs loaded", {
      mode: this.#loaded.mode,
      programs: this.#loaded.progIds,
      sockets: this.#loaded.sockets,
    });
  }

  /**
   * Writes this network namespace's cookie into podmin_sock_cfg (the programs translate only its
   * sockets: cgroup hooks see every namespace's sockets) and links the socket programs to the
   * root cgroup v2. A failure is logged and kept in `sockets().error`; the tc programs serve on.
   */
  #attachSockets(l: Loaded): void {
    let root: { fd: number; path: string; how: "found" | "mounted" } | undefined;
    try {
      l.maps.sockCfg.write(netnsCookie());
      root = openCgroup2Root({ mountDir: this.#options.cgroupMountDir });
      for (const name of Object.values(SOCK_PROGRAMS)) {
        const prog = l.obj.program(name);
        l.sockLinks.push(cgroupAttach(prog.handle, root.fd, name));
        l.sockets.programs[name] = programIdOfFd(prog.fd);
      }
      l.sockets = { ...l.sockets, attached: true, cgroup: root.path, how: root.how };
    } catch (err) {
      this.#detachSockets(l);
      l.sockets.error = String(err instanceof Error ? err.message : err);
      this.#log.warn("dataplane socket programs not attached: host processes cannot reach VIPs", {
        error: l.sockets.error,
      });
    } finally {
      if (root) closeCgroup(root.fd);
    }
  }

  #detachSockets(l: Loaded): void {
    for (const link of l.sockLinks.splice(0)) {
      try {
        cgroupDetach(link);
      } catch (err) {
        this.#log.warn("dataplane socket program detach failed", { error: String(err) });
      }
    }
    l.sockets = { ...l.sockets, attached: false, programs: {} };
  }

  /** Detaches from every interface and unloads the programs; returns the interfaces detached. */
  async unload(): Promise<string[]> {
    const detached: string[] = [];
    for (const a of [...this.#attached.values()]) {
      try {
        await detach(a);
        detached.push(a.name);
      } catch (err) {
        this.#log.warn("dataplane detach failed", { interface: a.name, error: String(err) });
      }
    }
    this.#attached.clear();
    if (this.#loaded) {
      this.#detachSockets(this.#loaded);
      this.#loaded.obj.close();
      this.#loaded = undefined;
      this.#log.info("dataplane programs unloaded", { detached });
    }
    return detached;
  }

  /**
   * Copies the conntrack entries of a previous agent's programs still
   * attached to our interfaces (an agent restart: tc filters outlive the
   * process) into the freshly loaded map, so open flows keep their backend
   * and their reply translation when the new programs replace the old ones.
   * Only from a map with the same layout version. Returns entries copied.
   */
  adoptConntrack(targets: AttachTarget[]): number {
    const l = this.#loaded!;
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
        const cfgMap = opened.find((m) => m.info.name === MAPS.cfg)?.map;
        const cfg = cfgMap && new CfgMap(cfgMap).read();
        const ct = opened.find((m) => m.info.name === MAPS.ct);
        if (!cfg || cfg.version !== LAYOUT_VERSION || !ct) continue;
        if (ct.info.keySize !== SIZES.ct.key || ct.info.valueSize !== SIZES.ct.value) continue;
        const entries = l.maps.ct.copyFrom(ct.map);
        this.#log.info("dataplane conntrack adopted from the previous programs", {
          program: progId,
          entries,
        });
        return entries;
      } catch (err) {
        this.#log.warn("dataplane conntrack adoption failed", { error: String(err) });
        return 0;
      } finally {
        for (const m of opened) m.map.close();
      }
    }
    return 0;
  }

  /**
   * Attaches to the discovered interfaces and detaches from the others. With `verify`, also
   * re-attaches tc filters someone removed or replaced and removes leftovers of earlier programs.
   */
  async syncAttachments(options: {
    discovery: Discovery;
    changes: AttachChanges;
    verify: boolean;
  }): Promise<void> {
    const { changes, verify } = options;
    const wanted = new Map<number, AttachTarget>();
    for (const t of options.discovery.targets) wanted.set(t.ifindex, t);

    for (const a of [...this.#attached.values()]) {
      const t = wanted.get(a.ifindex);
      if (t && t.name === a.name) continue;
      try {
        await detach(a);
      } catch (err) {
        this.#log.warn("dataplane detach failed", { interface: a.name, error: String(err) });
      }
      this.#attached.delete(a.ifindex);
      changes.detached.push(a.name);
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
        changes.attached.push(t.name);
      } catch (err) {
        // ENODEV: the interface went away since discovery; the next pass settles it.
        const reason = err instanceof BpfError ? err.errno : String(err);
        changes.attachErrors.push(`${t.name}: ${reason}`);
        this.#log.warn("dataplane attach failed", { interface: t.name, error: String(err) });
      }
    }
    if (verify) {
      // Filters of earlier programs on interfaces we no longer use.
      const keep = new Set(this.#attached.keys());
      changes.detached.push(...await removeLeftovers(this.#log, keep));
    }
    if (changes.attached.length || changes.detached.length) {
      this.#log.info("dataplane attachments changed", {
        attached: changes.attached,
        detached: changes.detached,
      });
    }
  }

  #filtersIntact(a: Attachment): boolean {
    const l = this.#loaded!;
    const q = (point: TcAttachPoint) =>
      tcQuery({ ifindex: a.ifindex, point, handle: TC_HANDLE, priority: TC_PRIORITY });
    return q("ingress") === l.progIds.ingress && q("egress") === l.progIds.egress;
  }

  #attach(t: AttachTarget): Attachment {
    const l = this.#loaded!;
    if (l.mode === "tcx") {
      const attached = this.#attachTcx(t);
      if (attached) return attached;
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

  /** Attaches with tcx; undefined when the kernel refuses tcx (the caller falls back to tc). */
  #attachTcx(t: AttachTarget): Attachment | undefined {
    const l = this.#loaded!;
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
      return undefined;
    }
  }
}

async function detach(a: Attachment): Promise<void> {
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

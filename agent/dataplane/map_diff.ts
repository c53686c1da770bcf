/**
 * The map diff: keeps the kernel maps of a loaded dataplane equal to the desired state by writing
 * only what differs from the last applied state (no flush).
 *
 * Order of a write: removed Service ports are unlinked first (no new flow picks their slots),
 * backend slots are written before the counts that expose them, slots no count exposes are
 * deleted after, then the configuration, and conntrack entries of removed backends last. When a
 * write fails halfway the diff is dirty: the next write first reads the maps back (`readMaps`)
 * and diffs against what is really there.
 */

import { type Logger, silentLogger } from "../../core/kit/log.ts";
import type { Backend, BeKey } from "./be_map.ts";
import { cfgFingerprint } from "./cfg_map.ts";
import { type CtKey, DIR } from "./ct_map.ts";
import type { DesiredState } from "./desired_state.ts";
import { type DataplaneMaps, readMaps } from "./maps.ts";
import { type SvcKey, svcKeyId, type SvcVal } from "./svc_map.ts";

/** What one write changed. */
export interface DiffCounts {
  svcWrites: number;
  svcDeletes: number;
  backendWrites: number;
  backendDeletes: number;
  conntrackDeleted: number;
}

interface AppliedPort {
  key: SvcKey;
  id: number;
  /** Slot contents; undefined = slot missing in the kernel (read back). */
  backends: (Backend | undefined)[];
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

function sameBackend(a: Backend | undefined, b: Backend): boolean {
  return a !== undefined && a.addr === b.addr && a.port === b.port;
}

const beId = (addr: bigint, port: number) => `${addr}|${port}`;

/** The planned batches of one write. */
interface Plan {
  svcDel: SvcKey[];
  svcUpd: [SvcKey, SvcVal][];
  beUpd: [BeKey, Backend][];
  beDel: BeKey[];
  freed: number[];
  next: Map<string, AppliedPort>;
  /** A backend or Service port went away: conntrack needs a purge. */
  removals: boolean;
}

/** The last applied map contents of one loaded dataplane, and the writes that change them. */
export class MapDiff {
  readonly #log: Logger;
  #applied = new Map<string, AppliedPort>();
  #cfg?: string;
  readonly #ids = new IdAllocator();
  #dirty = false;

  constructor(log: Logger = silentLogger) {
    this.#log = log;
  }

  /** Forgets the applied state (freshly loaded or unloaded maps are empty). */
  reset(): void {
    this.#applied.clear();
    this.#cfg = undefined;
    this.#ids.reset();
    this.#dirty = false;
  }

  /** Service ports and backend slots applied. */
  summary(): { servicePorts: number; backendSlots: number } {
    let slots = 0;
    for (const p of this.#applied.values()) slots += p.backends.length;
    return { servicePorts: this.#applied.size, backendSlots: slots };
  }

  /**
   * Writes the difference between the applied state and `desired`. Reads the maps back first
   * when an earlier write failed or `full` asks for it; `purgeAll` checks every conntrack entry.
   */
  write(options: {
    maps: DataplaneMaps;
    desired: DesiredState;
    full: boolean;
    purgeAll: boolean;
  }): DiffCounts {
    if (this.#dirty || options.full) this.#readBack(options.maps);
    try {
      return this.#write(options.maps, options.desired, options.full || options.purgeAll);
    } catch (err) {
      this.#dirty = true;
      throw err;
    }
  }

  /** Rebuilds the applied mirror from the kernel maps; deletes orphaned slots. */
  #readBack(maps: DataplaneMaps): void {
    const content = readMaps(maps);
    const applied = new Map<string, AppliedPort>();
    for (const p of content.ports) applied.set(svcKeyId(p.key), p);
    maps.be.delete(content.orphans);
    this.#cfg = maps.cfg.fingerprint();
    this.#applied = applied;
    this.#ids.reset(content.ports.map((p) => p.id));
    this.#dirty = false;
  }

  #plan(desired: DesiredState): Plan {
    const plan: Plan = {
      svcDel: [],
      svcUpd: [],
      beUpd: [],
      beDel: [],
      freed: [],
      next: new Map(),
      removals: false,
    };
    for (const [kid, cur] of this.#applied) {
      if (desired.ports.has(kid)) continue;
      plan.svcDel.push(cur.key);
      for (let i = 0; i < cur.backends.length; i++) plan.beDel.push({ id: cur.id, slot: i });
      plan.freed.push(cur.id);
      plan.removals = true;
    }
    for (const [kid, want] of desired.ports) {
      const cur = this.#applied.get(kid);
      const id = cur?.id ?? this.#ids.alloc();
      const have = cur?.backends ?? [];
      want.backends.forEach((b, i) => {
        if (!sameBackend(have[i], b)) plan.beUpd.push([{ id, slot: i }, b]);
      });
      if (!cur || have.length !== want.backends.length) {
        plan.svcUpd.push([want.key, { id, count: want.backends.length }]);
      }
      for (let i = want.backends.length; i < have.length; i++) plan.beDel.push({ id, slot: i });
      if (cur) {
        const keep = new Set(want.backends.map((b) => beId(b.addr, b.port)));
        if (have.some((b) => b && !keep.has(beId(b.addr, b.port)))) plan.removals = true;
      }
      plan.next.set(kid, { key: want.key, id, backends: [...want.backends] });
    }
    return plan;
  }

  #write(maps: DataplaneMaps, desired: DesiredState, purgeAll: boolean): DiffCounts {
    const plan = this.#plan(desired);
    // 1. Unlink removed Service ports: no new flow can pick their slots.
    maps.svc.delete(plan.svcDel);
    // 2. Slots before the counts that expose them.
    maps.be.update(plan.beUpd);
    // 3. New Service ports and changed counts.
    maps.svc.update(plan.svcUpd);
    // 4. Slots no count exposes any more.
    maps.be.delete(plan.beDel);
    // 5. Configuration.
    if (this.#cfg !== cfgFingerprint(desired.serviceCIDR)) {
      this.#cfg = maps.cfg.write(desired.serviceCIDR);
    }
    this.#applied = plan.next;
    this.#ids.release(plan.freed);
    const counts: DiffCounts = {
      svcWrites: plan.svcUpd.length,
      svcDeletes: plan.svcDel.length,
      backendWrites: plan.beUpd.length,
      backendDeletes: plan.beDel.length,
      conntrackDeleted: 0,
    };
    // 6. Conntrack entries of flows whose backend or Service port is gone.
    if (plan.removals || purgeAll) counts.conntrackDeleted = purgeConntrack(maps, desired);
    if (plan.svcDel.length + plan.svcUpd.length + plan.beUpd.length + plan.beDel.length) {
      this.#log.info("dataplane maps updated", { servicePorts: plan.next.size, ...counts });
    }
    return counts;
  }
}

/** Deletes conntrack entries not consistent with the desired state; returns how many. */
function purgeConntrack(maps: DataplaneMaps, desired: DesiredState): number {
  const live = new Map<string, Set<string>>();
  for (const [kid, p] of desired.ports) {
    live.set(kid, new Set(p.backends.map((b) => beId(b.addr, b.port))));
  }
  const stale: CtKey[] = [];
  for (const [key, value] of maps.ct.entries()) {
    let kid: string, backend: string;
    if (value.dir === DIR.forward) {
      kid = svcKeyId({ vip: key.daddr, port: key.dport, proto: key.proto });
      backend = beId(value.daddr, value.dport);
    } else if (value.dir === DIR.reply) {
      kid = svcKeyId({ vip: value.saddr, port: value.sport, proto: key.proto });
      backend = beId(key.saddr, key.sport);
    } else {
      stale.push(key);
      continue;
    }
    if (!live.get(kid)?.has(backend)) stale.push(key);
  }
  return maps.ct.delete(stale);
}

/**
 * The dataplane's map set: the names of its maps and programs in bpf/dataplane.c, their layouts
 * (from the per-map modules), the typed wrappers of one loaded object, and `readMaps`, the one
 * read-back of Service ports and their backend slots that the map diff and `dataplane status`
 * share.
 */

import type { BpfMap } from "../../ffi/bpf_map.ts";
import {
  type Backend,
  BE_MAP,
  BE_SIZES,
  type BeKey,
  BeMap,
  PM_BE_KEY_OFFSETS,
  PM_BE_VAL_OFFSETS,
} from "./be_map.ts";
import { CFG_MAP, CFG_SIZES, CfgMap, type CfgValue, PM_CFG_OFFSETS } from "./cfg_map.ts";
import { CT_MAP, CT_SIZES, CtMap, PM_CT_KEY_OFFSETS, PM_CT_VAL_OFFSETS } from "./ct_map.ts";
import {
  PM_SOCK_CFG_OFFSETS,
  PM_SOCK_KEY_OFFSETS,
  PM_SOCK_VAL_OFFSETS,
  SOCK_CFG_MAP,
  SOCK_CFG_SIZES,
  SOCK_MAP,
  SOCK_SIZES,
  SockCfgMap,
  SockMap,
} from "./sock_map.ts";
import { STATS_MAP, STATS_SIZES, StatsMap } from "./stats_map.ts";
import {
  PM_SVC_KEY_OFFSETS,
  PM_SVC_VAL_OFFSETS,
  SVC_MAP,
  SVC_SIZES,
  type SvcKey,
  SvcMap,
} from "./svc_map.ts";

/** Map names in the object. */
export const MAPS = {
  cfg: CFG_MAP,
  svc: SVC_MAP,
  be: BE_MAP,
  ct: CT_MAP,
  stats: STATS_MAP,
  sockCfg: SOCK_CFG_MAP,
  sock: SOCK_MAP,
} as const;

/** Program names in the object: the tc programs. */
export const PROGRAMS = { ingress: "podmin_ingress", egress: "podmin_egress" } as const;

/** The cgroup socket programs (host processes' connections to Service ports). */
export const SOCK_PROGRAMS = {
  connect6: "podmin_connect6",
  sendmsg6: "podmin_sendmsg6",
  recvmsg6: "podmin_recvmsg6",
} as const;

/** Key and value sizes (bytes) of every map, as in bpf/dataplane.h. */
export const SIZES = {
  cfg: CFG_SIZES,
  svc: SVC_SIZES,
  be: BE_SIZES,
  ct: CT_SIZES,
  stats: STATS_SIZES,
  sockCfg: SOCK_CFG_SIZES,
  sock: SOCK_SIZES,
} as const;

/** Struct member offsets (bytes), checked against the object's BTF by a test. */
export const OFFSETS = {
  pm_cfg: PM_CFG_OFFSETS,
  pm_svc_key: PM_SVC_KEY_OFFSETS,
  pm_svc_val: PM_SVC_VAL_OFFSETS,
  pm_be_key: PM_BE_KEY_OFFSETS,
  pm_be_val: PM_BE_VAL_OFFSETS,
  pm_ct_key: PM_CT_KEY_OFFSETS,
  pm_ct_val: PM_CT_VAL_OFFSETS,
  pm_sock_cfg: PM_SOCK_CFG_OFFSETS,
  pm_sock_key: PM_SOCK_KEY_OFFSETS,
  pm_sock_val: PM_SOCK_VAL_OFFSETS,
} as const;

/** The typed maps of one loaded dataplane object. */
export interface DataplaneMaps {
  cfg: CfgMap;
  svc: SvcMap;
  be: BeMap;
  ct: CtMap;
  stats: StatsMap;
  sockCfg: SockCfgMap;
  sock: SockMap;
}

/** Wraps raw maps by role (`MAPS` keys). */
export function typedMaps(raw: Record<keyof typeof MAPS, BpfMap>): DataplaneMaps {
  return {
    cfg: new CfgMap(raw.cfg),
    svc: new SvcMap(raw.svc),
    be: new BeMap(raw.be),
    ct: new CtMap(raw.ct),
    stats: new StatsMap(raw.stats),
    sockCfg: new SockCfgMap(raw.sockCfg),
    sock: new SockMap(raw.sock),
  };
}

/** One Service port as the maps hold it. */
export interface PortSlots {
  key: SvcKey;
  /** Its backend-slot namespace. */
  id: number;
  /** Slot contents up to the port's count; undefined = the slot is missing. */
  backends: (Backend | undefined)[];
}

/** What `readMaps` found. */
export interface MapsContent {
  config?: CfgValue;
  ports: PortSlots[];
  /** Backend slots no Service port's count exposes (left over by an interrupted write). */
  orphans: BeKey[];
}

/** Reads the configuration, the Service ports and their backend slots (any map may be absent). */
export function readMaps(maps: Partial<Pick<DataplaneMaps, "cfg" | "svc" | "be">>): MapsContent {
  const slots = new Map<number, Map<number, Backend>>();
  for (const [{ id, slot }, backend] of maps.be?.entries() ?? []) {
    if (!slots.has(id)) slots.set(id, new Map());
    slots.get(id)!.set(slot, backend);
  }
  const ports: PortSlots[] = [];
  const countOf = new Map<number, number>();
  for (const [key, { id, count }] of maps.svc?.entries() ?? []) {
    const s = slots.get(id);
    ports.push({ key, id, backends: Array.from({ length: count }, (_, i) => s?.get(i)) });
    countOf.set(id, count);
  }
  const orphans: BeKey[] = [];
  for (const [id, s] of slots) {
    const count = countOf.get(id);
    for (const slot of s.keys()) {
      if (count === undefined || slot >= count) orphans.push({ id, slot });
    }
  }
  return { config: maps.cfg?.read(), ports, orphans };
}

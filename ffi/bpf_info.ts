/**
 * Kernel-wide introspection of loaded programs and maps by id (what
 * `bpftool prog/map show` does): works for unpinned objects of any process.
 */

import { BpfMap, MAP_TYPES } from "./bpf_map.ts";
import { check, libbpf } from "./libbpf.ts";
import { BPF_MAP_INFO, BPF_PROG_INFO, Struct } from "./structs.ts";

/** Program types we name (enum bpf_prog_type). */
export const PROG_TYPES: Record<number, string> = {
  3: "sched_cls",
  6: "xdp",
  18: "cgroup_sock_addr",
};

/** A loaded program. */
export interface ProgInfo {
  id: number;
  type: string;
  name: string;
  /** Hex tag (hash of the instructions). */
  tag: string;
  mapIds: number[];
  /** Nanoseconds since boot at load time. */
  loadTimeNs: number;
  /** Run statistics (zero unless kernel.bpf_stats_enabled=1). */
  runTimeNs: number;
  runCount: number;
}

/** A loaded map. */
export interface MapInfo {
  id: number;
  type: string;
  typeId: number;
  name: string;
  keySize: number;
  valueSize: number;
  maxEntries: number;
  flags: number;
}

function ids(next: (start: number, out: Uint8Array) => number, op: string): number[] {
  const out: number[] = [];
  const id = new Uint32Array(1);
  const bytes = new Uint8Array(id.buffer);
  for (let start = 0;;) {
    const ret = next(start, bytes);
    if (ret === -2) return out;
    check(ret, op);
    out.push(id[0]);
    start = id[0];
  }
}

/** Ids of every loaded program. */
export function programIds(): number[] {
  const { sym } = libbpf();
  return ids((s, o) => sym.bpf_prog_get_next_id(s, o), "bpf_prog_get_next_id");
}

/** Ids of every map. */
export function mapIds(): number[] {
  const { sym } = libbpf();
  return ids((s, o) => sym.bpf_map_get_next_id(s, o), "bpf_map_get_next_id");
}

function info<F extends string>(fd: number, s: Struct<F>, op: string): void {
  const len = new Uint32Array([s.bytes.byteLength]);
  check(libbpf().sym.bpf_obj_get_info_by_fd(fd, s.bytes, new Uint8Array(len.buffer)), op);
}

/** A program's information, or undefined when the id is gone. */
export function programInfo(id: number): ProgInfo | undefined {
  const lib = libbpf();
  const fd = lib.sym.bpf_prog_get_fd_by_id(id);
  if (fd === -2) return undefined;
  check(fd, "bpf_prog_get_fd_by_id", `id ${id}`);
  try {
    const first = new Struct(BPF_PROG_INFO);
    info(fd, first, "bpf_obj_get_info_by_fd");
    const n = first.get("nr_map_ids");
    const maps = new Uint32Array(Math.max(1, n));
    const s = new Struct(BPF_PROG_INFO)
      .set("nr_map_ids", n)
      .setPointer("map_ids", new Uint8Array(maps.buffer));
    info(fd, s, "bpf_obj_get_info_by_fd");
    const tag = [...s.raw("tag")].map((b) => b.toString(16).padStart(2, "0")).join("");
    const typeId = s.get("type");
    return {
      id: s.get("id"),
      type: PROG_TYPES[typeId] ?? `type ${typeId}`,
      name: s.string("name"),
      tag,
      mapIds: [...maps.subarray(0, Math.min(n, s.get("nr_map_ids")))],
      loadTimeNs: s.get("load_time"),
      runTimeNs: s.get("run_time_ns"),
      runCount: s.get("run_cnt"),
    };
  } finally {
    lib.closeFd(fd);
  }
}

function mapInfoOf(fd: number): MapInfo {
  const s = new Struct(BPF_MAP_INFO);
  info(fd, s, "bpf_obj_get_info_by_fd");
  const typeId = s.get("type");
  return {
    id: s.get("id"),
    type: MAP_TYPES[typeId] ?? `type ${typeId}`,
    typeId,
    name: s.string("name"),
    keySize: s.get("key_size"),
    valueSize: s.get("value_size"),
    maxEntries: s.get("max_entries"),
    flags: s.get("map_flags"),
  };
}

/** A map's information, or undefined when the id is gone. */
export function mapInfo(id: number): MapInfo | undefined {
  const map = openMapById(id);
  if (!map) return undefined;
  try {
    return map.info;
  } finally {
    map.map.close();
  }
}

/** Opens a map by id (the caller closes it), or undefined when the id is gone. */
export function openMapById(id: number): { map: BpfMap; info: MapInfo } | undefined {
  const lib = libbpf();
  const fd = lib.sym.bpf_map_get_fd_by_id(id);
  if (fd === -2) return undefined;
  check(fd, "bpf_map_get_fd_by_id", `id ${id}`);
  try {
    const i = mapInfoOf(fd);
    return {
      map: new BpfMap(fd, {
        name: i.name,
        type: i.typeId,
        keySize: i.keySize,
        valueSize: i.valueSize,
        maxEntries: i.maxEntries,
      }, { ownsFd: true }),
      info: i,
    };
  } catch (err) {
    lib.closeFd(fd);
    throw err;
  }
}

/** The id of the program behind a program fd. */
export function programIdOfFd(fd: number): number {
  const s = new Struct(BPF_PROG_INFO);
  info(fd, s, "bpf_obj_get_info_by_fd");
  return s.get("id");
}

/**
 * Turns on the kernel's per-program run-time statistics (`BPF_ENABLE_STATS`) while the returned
 * function has not been called (it closes the fd and turns them off again).
 */
export function enableRunTimeStats(): () => void {
  const lib = libbpf();
  const fd = check(lib.sym.bpf_enable_stats(0), "bpf_enable_stats");
  return () => lib.closeFd(fd);
}

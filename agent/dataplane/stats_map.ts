/**
 * `podmin_stats` (per-CPU array of u64 indexed by enum pm_stat of bpf/dataplane.h): the
 * dataplane's packet counters, summed over CPUs when read.
 */

import type { BpfMap } from "../../ffi/bpf_map.ts";

/** The map's name in the object. */
export const STATS_MAP = "podmin_stats";
/** Key (u32 index) and value (u64 per CPU) sizes. */
export const STATS_SIZES = { key: 4, value: 8 } as const;

/** Counters of podmin_stats, by index (enum pm_stat). */
export const STAT_NAMES = [
  "newFlow",
  "forward",
  "reply",
  "icmp",
  "dropNoBackend",
  "dropUnmatched",
  "dropUntranslatable",
  "portRemap",
  "dropCt",
  "error",
  "sockConnect",
  "sockSendmsg",
  "sockRecvmsg",
  "sockRefused",
] as const;

/** Sums a per-CPU u64 value. */
export function sumPerCpu(value: Uint8Array): bigint {
  const d = new DataView(value.buffer, value.byteOffset, value.byteLength);
  let total = 0n;
  for (let off = 0; off + 8 <= value.byteLength; off += 8) total += d.getBigUint64(off, true);
  return total;
}

/** The podmin_stats map. */
export class StatsMap {
  readonly map: BpfMap;

  constructor(map: BpfMap) {
    this.map = map;
  }

  /** Every counter by name (0 when unreadable). */
  counters(): Record<string, number> {
    const out: Record<string, number> = {};
    STAT_NAMES.forEach((name, i) => {
      const key = new Uint8Array(STATS_SIZES.key);
      new DataView(key.buffer).setUint32(0, i, true);
      const v = this.map.lookup(key);
      out[name] = v ? Number(sumPerCpu(v)) : 0;
    });
    return out;
  }

  /** Closes the map fd when the wrapper owns it. */
  close(): void {
    this.map.close();
  }
}

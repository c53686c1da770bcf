/**
 * `podmin_cfg` (struct pm_cfg of bpf/dataplane.h): one entry at key 0 holding the Service range
 * (network and mask, flag PM_CFG_SERVICE_CIDR) and the layout version the programs were built
 * with.
 */

import type { BpfMap } from "../../ffi/bpf_map.ts";
import { formatIpv6, type Ipv6Prefix } from "../../core/model/ipv6.ts";
import { addrBytes, bytesAddr, hex } from "./typed_map.ts";

/** The map's name in the object. */
export const CFG_MAP = "podmin_cfg";
/** PM_LAYOUT_VERSION of bpf/dataplane.h. */
export const LAYOUT_VERSION = 1;
/** Key (u32 index) and value (struct pm_cfg) sizes. */
export const CFG_SIZES = { key: 4, value: 40 } as const;
/** Member offsets of struct pm_cfg, checked against the object's BTF by a test. */
export const PM_CFG_OFFSETS = { svc_net: 0, svc_mask: 16, flags: 32, version: 36 } as const;

/** PM_CFG_SERVICE_CIDR. */
const CFG_SERVICE_CIDR = 1;

/** The decoded configuration. */
export interface CfgValue {
  serviceCIDR?: string;
  version: number;
}

/** Encodes the podmin_cfg value. */
export function encodeCfg(cidr: Ipv6Prefix | undefined): Uint8Array {
  const out = new Uint8Array(CFG_SIZES.value);
  const d = new DataView(out.buffer);
  if (cidr) {
    addrBytes(cidr.network, out, 0);
    const mask = ((1n << BigInt(cidr.length)) - 1n) << BigInt(128 - cidr.length);
    addrBytes(mask, out, 16);
    d.setUint32(32, CFG_SERVICE_CIDR, true);
  }
  d.setUint32(36, LAYOUT_VERSION, true);
  return out;
}

/** Decodes the podmin_cfg value. */
export function decodeCfg(b: Uint8Array): CfgValue {
  const d = new DataView(b.buffer, b.byteOffset, b.byteLength);
  const version = d.getUint32(36, true);
  if (!(d.getUint32(32, true) & CFG_SERVICE_CIDR)) return { version };
  let mask = bytesAddr(b, 16);
  let len = 0;
  while (mask & (1n << 127n)) {
    len++;
    mask = (mask << 1n) & ((1n << 128n) - 1n);
  }
  return { serviceCIDR: `${formatIpv6(bytesAddr(b, 0))}/${len}`, version };
}

/**
 * An opaque fingerprint of the configuration for a Service range: equal fingerprints mean equal
 * bytes in the map, so a writer can skip a write that changes nothing.
 */
export function cfgFingerprint(cidr: Ipv6Prefix | undefined): string {
  return hex(encodeCfg(cidr));
}

const KEY0 = () => new Uint8Array(CFG_SIZES.key);

/** The podmin_cfg map. */
export class CfgMap {
  readonly map: BpfMap;

  constructor(map: BpfMap) {
    this.map = map;
  }

  /** The configuration, or undefined when the entry was never written. */
  read(): CfgValue | undefined {
    const v = this.map.lookup(KEY0());
    return v && decodeCfg(v);
  }

  /** The fingerprint of what the map holds (see `cfgFingerprint`). */
  fingerprint(): string | undefined {
    const v = this.map.lookup(KEY0());
    return v && hex(v);
  }

  /** Writes the configuration for a Service range (or none); returns its fingerprint. */
  write(cidr: Ipv6Prefix | undefined): string {
    const bytes = encodeCfg(cidr);
    this.map.update(KEY0(), bytes);
    return hex(bytes);
  }

  /** Closes the map fd when the wrapper owns it. */
  close(): void {
    this.map.close();
  }
}

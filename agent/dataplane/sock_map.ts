/**
 * The socket programs' maps of bpf/dataplane.h: `podmin_sock_cfg` (struct pm_sock_cfg at key 0:
 * the network-namespace cookie whose sockets are translated; 0 = none) and `podmin_sock`
 * (struct pm_sock_key → struct pm_sock_val: a UDP socket and the backend it sent to → the
 * Service port it addressed, read by recvmsg to give replies the VIP as their source).
 */

import type { BpfMap } from "../../ffi/bpf_map.ts";
import { addrBytes, bytesAddr, type Codec, TypedMap } from "./typed_map.ts";

/** The maps' names in the object. */
export const SOCK_CFG_MAP = "podmin_sock_cfg";
/** The socket cookie → Service port map. */
export const SOCK_MAP = "podmin_sock";
/** Key (u32 index) and value (struct pm_sock_cfg) sizes. */
export const SOCK_CFG_SIZES = { key: 4, value: 8 } as const;
/** Key (struct pm_sock_key) and value (struct pm_sock_val) sizes. */
export const SOCK_SIZES = { key: 32, value: 20 } as const;
/** Member offsets, checked against the object's BTF by a test. */
export const PM_SOCK_CFG_OFFSETS = { netns_cookie: 0 } as const;
export const PM_SOCK_KEY_OFFSETS = { cookie: 0, addr: 8, port: 24 } as const;
export const PM_SOCK_VAL_OFFSETS = { vip: 0, port: 16, proto: 18 } as const;

/** A podmin_sock key: a socket and the backend it sent to. */
export interface SockKey {
  cookie: bigint;
  addr: bigint;
  port: number;
}

/** A podmin_sock value: the Service port the socket addressed. */
export interface SockVal {
  vip: bigint;
  port: number;
  proto: number;
}

/** Encodes and decodes struct pm_sock_key. */
export const SOCK_KEY: Codec<SockKey> = {
  size: SOCK_SIZES.key,
  encode(k, out = new Uint8Array(SOCK_SIZES.key), at = 0) {
    const d = new DataView(out.buffer, out.byteOffset);
    d.setBigUint64(at, k.cookie, true);
    addrBytes(k.addr, out, at + 8);
    d.setUint16(at + 24, k.port, false);
    d.setUint16(at + 26, 0, true);
    d.setUint32(at + 28, 0, true);
    return out;
  },
  decode(b) {
    const d = new DataView(b.buffer, b.byteOffset, b.byteLength);
    return { cookie: d.getBigUint64(0, true), addr: bytesAddr(b, 8), port: d.getUint16(24, false) };
  },
};

/** Encodes and decodes struct pm_sock_val. */
export const SOCK_VAL: Codec<SockVal> = {
  size: SOCK_SIZES.value,
  encode(v, out = new Uint8Array(SOCK_SIZES.value), at = 0) {
    addrBytes(v.vip, out, at);
    const d = new DataView(out.buffer, out.byteOffset);
    d.setUint16(at + 16, v.port, false);
    d.setUint8(at + 18, v.proto);
    d.setUint8(at + 19, 0);
    return out;
  },
  decode(b) {
    const d = new DataView(b.buffer, b.byteOffset, b.byteLength);
    return { vip: bytesAddr(b), port: d.getUint16(16, false), proto: d.getUint8(18) };
  },
};

/** The podmin_sock map (UDP sockets' reverse translations). */
export class SockMap extends TypedMap<SockKey, SockVal> {
  constructor(map: BpfMap) {
    super(map, { key: SOCK_KEY, value: SOCK_VAL });
  }
}

const KEY0 = () => new Uint8Array(SOCK_CFG_SIZES.key);

/** The podmin_sock_cfg map. */
export class SockCfgMap {
  readonly map: BpfMap;

  constructor(map: BpfMap) {
    this.map = map;
  }

  /** The network-namespace cookie whose sockets are translated (0: none). */
  read(): bigint {
    const v = this.map.lookup(KEY0());
    return v ? new DataView(v.buffer, v.byteOffset, v.byteLength).getBigUint64(0, true) : 0n;
  }

  /** Sets the network-namespace cookie whose sockets are translated (0: none). */
  write(netnsCookie: bigint): void {
    const v = new Uint8Array(SOCK_CFG_SIZES.value);
    new DataView(v.buffer).setBigUint64(0, netnsCookie, true);
    this.map.update(KEY0(), v);
  }

  /** Closes the map fd when the wrapper owns it. */
  close(): void {
    this.map.close();
  }
}

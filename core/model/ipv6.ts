/** IPv6 addresses and prefixes as BigInt arithmetic (VIP allocation, dataplane input). */

import { ValidationError } from "../kit/errors.ts";

/** Parses an IPv6 address (no zone, no embedded IPv4) into a 128-bit integer. */
export function parseIpv6(text: string): bigint {
  const bad = () => new ValidationError(`invalid IPv6 address ${JSON.stringify(text)}`);
  if (typeof text !== "string" || text.length > 39 || !/^[0-9a-fA-F:]+$/.test(text)) throw bad();
  const halves = text.split("::");
  if (halves.length > 2) throw bad();
  const parse = (s: string) => (s === "" ? [] : s.split(":"));
  const head = parse(halves[0]);
  const tail = halves.length === 2 ? parse(halves[1]) : [];
  const groups = halves.length === 2
    ? [...head, ...Array(8 - head.length - tail.length).fill("0"), ...tail]
    : head;
  if (groups.length !== 8 || (halves.length === 2 && head.length + tail.length > 7)) throw bad();
  let value = 0n;
  for (const g of groups) {
    if (!/^[0-9a-fA-F]{1,4}$/.test(g)) throw bad();
    value = (value << 16n) | BigInt(parseInt(g, 16));
  }
  return value;
}

/** Formats a 128-bit integer as a canonical (RFC 5952) IPv6 address. */
export function formatIpv6(value: bigint): string {
  const groups: number[] = [];
  for (let i = 7; i >= 0; i--) groups.push(Number((value >> BigInt(i * 16)) & 0xffffn));
  // Longest run of at least two zero groups becomes "::".
  let bestStart = -1, bestLen = 0;
  for (let i = 0; i < 8;) {
    if (groups[i] !== 0) {
      i++;
      continue;
    }
    let j = i;
    while (j < 8 && groups[j] === 0) j++;
    if (j - i > bestLen && j - i >= 2) [bestStart, bestLen] = [i, j - i];
    i = j;
  }
  const hex = groups.map((g) => g.toString(16));
  if (bestStart < 0) return hex.join(":");
  return `${hex.slice(0, bestStart).join(":")}::${hex.slice(bestStart + bestLen).join(":")}`;
}

/** An IPv6 prefix. */
export interface Ipv6Prefix {
  network: bigint;
  length: number;
}

/** Parses `addr/len`; the address must be the network address. */
export function parseIpv6Prefix(text: string): Ipv6Prefix {
  const [addr, len, extra] = String(text).split("/");
  const length = Number(len);
  if (extra !== undefined || !/^\d{1,3}$/.test(len ?? "") || length > 128) {
    throw new ValidationError(
      `invalid IPv6 prefix ${JSON.stringify(text)}: expected ADDRESS/LENGTH`,
    );
  }
  const network = parseIpv6(addr);
  const hostBits = BigInt(128 - length);
  if ((network & ((1n << hostBits) - 1n)) !== 0n) {
    throw new ValidationError(
      `invalid IPv6 prefix ${JSON.stringify(text)}: host bits set (network is ${
        formatIpv6((network >> hostBits) << hostBits)
      }/${length})`,
    );
  }
  return { network, length };
}

/** Number of addresses in a prefix. */
export function prefixSize(p: Ipv6Prefix): bigint {
  return 1n << BigInt(128 - p.length);
}

/** True when `addr` lies inside the prefix. */
export function prefixContains(p: Ipv6Prefix, addr: bigint): boolean {
  return addr >= p.network && addr < p.network + prefixSize(p);
}

/** Formats a prefix. */
export function formatIpv6Prefix(p: Ipv6Prefix): string {
  return `${formatIpv6(p.network)}/${p.length}`;
}

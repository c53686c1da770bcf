/**
 * CIDR arithmetic for subnet planning: IPv4 blocks (the VPC's primary range) and IPv6 blocks
 * (the VPC's /56), both as BigInt so one set of helpers serves both families.
 */

import { ValidationError } from "../../core/kit/errors.ts";
import { formatIpv6Prefix, parseIpv6Prefix } from "../../core/model/ipv6.ts";

/** A CIDR block of either family. */
export interface Cidr {
  family: 4 | 6;
  network: bigint;
  length: number;
}

const IPV4 = /^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})\/(\d{1,2})$/;

/** Parses an IPv4 CIDR (`10.0.0.0/16`); the address must be the network address. */
export function parseIpv4Cidr(text: string): Cidr {
  const bad = (why: string) =>
    new ValidationError(`invalid IPv4 CIDR ${JSON.stringify(text)}: ${why}`, {
      hint: "write it as A.B.C.D/LEN, for example 10.0.0.0/16",
    });
  const m = typeof text === "string" ? IPV4.exec(text) : null;
  if (!m) throw bad("expected A.B.C.D/LEN");
  const octets = m.slice(1, 5).map(Number);
  const length = Number(m[5]);
  if (octets.some((o, i) => o > 255 || (m[i + 1].length > 1 && m[i + 1].startsWith("0")))) {
    throw bad("octets are 0-255 without leading zeros");
  }
  if (length > 32) throw bad("length is 0-32");
  const network = octets.reduce((acc, o) => (acc << 8n) | BigInt(o), 0n);
  const hostBits = BigInt(32 - length);
  if ((network & ((1n << hostBits) - 1n)) !== 0n) {
    throw bad(`host bits set (network is ${formatCidr(mask({ family: 4, network, length }))})`);
  }
  return { family: 4, network, length };
}

/** Parses an IPv6 CIDR (`2600:1f18:abcd:ef00::/56`). */
export function parseIpv6Cidr(text: string): Cidr {
  const p = parseIpv6Prefix(text);
  return { family: 6, network: p.network, length: p.length };
}

/** Parses a CIDR of either family. */
export function parseCidr(text: string): Cidr {
  return typeof text === "string" && text.includes(":") ? parseIpv6Cidr(text) : parseIpv4Cidr(text);
}

function bits(c: Cidr): number {
  return c.family === 4 ? 32 : 128;
}

function mask(c: Cidr): Cidr {
  const host = BigInt(bits(c) - c.length);
  return { ...c, network: (c.network >> host) << host };
}

/** Formats a CIDR. */
export function formatCidr(c: Cidr): string {
  if (c.family === 6) return formatIpv6Prefix({ network: c.network, length: c.length });
  const o = [24n, 16n, 8n, 0n].map((s) => Number((c.network >> s) & 0xffn));
  return `${o.join(".")}/${c.length}`;
}

/**
 * The `index`-th block of length `newLength` inside `parent` (Terraform's `cidrsubnet` with
 * `newbits = newLength - parent.length`).
 */
export function subnetOf(
  parent: Cidr,
  { length: newLength, index }: { length: number; index: number },
): Cidr {
  const newBits = newLength - parent.length;
  if (newBits < 0 || newLength > bits(parent)) {
    throw new ValidationError(`cannot carve a /${newLength} out of ${formatCidr(parent)}`);
  }
  if (!Number.isInteger(index) || index < 0 || BigInt(index) >= 1n << BigInt(newBits)) {
    throw new ValidationError(
      `${formatCidr(parent)} has no block #${index} of length /${newLength}`,
    );
  }
  const shift = BigInt(bits(parent) - newLength);
  return {
    family: parent.family,
    network: parent.network | (BigInt(index) << shift),
    length: newLength,
  };
}

/** True when two blocks of the same family share at least one address. */
export function overlaps(a: Cidr, b: Cidr): boolean {
  if (a.family !== b.family) return false;
  const shorter = Math.min(a.length, b.length);
  const shift = BigInt(bits(a) - shorter);
  return a.network >> shift === b.network >> shift;
}

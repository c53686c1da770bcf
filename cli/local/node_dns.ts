/**
 * Service DNS of a local node. A cloud node's CoreDNS answers on the node's own IPv6 address, next
 * to the delegated Pod prefix in the subnet's /64; a local node has no such address of its own, so
 * `up` gives the host one in the same place: the Pod prefix's /64 with the interface identifier
 * `ffff:0:0:53` (`fffe:0:0:53` for a prefix whose fifth group is `ffff`), outside the /80 the Pods
 * get addresses from, as a /128 on the host's loopback. Pods reach it through their default route
 * (the host side of their veth); CoreDNS binds it and kubelet names it as the Pods' nameserver.
 */

import { formatIpv6, parseIpv6Prefix } from "../../core/model/ipv6.ts";
import { ValidationError } from "../../core/kit/errors.ts";

/** The interface the local node's DNS address lives on. */
export const DNS_ADDRESS_DEVICE = "lo";

/** The local node's DNS address for a Pod prefix (a /80): see the module comment. */
export function localDnsAddress(podPrefix: string): string {
  const p = parseIpv6Prefix(podPrefix);
  if (p.length !== 80) {
    throw new ValidationError(`the Pod prefix must be a /80, got ${podPrefix}`);
  }
  const group5 = (p.network >> 48n) & 0xffffn;
  const base = p.network & ~(0xffffn << 48n);
  return formatIpv6(base | ((group5 === 0xffffn ? 0xfffen : 0xffffn) << 48n) | 0x53n);
}

async function ip(args: string[]): Promise<{ ok: boolean; out: string }> {
  const out = await new Deno.Command("ip", { args, stdout: "piped", stderr: "piped" }).output();
  const dec = new TextDecoder();
  return { ok: out.success, out: dec.decode(out.stdout) + dec.decode(out.stderr) };
}

/** Whether the host's loopback carries `address` as a /128. */
export async function hasLoopbackAddress(address: string): Promise<boolean> {
  const { out } = await ip(["-6", "-o", "addr", "show", "dev", DNS_ADDRESS_DEVICE]);
  return out.split("\n").some((l) => l.split(/\s+/).includes(`${address}/128`));
}

/** Adds `address`/128 to the host's loopback; throws with ip's message when it cannot. */
export async function addLoopbackAddress(address: string): Promise<void> {
  const r = await ip(["-6", "addr", "add", `${address}/128`, "dev", DNS_ADDRESS_DEVICE]);
  if (!r.ok && !(await hasLoopbackAddress(address))) {
    throw new Error(`ip -6 addr add ${address}/128 dev ${DNS_ADDRESS_DEVICE}: ${r.out.trim()}`);
  }
}

/** Removes `address`/128 from the host's loopback; false when it was not there. */
export async function removeLoopbackAddress(address: string): Promise<boolean> {
  if (!(await hasLoopbackAddress(address))) return false;
  return (await ip(["-6", "addr", "del", `${address}/128`, "dev", DNS_ADDRESS_DEVICE])).ok;
}

/** Whether a DNS server accepts TCP connections on `[address]:port`. */
export async function dnsListening(address: string, port = 53): Promise<boolean> {
  try {
    const conn = await Deno.connect({ hostname: address, port, transport: "tcp" });
    conn.close();
    return true;
  } catch {
    return false;
  }
}

/**
 * Which interfaces the dataplane attaches to, discovered from the routing
 * table of the agent's network namespace (`ip -6 -j route`, `ip -j link`):
 *
 * - Pod veths: devices of routes strictly inside the delegated Pod prefix
 *   (`--ipv6-prefix`; the ptp CNI plugin adds a host-side /128 per Pod);
 * - the Pod ENI: devices of routes that contain the whole delegated prefix
 *   (the ENI's subnet route), other than the default route;
 * - the default-route interface: the device(s) of the lowest-metric IPv6
 *   default route (routes flagged linkdown or dead lose to any live one).
 *
 * Only Ethernet devices qualify (the programs parse an Ethernet header).
 */

import { type Ipv6Prefix, parseIpv6, prefixContains } from "../../core/model/ipv6.ts";
import { PodminError } from "../../core/kit/errors.ts";

/** One route of `ip -6 -j route show`. */
export interface IpRoute {
  dst: string;
  dev?: string;
  type?: string;
  metric?: number;
  gateway?: string;
  flags?: string[];
  nexthops?: { dev?: string; gateway?: string; flags?: string[] }[];
}

/** One link of `ip -j link show`. */
export interface IpLink {
  ifindex: number;
  ifname: string;
  link_type?: string;
  flags?: string[];
}

/** Why an interface is attached. */
export type InterfaceRole = "pod" | "eni" | "default";

/** An interface to attach to. */
export interface AttachTarget {
  ifindex: number;
  name: string;
  roles: InterfaceRole[];
}

/** The outcome of discovery. */
export interface Discovery {
  targets: AttachTarget[];
  /** Devices a route pointed at that cannot be attached, with the reason. */
  skipped: { name: string; reason: string }[];
}

function routePrefix(dst: string): Ipv6Prefix | undefined {
  if (dst === "default") return { network: 0n, length: 0 };
  const [addr, len] = dst.split("/");
  try {
    const length = len === undefined ? 128 : Number(len);
    if (!Number.isInteger(length) || length < 0 || length > 128) return undefined;
    return { network: parseIpv6(addr), length };
  } catch {
    return undefined;
  }
}

function routeDevs(r: IpRoute): string[] {
  if (r.nexthops?.length) return r.nexthops.map((n) => n.dev).filter((d): d is string => !!d);
  return r.dev ? [r.dev] : [];
}

function live(r: IpRoute): boolean {
  const flags = [...(r.flags ?? []), ...(r.nexthops ?? []).flatMap((n) => n.flags ?? [])];
  return !flags.includes("linkdown") && !flags.includes("dead");
}

/** Selects attach targets from routes and links (pure; see the module comment). */
export function selectTargets(
  { routes, links, podPrefix }: { routes: IpRoute[]; links: IpLink[]; podPrefix?: Ipv6Prefix },
): Discovery {
  const roles = new Map<string, Set<InterfaceRole>>();
  const add = (dev: string, role: InterfaceRole) => {
    if (dev === "lo") return;
    if (!roles.has(dev)) roles.set(dev, new Set());
    roles.get(dev)!.add(role);
  };
  const defaults: IpRoute[] = [];
  for (const r of routes) {
    if (r.type !== undefined && r.type !== "unicast") continue;
    const p = routePrefix(r.dst);
    if (!p) continue;
    if (p.length === 0) {
      defaults.push(r);
      continue;
    }
    if (!podPrefix) continue;
    if (p.length > podPrefix.length && prefixContains(podPrefix, p.network)) {
      for (const d of routeDevs(r)) add(d, "pod");
    } else if (p.length <= podPrefix.length && prefixContains(p, podPrefix.network)) {
      for (const d of routeDevs(r)) add(d, "eni");
    }
  }
  const candidates = defaults.some(live) ? defaults.filter(live) : defaults;
  if (candidates.length) {
    const best = Math.min(...candidates.map((r) => r.metric ?? 0));
    for (const r of candidates) {
      if ((r.metric ?? 0) === best) { for (const d of routeDevs(r)) add(d, "default"); }
    }
  }

  const byName = new Map(links.map((l) => [l.ifname, l]));
  const targets: AttachTarget[] = [];
  const skipped: Discovery["skipped"] = [];
  for (const [name, set] of roles) {
    const link = byName.get(name);
    if (!link) {
      skipped.push({ name, reason: "no such link" });
      continue;
    }
    if (link.link_type !== undefined && link.link_type !== "ether") {
      skipped.push({ name, reason: `link type ${link.link_type} is not Ethernet` });
      continue;
    }
    const order: InterfaceRole[] = ["pod", "eni", "default"];
    targets.push({
      ifindex: link.ifindex,
      name,
      roles: order.filter((r) => set.has(r)),
    });
  }
  targets.sort((a, b) => a.ifindex - b.ifindex);
  return { targets, skipped };
}

/** Runs `ip ARGS…` and parses its JSON output. */
export async function ipJson<T>(args: string[]): Promise<T> {
  let out: Deno.CommandOutput;
  try {
    out = await new Deno.Command("ip", { args: ["-j", ...args], stdout: "piped", stderr: "piped" })
      .output();
  } catch (err) {
    throw new PodminError(`cannot run ip: ${(err as Error).message}`, {
      hint: "install iproute2",
      cause: err,
    });
  }
  if (!out.success) {
    throw new PodminError(
      `ip ${args.join(" ")} failed: ${new TextDecoder().decode(out.stderr).trim()}`,
    );
  }
  const text = new TextDecoder().decode(out.stdout).trim();
  return (text === "" ? [] : JSON.parse(text)) as T;
}

/** Every link of this network namespace. */
export function listLinks(): Promise<IpLink[]> {
  return ipJson<IpLink[]>(["link", "show"]);
}

/** Discovers the attach targets of this network namespace. */
export async function discoverTargets(podPrefix?: Ipv6Prefix): Promise<Discovery> {
  const [routes, links] = await Promise.all([
    ipJson<IpRoute[]>(["-6", "route", "show", "table", "main"]),
    listLinks(),
  ]);
  return selectTargets({ routes, links, podPrefix });
}

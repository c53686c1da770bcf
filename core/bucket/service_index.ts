/**
 * `services/index.json`: every Service with its content address and stable
 * VIP. The CLI allocates VIPs from the index's `serviceCIDR` and updates the
 * index through the CAS loop over `serviceIndexObject`.
 */

import { SERVICE_INDEX } from "./bucket_layout.ts";
import type { CasObject } from "../store/cas_update.ts";
import { sha256Hex } from "../kit/digest.ts";
import { PodminError, ValidationError } from "../kit/errors.ts";
import {
  formatIpv6,
  formatIpv6Prefix,
  parseIpv6,
  parseIpv6Prefix,
  prefixContains,
  prefixSize,
} from "../model/ipv6.ts";
import { isDnsLabel } from "../model/names.ts";
import { API_VERSION } from "../model/resources.ts";
import { compareCodeUnits } from "../kit/canonical_json.ts";
import { LIMITS } from "../kit/limits.ts";
import { getIfExists, type ObjectStore } from "../store/object_store.ts";

/** The default Service range: a ULA /112 (65,536 VIPs). */
export const DEFAULT_SERVICE_CIDR = "fd00:504d::/112";

/** One Service in the index. */
export interface ServiceEntry {
  namespace: string;
  name: string;
  /** `sha256:<hex>` of the canonical spec object. */
  spec: string;
  /** The stable IPv6 virtual IP. */
  vip: string;
}

/** The index document. */
export interface ServiceIndex {
  apiVersion: typeof API_VERSION;
  kind: "ServiceIndex";
  generation: number;
  serviceCIDR: string;
  services: ServiceEntry[];
}

/** An empty index with the given range. */
export function emptyServiceIndex(serviceCIDR = DEFAULT_SERVICE_CIDR): ServiceIndex {
  const prefix = parseIpv6Prefix(serviceCIDR);
  if (prefix.length < 64 || prefix.length > 120) {
    throw new ValidationError(
      `service CIDR ${serviceCIDR}: use a prefix length between /64 and /120`,
    );
  }
  return {
    apiVersion: API_VERSION,
    kind: "ServiceIndex",
    generation: 0,
    serviceCIDR: formatIpv6Prefix(prefix),
    services: [],
  };
}

/** Parses and validates index bytes. */
export function parseServiceIndex(bytes: Uint8Array): ServiceIndex {
  let doc: unknown;
  try {
    doc = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(bytes));
  } catch (err) {
    throw new ValidationError(`${SERVICE_INDEX} is not valid JSON: ${(err as Error).message}`);
  }
  const d = doc as Partial<ServiceIndex>;
  const bad = (why: string) => new ValidationError(`${SERVICE_INDEX}: ${why}`);
  if (d === null || typeof d !== "object") throw bad("not an object");
  if (d.apiVersion !== API_VERSION) {
    throw bad(`unsupported apiVersion ${JSON.stringify(d.apiVersion)}`);
  }
  if (d.kind !== "ServiceIndex") throw bad("kind must be ServiceIndex");
  if (!Number.isSafeInteger(d.generation) || d.generation! < 0) {
    throw bad("generation must be a non-negative integer");
  }
  if (typeof d.serviceCIDR !== "string") throw bad("serviceCIDR missing");
  const prefix = parseIpv6Prefix(d.serviceCIDR);
  if (!Array.isArray(d.services)) throw bad("services must be a list");
  const refs = new Set<string>();
  const vips = new Set<string>();
  const services = d.services.map((e, i) => {
    const at = `services[${i}]`;
    if (e === null || typeof e !== "object") throw bad(`${at} is not an object`);
    if (!isDnsLabel(e.namespace) || !isDnsLabel(e.name)) throw bad(`${at} has an invalid name`);
    if (typeof e.spec !== "string" || !/^sha256:[0-9a-f]{64}$/.test(e.spec)) {
      throw bad(`${at}.spec invalid`);
    }
    const vip = formatIpv6(parseIpv6(String(e.vip)));
    if (!prefixContains(prefix, parseIpv6(vip))) {
      throw bad(`${at}.vip ${vip} outside ${d.serviceCIDR}`);
    }
    const ref = `${e.namespace}/${e.name}`;
    if (refs.has(ref)) throw bad(`duplicate service ${ref}`);
    if (vips.has(vip)) throw bad(`duplicate VIP ${vip}`);
    refs.add(ref);
    vips.add(vip);
    return { namespace: e.namespace, name: e.name, spec: e.spec, vip };
  });
  return {
    apiVersion: API_VERSION,
    kind: "ServiceIndex",
    generation: d.generation!,
    serviceCIDR: d.serviceCIDR,
    services,
  };
}

/** Serialises an index (entries sorted by namespace/name). */
export function serializeServiceIndex(index: ServiceIndex): Uint8Array {
  const services = [...index.services].sort((a, b) =>
    compareCodeUnits(a.namespace, b.namespace) || compareCodeUnits(a.name, b.name)
  );
  return new TextEncoder().encode(JSON.stringify({ ...index, services }, null, 1) + "\n");
}

/**
 * Allocates a VIP for `namespace/name`: the first candidate is derived from a
 * hash of the name (so allocation rarely collides across clusters' histories),
 * then linear probing to the first free address. The network address is never
 * used. Throws when the range is full.
 */
export function allocateVip(
  index: ServiceIndex,
  { namespace, name }: { namespace: string; name: string },
): string {
  const prefix = parseIpv6Prefix(index.serviceCIDR);
  const size = prefixSize(prefix);
  const used = new Set(index.services.map((s) => parseIpv6(s.vip)));
  const start = BigInt(`0x${sha256Hex(`${namespace}/${name}`).slice(0, 30)}`) % size;
  for (let i = 0n; i < size; i++) {
    const offset = (start + i) % size;
    if (offset === 0n) continue;
    const addr = prefix.network + offset;
    if (!used.has(addr)) return formatIpv6(addr);
  }
  throw new PodminError(`no free VIP left in ${index.serviceCIDR}`, {
    hint: "delete unused Services; the range is fixed when the first Service is applied",
  });
}

/** `services/index.json` as a CAS object; an absent index starts with the range `serviceCIDR`. */
export function serviceIndexObject(serviceCIDR?: string): CasObject<ServiceIndex> {
  return {
    key: SERVICE_INDEX,
    parse: parseServiceIndex,
    serialize: serializeServiceIndex,
    empty: () => emptyServiceIndex(serviceCIDR),
    contentType: "application/json",
    maxBytes: LIMITS.indexBytes,
  };
}

/** Reads the service index, or undefined when absent. */
export async function readServiceIndex(store: ObjectStore): Promise<ServiceIndex | undefined> {
  const got = await getIfExists(store, SERVICE_INDEX, { maxBytes: LIMITS.indexBytes });
  return got ? parseServiceIndex(got.body) : undefined;
}

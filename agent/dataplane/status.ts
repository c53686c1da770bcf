/**
 * What `podmin-agent dataplane status` prints: the dataplane as the kernel
 * of this network namespace has it, found by introspection (programs by
 * name, our tc filters by handle/priority, maps by the programs' map ids).
 * Works from any process with CAP_SYS_ADMIN/CAP_NET_ADMIN, since the
 * programs are not pinned.
 */

import { compareCodeUnits } from "../../core/canonical_json.ts";
import { formatIpv6 } from "../../core/ipv6.ts";
import {
  type MapInfo,
  openMapById,
  type ProgInfo,
  programIds,
  programInfo,
} from "../../ffi/bpf_info.ts";
import type { BpfMap } from "../../ffi/bpf_map.ts";
import { tcQuery } from "../../ffi/tc.ts";
import { BeMap, formatEndpoint } from "./be_map.ts";
import { CfgMap, type CfgValue } from "./cfg_map.ts";
import { type CtEntry, CtMap, DIR } from "./ct_map.ts";
import { listLinks } from "./interfaces.ts";
import { TC_HANDLE, TC_PRIORITY } from "./loader.ts";
import { MAPS, PROGRAMS, readMaps } from "./maps.ts";
import { StatsMap } from "./stats_map.ts";
import { formatSvcKey, SvcMap } from "./svc_map.ts";

/** One of our filters. */
export interface ReportAttachment {
  interface: string;
  ifindex: number;
  point: "ingress" | "egress";
  programId: number;
  program: string;
}

/** One Service port and its slots. */
export interface ReportServicePort {
  servicePort: string;
  id: number;
  count: number;
  backends: string[];
}

/** One conntrack entry. */
export interface ReportFlow {
  dir: "forward" | "reply" | string;
  proto: "TCP" | "UDP" | string;
  /** Tuple as seen on the wire: `[saddr]:sport -> [daddr]:dport`. */
  match: string;
  /** Tuple it is rewritten to. */
  rewrite: string;
  /** Raw fields (for tests and tools). */
  key: { saddr: string; daddr: string; sport: number; dport: number };
  value: { saddr: string; daddr: string; sport: number; dport: number };
}

/** The whole report. */
export interface DataplaneReport {
  programs: ProgInfo[];
  attachments: ReportAttachment[];
  maps: MapInfo[];
  config?: CfgValue;
  servicePorts: ReportServicePort[];
  conntrack: { entries: number; flows: ReportFlow[] };
  stats: Record<string, number>;
}

const PROTO: Record<number, string> = { 6: "TCP", 17: "UDP" };

/** Our tc filters (handle/priority, program named as ours) on every interface. */
async function ourAttachments(ours: Set<string>): Promise<ReportAttachment[]> {
  const attachments: ReportAttachment[] = [];
  const names = new Map<number, string>();
  for (const link of await listLinks()) {
    for (const point of ["ingress", "egress"] as const) {
      const id = tcQuery({
        ifindex: link.ifindex,
        point,
        handle: TC_HANDLE,
        priority: TC_PRIORITY,
      });
      if (id === undefined) continue;
      const name = names.get(id) ?? programInfo(id)?.name ?? "";
      names.set(id, name);
      if (!ours.has(name)) continue;
      attachments.push({
        interface: link.ifname,
        ifindex: link.ifindex,
        point,
        programId: id,
        program: name,
      });
    }
  }
  return attachments;
}

/** Reads the dataplane state of this network namespace. `maxFlows` bounds the listed flows. */
export async function inspectDataplane(
  options: { maxFlows?: number } = {},
): Promise<DataplaneReport> {
  const ours = new Set<string>(Object.values(PROGRAMS));
  const attachments = await ourAttachments(ours);
  const programs: ProgInfo[] = [];
  for (const id of programIds()) {
    const info = programInfo(id);
    if (info && ours.has(info.name)) programs.push(info);
  }
  // The maps of the attached programs (or, when none is attached, of the newest loaded one).
  const attachedIds = new Set(attachments.map((a) => a.programId));
  const source = programs.filter((p) => attachedIds.has(p.id));
  const chosen = source.length ? source : programs.slice(-1);
  const mapIdSet = new Set(chosen.flatMap((p) => p.mapIds));

  const report: DataplaneReport = {
    programs,
    attachments,
    maps: [],
    servicePorts: [],
    conntrack: { entries: 0, flows: [] },
    stats: {},
  };
  const opened = new Map<string, BpfMap>();
  try {
    for (const id of mapIdSet) {
      const m = openMapById(id);
      if (!m) continue;
      report.maps.push(m.info);
      if (opened.has(m.info.name)) m.map.close();
      else opened.set(m.info.name, m.map);
    }
    const wrap = <T>(name: string, typed: new (map: BpfMap) => T) => {
      const map = opened.get(name);
      return map && new typed(map);
    };
    const content = readMaps({
      cfg: wrap(MAPS.cfg, CfgMap),
      svc: wrap(MAPS.svc, SvcMap),
      be: wrap(MAPS.be, BeMap),
    });
    if (content.config) report.config = content.config;
    for (const p of content.ports) {
      report.servicePorts.push({
        servicePort: formatSvcKey(p.key),
        id: p.id,
        count: p.backends.length,
        backends: p.backends.map((b) => b ? formatEndpoint(b.addr, b.port) : "(missing)"),
      });
    }
    report.servicePorts.sort((a, b) => compareCodeUnits(a.servicePort, b.servicePort));
    const ct = wrap(MAPS.ct, CtMap)?.flows() ?? [];
    report.conntrack.entries = ct.length;
    report.conntrack.flows = ct.slice(0, options.maxFlows ?? Infinity).map(reportFlow);
    report.stats = wrap(MAPS.stats, StatsMap)?.counters() ?? {};
  } finally {
    for (const m of opened.values()) m.close();
  }
  return report;
}

function reportFlow(e: CtEntry): ReportFlow {
  const key = {
    saddr: formatIpv6(e.key.saddr),
    daddr: formatIpv6(e.key.daddr),
    sport: e.key.sport,
    dport: e.key.dport,
  };
  const value = {
    saddr: formatIpv6(e.value.saddr),
    daddr: formatIpv6(e.value.daddr),
    sport: e.value.sport,
    dport: e.value.dport,
  };
  return {
    dir: e.value.dir === DIR.forward
      ? "forward"
      : e.value.dir === DIR.reply
      ? "reply"
      : String(e.value.dir),
    proto: PROTO[e.key.proto] ?? String(e.key.proto),
    match: `[${key.saddr}]:${key.sport} -> [${key.daddr}]:${key.dport}`,
    rewrite: `[${value.saddr}]:${value.sport} -> [${value.daddr}]:${value.dport}`,
    key,
    value,
  };
}

/** The report as text. */
export function formatReport(r: DataplaneReport): string {
  const lines: string[] = [];
  if (!r.programs.length && !r.attachments.length) {
    lines.push("dataplane: not loaded (no Services, or the dataplane is off)");
    return lines.join("\n");
  }
  lines.push(`programs (${r.programs.length}):`);
  for (const p of r.programs) {
    lines.push(
      `  ${p.name.padEnd(15)} id ${p.id}  ${p.type}  tag ${p.tag}  maps ${p.mapIds.join(",")}`,
    );
  }
  lines.push(
    `attachments (tc handle 0x${
      TC_HANDLE.toString(16)
    } priority ${TC_PRIORITY}, ${r.attachments.length}):`,
  );
  for (const a of r.attachments) {
    lines.push(
      `  ${a.interface.padEnd(15)} ifindex ${a.ifindex}  ${
        a.point.padEnd(7)
      } ${a.program}[${a.programId}]`,
    );
  }
  if (r.config) {
    lines.push(
      `config: service CIDR ${
        r.config.serviceCIDR ?? "(none: unmatched VIP traffic passes)"
      }, layout v${r.config.version}`,
    );
  }
  lines.push(`service ports (${r.servicePorts.length}):`);
  for (const s of r.servicePorts) {
    lines.push(
      `  ${s.servicePort}  id ${s.id}  ${s.count} backend(s)${
        s.count ? ": " + s.backends.join(" ") : " (dropped)"
      }`,
    );
  }
  lines.push(
    `conntrack (${r.conntrack.entries} entries${
      r.conntrack.flows.length < r.conntrack.entries ? `, ${r.conntrack.flows.length} shown` : ""
    }):`,
  );
  for (const f of r.conntrack.flows) {
    lines.push(`  ${f.dir.padEnd(7)} ${f.proto} ${f.match}  =>  ${f.rewrite}`);
  }
  lines.push(
    `stats: ${Object.entries(r.stats).map(([k, v]) => `${k}=${v}`).join(" ")}`,
  );
  return lines.join("\n");
}

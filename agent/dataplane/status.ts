/**
 * What `podmin-agent dataplane status` prints: the dataplane as the kernel
 * of this network namespace has it, found by introspection (programs by
 * name, our tc filters by handle/priority, maps by the programs' map ids, the socket programs
 * on the root cgroup v2 whose podmin_sock_cfg names this namespace).
 * Works from any process with CAP_SYS_ADMIN/CAP_NET_ADMIN, since the
 * programs are not pinned.
 */

import { compareCodeUnits } from "../../core/kit/canonical_json.ts";
import { formatIpv6 } from "../../core/model/ipv6.ts";
import {
  type MapInfo,
  openMapById,
  type ProgInfo,
  programIds,
  programInfo,
} from "../../ffi/bpf_info.ts";
import type { BpfMap } from "../../ffi/bpf_map.ts";
import {
  BPF_CGROUP_INET6_CONNECT,
  BPF_CGROUP_UDP6_RECVMSG,
  BPF_CGROUP_UDP6_SENDMSG,
  cgroupQuery,
  closeCgroup,
  netnsCookie,
  openCgroup2Root,
} from "../../ffi/cgroup.ts";
import { tcQuery } from "../../ffi/tc.ts";
import { BeMap, formatEndpoint } from "./be_map.ts";
import { CfgMap, type CfgValue } from "./cfg_map.ts";
import { type CtEntry, CtMap, DIR } from "./ct_map.ts";
import { listLinks } from "./interfaces.ts";
import { TC_HANDLE, TC_PRIORITY } from "./loader.ts";
import { MAPS, PROGRAMS, readMaps, SOCK_PROGRAMS } from "./maps.ts";
import { SockCfgMap } from "./sock_map.ts";
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

/** One of our socket programs on the root cgroup v2 (for this network namespace). */
export interface ReportSocketHook {
  hook: "connect6" | "sendmsg6" | "recvmsg6";
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
  /** Socket programs translating this namespace's host sockets (root cgroup v2). */
  sockets: { cgroup?: string; hooks: ReportSocketHook[]; error?: string };
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

const HOOKS = [
  ["connect6", BPF_CGROUP_INET6_CONNECT],
  ["sendmsg6", BPF_CGROUP_UDP6_SENDMSG],
  ["recvmsg6", BPF_CGROUP_UDP6_RECVMSG],
] as const;

/** Our socket programs on the root cgroup v2 that translate this namespace's sockets. */
function ourSocketHooks(): DataplaneReport["sockets"] {
  const ours = new Set<string>(Object.values(SOCK_PROGRAMS));
  let root: { fd: number; path: string } | undefined;
  try {
    root = openCgroup2Root();
    const cookie = netnsCookie();
    const hooks: ReportSocketHook[] = [];
    for (const [hook, type] of HOOKS) {
      for (const id of cgroupQuery(root.fd, type)) {
        const info = programInfo(id);
        if (!info || !ours.has(info.name)) continue;
        // Cgroup hooks are machine-wide: keep the programs configured for this namespace.
        const cfg = info.mapIds.map((m) => openMapById(m)).filter((m) => m !== undefined);
        try {
          const map = cfg.find((m) => m.info.name === MAPS.sockCfg)?.map;
          if (!map || new SockCfgMap(map).read() !== cookie) continue;
        } finally {
          for (const m of cfg) m.map.close();
        }
        hooks.push({ hook, programId: id, program: info.name });
      }
    }
    return { cgroup: root.path, hooks };
  } catch (err) {
    return { hooks: [], error: err instanceof Error ? err.message : String(err) };
  } finally {
    if (root) closeCgroup(root.fd);
  }
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
    sockets: ourSocketHooks(),
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
  lines.push(
    `socket programs (root cgroup v2${
      r.sockets.cgroup ? ` ${r.sockets.cgroup}` : ""
    }, ${r.sockets.hooks.length}):${r.sockets.error ? ` ${r.sockets.error}` : ""}`,
  );
  for (const h of r.sockets.hooks) {
    lines.push(`  ${h.hook.padEnd(15)} ${h.program}[${h.programId}]`);
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

/**
 * tc (clsact) hooks and cls_bpf filters through libbpf's `bpf_tc_*`, and
 * tcx links (`bpf_program__attach_tcx`, libbpf ≥ 1.3, kernel ≥ 6.6) when the
 * library has them.
 *
 * Netlink requests go to the network namespace of the calling thread.
 */

import { BpfError, check, checkPointer, libbpf } from "./libbpf.ts";
import { BPF_TC_HOOK, BPF_TC_OPTS, Struct } from "./structs.ts";

/** Where a filter runs. */
export type TcAttachPoint = "ingress" | "egress";

/** enum bpf_tc_attach_point. */
const POINTS = { ingress: 1, egress: 2 } as const;
/** BPF_TC_F_REPLACE. */
const TC_F_REPLACE = 1;

/** Identifies one filter: interface, direction, handle and priority. */
export interface TcFilterId {
  ifindex: number;
  point: TcAttachPoint;
  handle: number;
  priority: number;
}

function hook(ifindex: number, attachPoint: number): Uint8Array {
  return new Struct(BPF_TC_HOOK)
    .set("sz", BPF_TC_HOOK.size)
    .set("ifindex", ifindex)
    .set("attach_point", attachPoint)
    .bytes;
}

function opts(
  id: { handle: number; priority: number },
  progFd = 0,
  flags = 0,
): Struct<keyof typeof BPF_TC_OPTS.fields> {
  return new Struct(BPF_TC_OPTS)
    .set("sz", BPF_TC_OPTS.size)
    .set("prog_fd", progFd)
    .set("flags", flags)
    .set("handle", id.handle)
    .set("priority", id.priority);
}

/**
 * Creates the clsact qdisc of an interface. Returns true when this call
 * created it, false when it existed already.
 */
export function tcHookCreate(ifindex: number): boolean {
  const ret = libbpf().sym.bpf_tc_hook_create(hook(ifindex, POINTS.ingress | POINTS.egress));
  if (ret === -17) return false; // EEXIST
  check(ret, "bpf_tc_hook_create", `ifindex ${ifindex}`);
  return true;
}

/** Deletes the clsact qdisc of an interface (and every filter on it). False when absent. */
export function tcHookDestroy(ifindex: number): boolean {
  const ret = libbpf().sym.bpf_tc_hook_destroy(hook(ifindex, POINTS.ingress | POINTS.egress));
  if (ret === -2 || ret === -22 || ret === -19) return false; // ENOENT, EINVAL, ENODEV
  check(ret, "bpf_tc_hook_destroy", `ifindex ${ifindex}`);
  return true;
}

/**
 * Attaches a program as a direct-action cls_bpf filter. With `replace`, an
 * existing filter with the same handle and priority is replaced atomically.
 * Returns the kernel's program id.
 */
export function tcAttach(id: TcFilterId & { progFd: number; replace?: boolean }): number {
  const o = opts(id, id.progFd, id.replace ? TC_F_REPLACE : 0);
  check(
    libbpf().sym.bpf_tc_attach(hook(id.ifindex, POINTS[id.point]), o.bytes),
    "bpf_tc_attach",
    `ifindex ${id.ifindex} ${id.point}`,
  );
  return o.get("prog_id");
}

/** Removes a filter. False when it did not exist. */
export function tcDetach(id: TcFilterId): boolean {
  const ret = libbpf().sym.bpf_tc_detach(hook(id.ifindex, POINTS[id.point]), opts(id).bytes);
  if (ret === -2 || ret === -19) return false; // ENOENT, ENODEV
  check(ret, "bpf_tc_detach", `ifindex ${id.ifindex} ${id.point}`);
  return true;
}

/** The program id of a filter, or undefined when there is none. */
export function tcQuery(id: TcFilterId): number | undefined {
  const o = opts(id);
  const ret = libbpf().sym.bpf_tc_query(hook(id.ifindex, POINTS[id.point]), o.bytes);
  // ENOENT: no filter; EINVAL: no clsact qdisc; ENODEV: interface gone.
  if (ret === -2 || ret === -22 || ret === -19) return undefined;
  check(ret, "bpf_tc_query", `ifindex ${id.ifindex} ${id.point}`);
  return o.get("prog_id");
}

/** True when the library can create tcx links. */
export function tcxAvailable(): boolean {
  return libbpf().hasTcx;
}

/**
 * Attaches a program through a tcx link (the program's expected attach
 * type decides ingress or egress). The link lives until `tcxDetach` or the
 * process exits.
 */
export function tcxAttach(program: Deno.PointerObject, ifindex: number): Deno.PointerObject {
  const fn = libbpf().sym.bpf_program__attach_tcx;
  if (!fn) throw new BpfError("bpf_program__attach_tcx", 95, { detail: "libbpf < 1.3" });
  return checkPointer(fn(program, ifindex, null), "bpf_program__attach_tcx", `ifindex ${ifindex}`);
}

/** Destroys a tcx link (detaches the program). */
export function tcxDetach(link: Deno.PointerObject): void {
  check(libbpf().sym.bpf_link__destroy(link), "bpf_link__destroy");
}

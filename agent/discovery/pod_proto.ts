/**
 * The parts of a Kubernetes `v1.Pod` (protobuf, as kubelet's Pods API sends it) that discovery
 * uses, decoded by hand from `k8s.io/api/core/v1/generated.proto` and
 * `k8s.io/apimachinery/pkg/apis/meta/v1/generated.proto` field numbers:
 *
 * - Pod: metadata = 1 (ObjectMeta), status = 3 (PodStatus)
 * - ObjectMeta: name = 1, namespace = 3, uid = 5, labels = 11, annotations = 12
 *   (map<string,string>)
 * - PodStatus: phase = 1, conditions = 2 (PodCondition: type = 1, status = 2), message = 3, reason = 4,
 *   podIP = 6, containerStatuses = 8, podIPs = 12 (PodIP: ip = 1)
 * - ContainerStatus: name = 1, state = 2, lastState = 3 (ContainerState: waiting = 1
 *   (reason = 1), terminated = 3 (exitCode = 1, reason = 3))
 * - WatchPodsEvent: type = 1 (enum), pod = 2; ListPodsResponse: pods = 1; GetPodResponse: pod = 1
 */

import { fields, text, WireError } from "./protobuf_wire.ts";

/** What discovery knows of a Pod. */
export interface PodInfo {
  namespace: string;
  name: string;
  uid: string;
  labels: Record<string, string>;
  phase: string;
  /** The PodReady condition is True. */
  ready: boolean;
  /** `status.podIPs` (or `status.podIP` when the list is empty). */
  ips: string[];
  /** `metadata.annotations`, when the Pod has any. */
  annotations?: Record<string, string>;
  /**
   * Why it is not running as it should, in kubelet's words, when kubelet says: the Pod's
   * `status.reason` and `status.message` (e.g. `OutOfmemory: Pod was rejected: …`), else each
   * container's waiting reason and last exit, e.g. `web: CrashLoopBackOff (last exit 1: Error)`.
   */
  reason?: string;
}

/** Decodes a `v1.Pod`. Throws `WireError` for malformed bytes. */
export function decodePod(bytes: Uint8Array): PodInfo {
  const pod: PodInfo = {
    namespace: "",
    name: "",
    uid: "",
    labels: {},
    phase: "",
    ready: false,
    ips: [],
  };
  let podIP = "";
  for (const f of fields(bytes)) {
    if (f.wire !== 2) continue;
    if (f.field === 1) decodeMeta(f.value, pod);
    else if (f.field === 3) podIP = decodeStatus(f.value, pod);
  }
  if (!pod.ips.length && podIP) pod.ips.push(podIP);
  if (!pod.name || !pod.uid) throw new WireError("a Pod without metadata.name or metadata.uid");
  return pod;
}

function decodeMeta(bytes: Uint8Array, pod: PodInfo): void {
  for (const f of fields(bytes)) {
    if (f.wire !== 2) continue;
    if (f.field === 1) pod.name = text(f.value);
    else if (f.field === 3) pod.namespace = text(f.value);
    else if (f.field === 5) pod.uid = text(f.value);
    else if (f.field === 11 || f.field === 12) {
      let key = "", value = "";
      for (const e of fields(f.value)) {
        if (e.wire !== 2) continue;
        if (e.field === 1) key = text(e.value);
        else if (e.field === 2) value = text(e.value);
      }
      if (f.field === 11) pod.labels[key] = value;
      else (pod.annotations ??= {})[key] = value;
    }
  }
}

/** Fills phase, readiness and IPs; returns the single `podIP`. */
function decodeStatus(bytes: Uint8Array, pod: PodInfo): string {
  let podIP = "";
  let podReason = "";
  let podMessage = "";
  const containers: string[] = [];
  for (const f of fields(bytes)) {
    if (f.wire !== 2) continue;
    if (f.field === 1) pod.phase = text(f.value);
    else if (f.field === 3) podMessage = text(f.value);
    else if (f.field === 4) podReason = text(f.value);
    else if (f.field === 8) {
      const c = decodeContainerStatus(f.value);
      if (c) containers.push(c);
    } else if (f.field === 6) podIP = text(f.value);
    else if (f.field === 12) {
      for (const ip of fields(f.value)) {
        if (ip.wire === 2 && ip.field === 1) pod.ips.push(text(ip.value));
      }
    } else if (f.field === 2) {
      let type = "", status = "";
      for (const c of fields(f.value)) {
        if (c.wire !== 2) continue;
        if (c.field === 1) type = text(c.value);
        else if (c.field === 2) status = text(c.value);
      }
      if (type === "Ready") pod.ready = status === "True";
    }
  }
  const reason = podReason
    ? `${podReason}${podMessage ? `: ${podMessage}` : ""}`
    : containers.join("; ");
  if (reason) pod.reason = reason.slice(0, 512);
  return podIP;
}

/** `NAME: WAITING-REASON (last exit N: REASON)`, or undefined for a container without either. */
function decodeContainerStatus(bytes: Uint8Array): string | undefined {
  let name = "", waiting = "", last = "";
  for (const f of fields(bytes)) {
    if (f.wire !== 2) continue;
    if (f.field === 1) name = text(f.value);
    else if (f.field === 2 || f.field === 3) {
      for (const s of fields(f.value)) {
        if (s.wire !== 2) continue;
        if (f.field === 2 && s.field === 1) {
          for (const w of fields(s.value)) {
            if (w.wire === 2 && w.field === 1) waiting = text(w.value);
          }
        } else if (f.field === 3 && s.field === 3) {
          let code = 0, why = "";
          for (const t of fields(s.value)) {
            if (t.field === 1 && t.wire === 0) code = Number(BigInt.asIntN(32, t.value));
            else if (t.field === 3 && t.wire === 2) why = text(t.value);
          }
          last = `last exit ${code}${why ? `: ${why}` : ""}`;
        }
      }
    }
  }
  if (!waiting && !last) return undefined;
  return `${name}: ${waiting || "running"}${last ? ` (${last})` : ""}`;
}

/** Event types of `WatchPods`. */
export const EVENT_TYPES = [
  "UNSPECIFIED",
  "ADDED",
  "MODIFIED",
  "DELETED",
  "INITIAL_SYNC_COMPLETE",
] as const;

/** One decoded watch event. */
export interface WatchEvent {
  type: (typeof EVENT_TYPES)[number];
  pod?: PodInfo;
}

/** Decodes a `WatchPodsEvent`. */
export function decodeWatchEvent(bytes: Uint8Array): WatchEvent {
  let type = 0;
  let pod: PodInfo | undefined;
  for (const f of fields(bytes)) {
    if (f.field === 1 && f.wire === 0) type = Number(f.value);
    else if (f.field === 2 && f.wire === 2 && f.value.length) pod = decodePod(f.value);
  }
  const name = EVENT_TYPES[type];
  if (!name) throw new WireError(`unknown WatchPods event type ${type}`);
  return { type: name, pod };
}

/** Decodes a `ListPodsResponse`. */
export function decodeListPods(bytes: Uint8Array): PodInfo[] {
  const pods: PodInfo[] = [];
  for (const f of fields(bytes)) if (f.field === 1 && f.wire === 2) pods.push(decodePod(f.value));
  return pods;
}

/**
 * Why this node reports no Service endpoints, in one line, when kubelet's local Pods API cannot
 * be watched: the kubelet is too old to have it (1.36 needs the gate `PodsAPI`, which vmconfig
 * sets; 1.37 has it on by default), or its socket does not answer. Shown by the agent's status,
 * its node record and `podmin get nodes` instead of zero endpoints that look healthy.
 */

/** The first kubelet minor (1.x) with the local Pods API. */
export const PODS_API_MIN_MINOR = 36;

/** What the problem is judged from. */
export interface PodsApiState {
  /** The node's kubelet version (`--kubelet-version`), when known. */
  kubeletVersion?: string;
  /** The watch's view: synced once kubelet sent its complete list. */
  synced: boolean;
  /** The watch's last error while not synced. */
  error?: string;
  socket: string;
}

/** A kubelet version `1.36.3` or `v1.36.3` as [major, minor], or undefined when not one. */
export function kubeletMinor(version: string): [number, number] | undefined {
  const m = /^v?(\d{1,3})\.(\d{1,3})\.\d{1,4}$/.exec(version);
  return m ? [Number(m[1]), Number(m[2])] : undefined;
}

/** True when the kubelet version is known and older than the first with the local Pods API. */
export function lacksPodsApi(kubeletVersion: string | undefined): boolean {
  const v = kubeletVersion ? kubeletMinor(kubeletVersion) : undefined;
  return !!v && v[0] === 1 && v[1] < PODS_API_MIN_MINOR;
}

/** The one-line problem, or undefined while the Pods API is (or may yet be) fine. */
export function podsApiProblem(s: PodsApiState): string | undefined {
  if (lacksPodsApi(s.kubeletVersion)) {
    return `kubelet ${s.kubeletVersion} has no local Pods API (it needs 1.36 with gate PodsAPI, ` +
      `or 1.37+): this node reports no Service endpoints`;
  }
  if (s.synced || !s.error) return undefined;
  const error = s.error.replace(/\s+/g, " ").slice(0, 200);
  return `kubelet${s.kubeletVersion ? ` ${s.kubeletVersion}` : ""} Pods API ${s.socket} ` +
    `unreachable (${error}): this node reports no Service endpoints`;
}

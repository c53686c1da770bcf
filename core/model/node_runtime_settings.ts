/**
 * The Go runtime settings of the node services Podmin starts, wherever they run. One owner for
 * them; `podmin local` (cli/local/local_node.ts) passes them to its daemons, and the systemd units
 * of vmconfig (`vmconfig/units/*.service`) repeat them literally as `Environment=` lines, which
 * `tests/node/node_runtime_settings_test.ts` holds to these values.
 *
 * Measured (docs/benchmarks.md, node footprint: `tests/bench/node_footprint_bench.ts`, a real node with 20
 * Pods, one run each, 2 shared cores), RSS in MiB, kubelet / containerd / CoreDNS / 20 shims:
 * - Go defaults: 84.2 / 65.3 / 52.8 / 330.5;
 * - `GOGC=50` for all three: 78.2 / 56.7 / 53.0 / 331.9;
 * - `GOGC=25` and `GOMEMLIMIT` 64 / 48 / 32 MiB: 76.9 / 55.0 / 53.2 / 333.0, kubelet's idle CPU
 *   3.3 → 3.9 % of a core.
 * Most of each one's RSS is its program's text (kubelet 55 MiB, CoreDNS 42, containerd 33, each
 * shim 12 of its 16.5, shared between shims) that no Go setting changes. So: `GOGC=50` (the heap
 * grows to 1.5× the live heap between collections instead of 2×) for kubelet and containerd, whose
 * `containerd-shim-runc-v2` children inherit its environment; nothing for CoreDNS (11 MiB anonymous
 * memory: no setting measurably changed it). No GOMEMLIMIT: the tighter pair saved under 2 MiB more
 * for more CPU.
 */

/** The node services with Go runtime settings. */
export type NodeGoService = "kubelet" | "containerd";

/** Each node service's Go runtime environment. */
export const NODE_GO_ENV: Readonly<Record<NodeGoService, Readonly<Record<string, string>>>> = {
  kubelet: { GOGC: "50" },
  containerd: { GOGC: "50" },
};

/** The systemd unit (under vmconfig/units/) of each node service. */
export const NODE_GO_UNITS: Readonly<Record<NodeGoService, string>> = {
  kubelet: "kubelet.service",
  containerd: "containerd.service",
};

/** The Go runtime environment of a node daemon (none for the others). */
export function nodeGoEnv(daemon: string): Readonly<Record<string, string>> {
  return (NODE_GO_ENV as Record<string, Record<string, string>>)[daemon] ?? {};
}

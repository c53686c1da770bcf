/**
 * `deno task bench`: runs every benchmark of the project, one after the other (each in its own
 * process, figures handed over through `$PODMIN_BENCH_JSON`), prints one table — figure, peer
 * figure, ratio, goal, met or not — and writes the same as a flat JSON object (docs/benchmarks.md,
 * "The benchmark run") to `bench/results.json`. A benchmark that exits non-zero (one of its own
 * correctness checks failed) makes the run exit 1; its verdict key is 0 and no row using a
 * figure it wrote counts as met.
 *
 *   deno task bench [--scale] [--smoke] [--only NAME[,NAME…]] [--out FILE]
 *
 * Bounded: the whole run stops at 15 minutes, 40 with `--scale` (a benchmark still running then
 * is killed and its figures are missing, which the table shows). The cluster-scale benchmark
 * (15–20 minutes on its own) and the rollout across 50 agents with a budget of 1 node (about 4
 * minutes) run only with `--scale` (the first also as `deno task bench:scale`); without it their
 * rows say "not run". `--smoke` uses tiny sizes (figures present, not meaningful), runs every
 * benchmark, the cluster-scale one included, and finishes in a few minutes;
 * the suite runs it in two halves (`--only`): tests/bench/bench_smoke_test.ts the benchmarks that
 * need root, tests/bench/bench_smoke_shared_test.ts the rest. `--only` runs the named benchmarks
 * and writes only their figures and the rows made of them.
 * The machine may be shared: ratios are taken within one run, systems interleaved.
 */

import * as path from "node:path";
import { parseArgs } from "node:util";
import { BENCH_JSON_ENV, BENCH_SMOKE_ENV } from "./bench_output.ts";

/** One benchmark program. */
export interface Bench {
  name: string;
  /** Its script, relative to this directory (or absolute). */
  script: string;
  args?: string[];
  smokeArgs?: string[];
  /** Needs root (network namespaces, eBPF). */
  root?: boolean;
  /** Runs only when asked (`--scale`) or in a smoke run. */
  optIn?: boolean;
  /** The prefixes of the figure keys it writes: every figure of ROWS has exactly one owner. */
  keys?: string[];
}

/** Every benchmark of the project, in the order they run. */
export const BENCHES: Bench[] = [
  { name: "deploy spine", script: "deploy_spine_bench.ts", keys: ["deploy_"] },
  // The longest (15–20 minutes: 1,000 simulated agents join over 4 minutes): only with --scale.
  {
    name: "cluster scale",
    script: "cluster_scale_bench.ts",
    optIn: true,
    keys: ["cluster_", "apply_to_", "s3_peer_", "ssm_calls_"],
  },
  { name: "registry", script: "registry_bench.ts", keys: ["registry_"] },
  // containerd over CRI pulling through the registries (issue 35): needs root.
  { name: "pull", script: "pull_bench.ts", root: true, keys: ["pull_"] },
  { name: "identity", script: "identity_bench.ts", keys: ["identity_"] },
  { name: "CLI start", script: "cli_start_bench.ts", keys: ["cli_"] },
  {
    name: "dataplane",
    script: "dataplane_bench.ts",
    args: ["--seconds", "1.5", "--rounds", "6"],
    smokeArgs: [
      "--seconds",
      "0.2",
      "--rounds",
      "1",
      "--cost-rounds",
      "1",
      "--cost-seconds",
      "0.02",
    ],
    root: true,
    keys: ["dataplane_"],
  },
  { name: "mesh", script: "mesh_bench.ts", keys: ["mesh_"] },
  // A real node (podmin local up, 20 Pods; 2 in a smoke run): the node services' memory and idle
  // CPU against what kubelet reserves for them (issue 35). Needs root and the pinned node peers.
  {
    name: "node footprint",
    script: "node_footprint_bench.ts",
    root: true,
    keys: ["node_", "agent_node_"],
  },
  // Rollouts (issue 32): simulated agents on versitygw, 3 with budgets of 1 node and 25 %, 50
  // with 25 % (about a minute); 50 with a budget of 1 node (50 waves, about 4 minutes) only with
  // --scale.
  {
    name: "rollout",
    script: "rollout_bench.ts",
    args: ["--only", "sim", "--cases", "3/1,3/25%,50/25%"],
    smokeArgs: ["--only", "sim", "--cases", "3/1,3/25%,50/25%"],
    keys: ["rollout_3_agents_", "rollout_50_agents_s", "rollout_50_agents_lower_bound_s"],
  },
  {
    name: "rollout 50 agents budget 1",
    script: "rollout_bench.ts",
    args: ["--only", "sim", "--cases", "50/1"],
    smokeArgs: ["--only", "sim", "--cases", "50/1"],
    optIn: true,
    keys: ["rollout_50_agents_budget_1_"],
  },
  // Requests failed during a rollout on real nodes (podmin local + a client node): needs root.
  {
    name: "rollout requests",
    script: "rollout_bench.ts",
    args: ["--only", "requests"],
    smokeArgs: ["--only", "requests"],
    root: true,
    keys: ["rollout_failed_requests"],
  },
];

/**
 * One line of the table. `ratio` is the figure against its peer oriented so that higher is better
 * for Podmin (`higher`: figure/peer; `lower`: peer/figure); `goal` is a bound on that ratio, or,
 * with `absolute`, a bound on the figure itself.
 */
export interface Row {
  key: string;
  label: string;
  figure: string;
  peer: string;
  unit: string;
  better: "higher" | "lower";
  /** The benchmark that produces the figure, when it is an opt-in one. */
  bench?: string;
  goal?: number;
  absolute?: { max?: number; min?: number };
  /**
   * False for counts whose best value is 0 (failed requests), where a ratio is undefined or
   * infinite: the table shows none and results.json has no `<row>_ratio` key; `absolute` decides.
   */
  ratio?: false;
}

/** The table: docs/benchmarks.md names each key. */
export const ROWS: Row[] = [
  // End-to-end pulls (issue 35): containerd over CRI, 200 MiB image, times in seconds.
  {
    key: "pull_redirect_vs_raw",
    label: "containerd pull, S3 store, redirected, vs raw presigned GET",
    figure: "pull_redirect_s",
    peer: "pull_raw_s",
    unit: "s",
    better: "lower",
    goal: 0.95,
  },
  {
    key: "pull_redirect_vs_distribution",
    label: "containerd pull, S3 store, redirected, vs distribution redirected",
    figure: "pull_redirect_s",
    peer: "pull_distribution_redirect_s",
    unit: "s",
    better: "lower",
    goal: 1,
  },
  {
    key: "pull_registry_cpu",
    label: "registry CPU per GiB pulled, redirected, vs distribution redirected",
    figure: "pull_registry_cpu_s_per_gib",
    peer: "pull_distribution_redirect_cpu_s_per_gib",
    unit: "CPU-s/GiB",
    better: "lower",
    absolute: { max: 0.05 },
  },
  {
    key: "pull_fs_vs_distribution",
    label: "containerd pull, filesystem store, vs distribution's filesystem driver",
    figure: "pull_fs_s",
    peer: "pull_distribution_fs_s",
    unit: "s",
    better: "lower",
    goal: 1,
  },
  {
    key: "pull_proxied_vs_distribution",
    label: "containerd pull, S3 store, proxied, vs distribution proxied (reference)",
    figure: "pull_proxied_s",
    peer: "pull_distribution_proxied_s",
    unit: "s",
    better: "lower",
  },
  {
    key: "pull_proxied_cpu",
    label: "registry CPU per GiB pulled, proxied, vs distribution proxied (reference)",
    figure: "pull_registry_proxied_cpu_s_per_gib",
    peer: "pull_distribution_proxied_cpu_s_per_gib",
    unit: "CPU-s/GiB",
    better: "lower",
  },
  {
    key: "registry_s3_vs_raw",
    label: "registry blob GET, S3 store, vs raw S3 GET",
    figure: "registry_s3_blob_mibs",
    peer: "registry_s3_raw_mibs",
    unit: "MiB/s",
    better: "higher",
    goal: 0.9,
  },
  {
    key: "registry_s3_vs_distribution",
    label: "registry blob GET, S3 store, vs distribution",
    figure: "registry_s3_blob_mibs",
    peer: "registry_s3_distribution_mibs",
    unit: "MiB/s",
    better: "higher",
    goal: 1.2,
  },
  {
    key: "registry_fs_vs_raw",
    label: "registry blob GET, filesystem, vs raw file read",
    figure: "registry_fs_blob_mibs",
    peer: "registry_fs_raw_mibs",
    unit: "MiB/s",
    better: "higher",
    goal: 0.8,
  },
  {
    key: "registry_fs_vs_distribution",
    label: "registry blob GET, filesystem, vs distribution",
    figure: "registry_fs_blob_mibs",
    peer: "registry_fs_distribution_mibs",
    unit: "MiB/s",
    better: "higher",
    goal: 1.5,
  },
  {
    key: "registry_s3_cpu_vs_distribution",
    label: "registry server CPU per GiB, S3, vs distribution",
    figure: "registry_s3_cpu_s_per_gib",
    peer: "registry_s3_distribution_cpu_s_per_gib",
    unit: "CPU-s/GiB",
    better: "lower",
    goal: 1,
  },
  {
    key: "registry_fs_cpu_vs_distribution",
    label: "registry server CPU per GiB, filesystem, vs distribution",
    figure: "registry_fs_cpu_s_per_gib",
    peer: "registry_fs_distribution_cpu_s_per_gib",
    unit: "CPU-s/GiB",
    better: "lower",
    goal: 1,
  },
  // The runtime's floor (deno_passthrough.ts): a bare Deno server streaming the same object,
  // untouched ("plain") or with the registry's SHA-256 verification ("verify"). References.
  {
    key: "registry_s3_vs_deno_verify",
    label: "registry blob GET, S3, vs a bare Deno server verifying",
    figure: "registry_s3_blob_mibs",
    peer: "registry_s3_deno_verify_mibs",
    unit: "MiB/s",
    better: "higher",
  },
  {
    key: "registry_s3_deno_plain_vs_raw",
    label: "bare Deno server, S3, no verification, vs raw S3 GET",
    figure: "registry_s3_deno_plain_mibs",
    peer: "registry_s3_raw_mibs",
    unit: "MiB/s",
    better: "higher",
  },
  {
    key: "registry_s3_deno_plain_vs_distribution",
    label: "bare Deno server, S3, no verification, vs distribution",
    figure: "registry_s3_deno_plain_mibs",
    peer: "registry_s3_distribution_mibs",
    unit: "MiB/s",
    better: "higher",
  },
  {
    key: "registry_s3_deno_verify_cpu_vs_distribution",
    label: "bare Deno server verifying, S3: CPU per GiB vs distribution",
    figure: "registry_s3_deno_verify_cpu_s_per_gib",
    peer: "registry_s3_distribution_cpu_s_per_gib",
    unit: "CPU-s/GiB",
    better: "lower",
  },
  {
    key: "registry_fs_vs_deno_verify",
    label: "registry blob GET, filesystem, vs a bare Deno server verifying",
    figure: "registry_fs_blob_mibs",
    peer: "registry_fs_deno_verify_mibs",
    unit: "MiB/s",
    better: "higher",
  },
  {
    key: "registry_fs_deno_plain_vs_raw",
    label: "bare Deno server, filesystem, no verification, vs raw read",
    figure: "registry_fs_deno_plain_mibs",
    peer: "registry_fs_raw_mibs",
    unit: "MiB/s",
    better: "higher",
  },
  {
    key: "registry_rss",
    label: "registry server RSS after the S3 GETs (peer: distribution)",
    figure: "registry_s3_rss_mib",
    peer: "registry_s3_distribution_rss_mib",
    unit: "MiB",
    better: "lower",
    absolute: { max: 96 },
  },
  {
    key: "registry_manifest_p50_vs_distribution",
    label: "manifest by tag p50, S3, vs distribution",
    figure: "registry_manifest_p50_ms",
    peer: "registry_manifest_distribution_p50_ms",
    unit: "ms",
    better: "lower",
  },
  {
    key: "registry_manifest_p99_vs_distribution",
    label: "manifest by tag p99, S3, vs distribution",
    figure: "registry_manifest_p99_ms",
    peer: "registry_manifest_distribution_p99_ms",
    unit: "ms",
    better: "lower",
    goal: 1.2,
  },
  {
    key: "deploy_apply_p99",
    label: "apply → manifest on disk p99 (peer: the poll interval)",
    figure: "deploy_apply_p99_ms",
    peer: "deploy_poll_interval_ms",
    unit: "ms",
    better: "lower",
  },
  {
    key: "deploy_idle_requests",
    label: "agent idle poll: requests per poll (1k Deployments)",
    figure: "deploy_idle_requests_per_poll",
    peer: "deploy_idle_requests_per_poll",
    unit: "requests",
    better: "lower",
    absolute: { max: 1 },
  },
  {
    key: "deploy_agent_rss",
    label: "agent RSS, 1k Deployments + 1k Services, bundle (peer: empty bucket)",
    figure: "deploy_agent_rss_mib",
    peer: "deploy_agent_rss_empty_mib",
    unit: "MiB",
    better: "lower",
    absolute: { max: 64 },
  },
  {
    key: "deploy_agent_idle_cpu",
    label: "agent idle CPU, 1k Deployments + 1k Services (peer: empty bucket)",
    figure: "deploy_agent_idle_cpu_pct",
    peer: "deploy_agent_idle_cpu_empty_pct",
    unit: "% core",
    better: "lower",
    absolute: { max: 0.3 },
  },
  {
    key: "deploy_agent_rss_node",
    label: "agent RSS as nodes run it (mesh, cluster CA), 1k + 1k (peer: without)",
    figure: "deploy_agent_rss_node_mib",
    peer: "deploy_agent_rss_mib",
    unit: "MiB",
    better: "lower",
    absolute: { max: 64 },
  },
  {
    key: "deploy_agent_idle_cpu_node",
    label: "agent idle CPU as nodes run it (mesh, cluster CA) (peer: without)",
    figure: "deploy_agent_idle_cpu_node_pct",
    peer: "deploy_agent_idle_cpu_pct",
    unit: "% core",
    better: "lower",
    absolute: { max: 0.3 },
  },
  {
    key: "deploy_agent_rss_settings",
    label: "agent RSS: runtime settings vs none (reference)",
    figure: "deploy_agent_rss_mib",
    peer: "deploy_agent_rss_unset_mib",
    unit: "MiB",
    better: "lower",
  },
  // The node footprint (issue 35, node_footprint_bench.ts): a real node with 20 Pods.
  // PSS holds the bound: it charges each page once (the shims share their program's text, the
  // agent shares Deno's with every other Deno process), as the kernel does. RSS is the reference.
  {
    key: "node_services_vs_reserved",
    label: "node services PSS, 20 Pods, shims included, vs kubelet systemReserved",
    figure: "node_services_pss_mib",
    peer: "node_reserved_mib",
    unit: "MiB",
    better: "lower",
    goal: 1,
  },
  {
    key: "node_services_rss_vs_reserved",
    label: "node services RSS summed, 20 Pods, vs systemReserved (reference)",
    figure: "node_services_rss_mib",
    peer: "node_reserved_mib",
    unit: "MiB",
    better: "lower",
  },
  {
    key: "agent_node_rss",
    label: "agent RSS on a real node, 20 Pods (peer: the node services' sum)",
    figure: "agent_node_rss_mib",
    peer: "node_services_rss_mib",
    unit: "MiB",
    better: "lower",
    absolute: { max: 64 },
  },
  {
    key: "agent_node_idle_cpu",
    label: "agent idle CPU on a real node, 20 Pods (peer: the node services' sum)",
    figure: "agent_node_idle_cpu_pct",
    peer: "node_services_idle_cpu_pct",
    unit: "% core",
    better: "lower",
    absolute: { max: 0.3 },
  },
  // Cluster scale (issue 18): simulated agents on moto, every request of the cluster counted.
  {
    key: "cluster_scale_nodes",
    label: "cluster scale: simulated agents (goal 1,000)",
    figure: "cluster_scale_nodes",
    peer: "cluster_scale_nodes",
    unit: "agents",
    better: "higher",
    absolute: { min: 1000 },
  },
  {
    key: "cluster_idle_s3_gets",
    label: "cluster idle S3 GETs/min, mesh vs direct polling (scaled)",
    figure: "cluster_idle_s3_gets_per_min_1000_nodes",
    peer: "cluster_idle_s3_gets_per_min_1000_nodes_direct",
    unit: "GET/min",
    better: "lower",
    absolute: { max: 60 },
  },
  {
    key: "cluster_ssm_calls",
    label: "cluster Parameter Store calls/s, batched vs one per value",
    figure: "ssm_calls_per_s_1000_nodes",
    peer: "ssm_calls_per_s_1000_nodes_unbatched",
    unit: "calls/s",
    better: "lower",
    absolute: { max: 40 },
  },
  {
    key: "cluster_apply_p50",
    label: "cluster apply → manifest p50, mesh vs direct (subset)",
    figure: "apply_to_manifest_p50_s_1000_nodes",
    peer: "apply_to_manifest_p50_s_direct",
    unit: "s",
    better: "lower",
  },
  {
    key: "cluster_apply_p99",
    label: "cluster apply → manifest p99 (≤ poll + 1 s), vs direct",
    figure: "cluster_apply_p99",
    peer: "apply_to_manifest_p99_s_direct",
    unit: "s",
    better: "lower",
    absolute: { max: 3 },
  },
  {
    key: "cluster_apply_subset_p99",
    label: "cluster apply → manifest p99, 100 agents: mesh vs direct",
    figure: "apply_to_manifest_p99_s_mesh_subset",
    peer: "apply_to_manifest_p99_s_direct",
    unit: "s",
    better: "lower",
    absolute: { max: 3 },
  },
  {
    key: "cluster_apply_announce_p99",
    label: "cluster apply → announcement at every agent p99 (peer: poll)",
    figure: "apply_to_announce_p99_s_1000_nodes",
    peer: "cluster_poll_interval_s",
    unit: "s",
    better: "lower",
  },
  {
    key: "cluster_fallback_p99",
    label: "cluster apply → manifest p99, coordinator killed vs alive",
    figure: "apply_to_manifest_fallback_p99_s_1000_nodes",
    peer: "apply_to_manifest_p99_s_1000_nodes",
    unit: "s",
    better: "lower",
  },
  {
    key: "cluster_fallback_converged",
    label: "cluster coordinator killed: share of survivors converged",
    figure: "cluster_fallback_converged_fraction",
    peer: "cluster_fallback_converged_fraction",
    unit: "fraction",
    better: "higher",
    absolute: { min: 1 },
  },
  // The same simulation with S3 on moto (the figures above are on versitygw; docs/benchmarks.md).
  {
    key: "cluster_s3_peer_rate",
    label: "cluster scale: S3 peer GETs/s, versitygw vs moto (reference)",
    figure: "s3_peer_gets_per_s",
    peer: "s3_peer_gets_per_s_moto",
    unit: "GET/s",
    better: "higher",
  },
  {
    key: "cluster_idle_s3_gets_moto",
    label: "cluster idle S3 GETs/min on moto (peer: on versitygw)",
    figure: "cluster_idle_s3_gets_per_min_1000_nodes_moto",
    peer: "cluster_idle_s3_gets_per_min_1000_nodes",
    unit: "GET/min",
    better: "lower",
    absolute: { max: 60 },
  },
  {
    key: "cluster_apply_p50_moto",
    label: "cluster apply → manifest p50 on moto (peer: on versitygw)",
    figure: "apply_to_manifest_p50_s_1000_nodes_moto",
    peer: "apply_to_manifest_p50_s_1000_nodes",
    unit: "s",
    better: "lower",
  },
  {
    key: "cluster_apply_p99_moto",
    label: "cluster apply → manifest p99 on moto (≤ poll + 1 s; peer: on versitygw)",
    figure: "cluster_apply_p99_moto",
    peer: "cluster_apply_p99",
    unit: "s",
    better: "lower",
    absolute: { max: 3 },
  },
  {
    key: "cluster_fallback_converged_moto",
    label: "cluster coordinator killed on moto: share of survivors converged",
    figure: "cluster_fallback_converged_fraction_moto",
    peer: "cluster_fallback_converged_fraction",
    unit: "fraction",
    better: "higher",
    absolute: { min: 1 },
  },
  // Changes over the mesh (issue 33 item 1): an apply's bucket requests, node records excluded.
  {
    key: "cluster_requests_per_apply",
    label: "cluster S3 requests per apply, worst of 5 (peer: on moto)",
    figure: "cluster_requests_per_apply",
    peer: "cluster_requests_per_apply_moto",
    unit: "req",
    better: "lower",
    absolute: { max: 50 },
  },
  {
    key: "cluster_requests_per_apply_moto",
    label: "cluster S3 requests per apply on moto, worst of 5 (peer: versitygw)",
    figure: "cluster_requests_per_apply_moto",
    peer: "cluster_requests_per_apply",
    unit: "req",
    better: "lower",
    absolute: { max: 50 },
  },
  // Runtime aborts (issue 33 item 3): worker processes of simulated agents that died on their own.
  {
    key: "cluster_runtime_aborts",
    label: "cluster scale: runtime aborts of agent processes (peer: on moto)",
    figure: "cluster_runtime_aborts",
    peer: "cluster_runtime_aborts_moto",
    unit: "aborts",
    better: "lower",
    absolute: { max: 0 },
  },
  {
    key: "cluster_runtime_aborts_moto",
    label: "cluster scale: runtime aborts of agent processes on moto (peer: versitygw)",
    figure: "cluster_runtime_aborts_moto",
    peer: "cluster_runtime_aborts",
    unit: "aborts",
    better: "lower",
    absolute: { max: 0 },
  },
  // Failover (issue 33 item 2): the coordinator killed, a new one within two leases (15 s each).
  {
    key: "cluster_failover",
    label: "cluster coordinator killed → new coordinator (≤ 2 leases; peer: on moto)",
    figure: "cluster_failover_s",
    peer: "cluster_failover_s_moto",
    unit: "s",
    better: "lower",
    absolute: { max: 30 },
  },
  {
    key: "cluster_failover_moto",
    label: "cluster coordinator killed → new coordinator on moto (peer: on versitygw)",
    figure: "cluster_failover_s_moto",
    peer: "cluster_failover_s",
    unit: "s",
    better: "lower",
    absolute: { max: 30 },
  },
  {
    key: "cluster_leaderless_requests",
    label: "cluster S3 requests per agent and lease while leaderless (peer: on moto)",
    figure: "cluster_leaderless_requests_per_agent_per_lease",
    peer: "cluster_leaderless_requests_per_agent_per_lease_moto",
    unit: "req",
    better: "lower",
    absolute: { max: 1 },
  },
  {
    key: "cluster_leaderless_requests_moto",
    label: "cluster S3 requests per agent and lease while leaderless, moto (peer: versitygw)",
    figure: "cluster_leaderless_requests_per_agent_per_lease_moto",
    peer: "cluster_leaderless_requests_per_agent_per_lease",
    unit: "req",
    better: "lower",
    absolute: { max: 1 },
  },
  {
    key: "identity_vs_openssl",
    label: "Pod certificates issued+written vs openssl per process",
    figure: "identity_certs_per_s",
    peer: "identity_openssl_certs_per_s",
    unit: "certs/s",
    better: "higher",
    goal: 1,
    absolute: { min: 500 },
  },
  {
    key: "cli_help_vs_empty_deno",
    label: "podmin --help from the bundle vs deno run of an empty script",
    figure: "cli_help_ms",
    peer: "cli_empty_deno_ms",
    unit: "ms",
    better: "lower",
    goal: 1 / 3,
  },
  {
    key: "cli_get_deployments_vs_empty_deno",
    label: "podmin get deployments (file://) from the bundle vs empty deno",
    figure: "cli_get_deployments_ms",
    peer: "cli_empty_deno_ms",
    unit: "ms",
    better: "lower",
    goal: 1 / 6,
  },
  {
    key: "dataplane_ebpf_vs_nftables",
    label: "TCP connections via eBPF VIP vs nftables VIP (client-bound)",
    figure: "dataplane_ebpf_conn_per_s",
    peer: "dataplane_nftables_conn_per_s",
    unit: "conn/s",
    better: "higher",
  },
  {
    key: "dataplane_host_socket_vs_packet",
    label: "program ns per connection to a VIP: host socket path vs Pod packet path",
    figure: "dataplane_host_sock_ns_per_conn",
    peer: "dataplane_pod_packet_ns_per_conn",
    unit: "ns",
    better: "lower",
    goal: 1,
  },
  {
    key: "dataplane_new_flow_flat",
    label: "eBPF new-flow packet, 10k Services (1 hot) vs 1",
    figure: "dataplane_new_flow_10k_hot_ns",
    peer: "dataplane_new_flow_1_ns",
    unit: "ns",
    better: "lower",
    goal: 0.8,
  },
  {
    key: "dataplane_established_flat",
    label: "eBPF established packet, 10k Services (1 hot) vs 1",
    figure: "dataplane_established_10k_hot_ns",
    peer: "dataplane_established_1_ns",
    unit: "ns",
    better: "lower",
    goal: 0.8,
  },
  // Cost per packet apart from the client (dataplane_cost.ts): CPU ns the dataplane adds to a
  // packet's path through the node, against kube-proxy's nftables mode (verdict maps).
  ...[1, 1_000, 10_000].flatMap((n): Row[] => [
    {
      key: `dataplane_cost_new_vs_nft_maps_${n}`,
      label: `new-flow packet cost, ${n.toLocaleString("en")} Services: eBPF vs nftables maps`,
      figure: `dataplane_cost_new_ebpf_ns_${n}`,
      peer: `dataplane_cost_new_nft_maps_ns_${n}`,
      unit: "ns",
      better: "lower",
      goal: 1,
    },
    {
      key: `dataplane_cost_est_vs_nft_maps_${n}`,
      label: `established packet cost, ${n.toLocaleString("en")} Services: eBPF vs nftables maps`,
      figure: `dataplane_cost_est_ebpf_ns_${n}`,
      peer: `dataplane_cost_est_nft_maps_ns_${n}`,
      unit: "ns",
      better: "lower",
      goal: 1,
    },
  ]),
  {
    key: "dataplane_cost_new_flat",
    label: "eBPF new-flow packet cost, 10k Services (all hot) vs 1",
    figure: "dataplane_cost_new_ebpf_ns_10000",
    peer: "dataplane_cost_new_ebpf_ns_1",
    unit: "ns",
    better: "lower",
    goal: 0.8,
  },
  {
    key: "dataplane_cost_est_flat",
    label: "eBPF established packet cost, 10k Services (all hot) vs 1",
    figure: "dataplane_cost_est_ebpf_ns_10000",
    peer: "dataplane_cost_est_ebpf_ns_1",
    unit: "ns",
    better: "lower",
    goal: 0.8,
  },
  {
    key: "dataplane_cost_new_vs_nft_chains_10000",
    label: "new-flow packet cost, 10k Services: eBPF vs chain per Service",
    figure: "dataplane_cost_new_ebpf_ns_10000",
    peer: "dataplane_cost_new_nft_chains_ns_10000",
    unit: "ns",
    better: "lower",
  },
  {
    key: "dataplane_cost_nft_maps_new_flat",
    label: "nftables maps new-flow packet cost, 10k vs 1 (reference)",
    figure: "dataplane_cost_new_nft_maps_ns_10000",
    peer: "dataplane_cost_new_nft_maps_ns_1",
    unit: "ns",
    better: "lower",
  },
  // Rollouts (issue 32, rollout_bench.ts): apply → every simulated agent on the new spec, against
  // the lower bound waves × (Pod start + minReadySeconds); failed requests on real nodes.
  ...[3, 50].flatMap((n): Row[] =>
    (["", "_budget_1"] as const).map((budget) => ({
      key: `rollout_${n}_agents${budget}`,
      label: `rollout, ${n} simulated agents, budget ${budget ? "1 node" : "25 %"} (peer: bound)`,
      figure: `rollout_${n}_agents${budget}_s`,
      peer: `rollout_${n}_agents${budget}_lower_bound_s`,
      unit: "s",
      better: "lower",
      ...(n === 50 && budget ? { bench: "rollout 50 agents budget 1" } : {}),
    }))
  ),
  {
    key: "rollout_failed_requests",
    label: "failed requests, rollout (peer: every node in place at once)",
    figure: "rollout_failed_requests",
    peer: "rollout_failed_requests_all_at_once",
    unit: "requests",
    better: "lower",
    absolute: { max: 0 },
    ratio: false,
  },
  {
    key: "mesh_pod_ready_p50",
    label: "Pod Ready → 50 agents' snapshots p50 (peer: all polling)",
    figure: "mesh_pod_ready_p50_ms",
    peer: "mesh_poll_baseline_p50_ms",
    unit: "ms",
    better: "lower",
  },
  {
    key: "mesh_pod_ready_p99",
    label: "Pod Ready → 50 agents' snapshots p99 (peer: all polling)",
    figure: "mesh_pod_ready_p99_ms",
    peer: "mesh_poll_baseline_p99_ms",
    unit: "ms",
    better: "lower",
    absolute: { max: 1000 },
  },
  {
    key: "mesh_pod_ready_vs_bucket_get",
    label: "Pod Ready → 50 snapshots p50 vs one conditional GET",
    figure: "mesh_pod_ready_p50_ms",
    peer: "mesh_moto_get_p50_ms",
    unit: "ms",
    better: "lower",
  },
  {
    key: "mesh_snapshots_per_change",
    label: "snapshot messages per change (peer: agents)",
    figure: "mesh_snapshots_per_change",
    peer: "mesh_agents",
    unit: "messages",
    better: "lower",
    goal: 1,
  },
  {
    key: "mesh_new_service_snapshot_p99",
    label: "new Service + Pod Ready → 50 snapshots p99 (peer: poll)",
    figure: "mesh_new_service_snapshot_p99_ms",
    peer: "mesh_services_poll_interval_ms",
    unit: "ms",
    better: "lower",
  },
  {
    key: "mesh_new_service_dns_p50",
    label: "new Service → CoreDNS answers p50 (peer: poll + reload)",
    figure: "mesh_new_service_dns_p50_ms",
    peer: "mesh_dns_poll_plus_reload_ms",
    unit: "ms",
    better: "lower",
  },
  {
    key: "mesh_new_service_dns_p99",
    label: "new Service → CoreDNS answers p99 (peer: poll + reload)",
    figure: "mesh_new_service_dns_p99_ms",
    peer: "mesh_dns_poll_plus_reload_ms",
    unit: "ms",
    better: "lower",
  },
  {
    key: "mesh_snapshot_to_dns_p99",
    label: "snapshot announcing a Service → CoreDNS answers p99 (peer: reload)",
    figure: "mesh_snapshot_to_dns_p99_ms",
    peer: "mesh_coredns_reload_ms",
    unit: "ms",
    better: "lower",
    absolute: { max: 1000 },
  },
];

for (const row of ROWS) if (row.key.startsWith("cluster_")) row.bench = "cluster scale";

/**
 * The results key of a benchmark's verdict: 1 when it exited 0 (every correctness check it makes
 * passed), 0 when it failed or was killed, null when it did not run.
 */
export function verdictKey(bench: string): string {
  return `bench_${bench.toLowerCase().replace(/[^a-z0-9]+/g, "_")}_passed`;
}

/** The benchmark whose `keys` name `figure` (undefined when none does). */
export function ownerOf(figure: string, benches: Bench[] = BENCHES): Bench | undefined {
  return benches.find((b) => b.keys?.some((k) => figure.startsWith(k)));
}

/**
 * The rows a run of `benches` fills: with every benchmark, all of them; with some (`--only`), the
 * rows whose figure and peer those benchmarks write.
 */
export function rowsOf(benches: Bench[] = BENCHES): Row[] {
  if (benches === BENCHES) return ROWS;
  const names = new Set(benches.map((b) => b.name));
  const mine = (k: string) => names.has(ownerOf(k)?.name ?? "");
  return ROWS.filter((r) => mine(r.figure) && mine(r.peer));
}

/**
 * Every key results.json holds: the figures, then each row's ratio and met (1/0), then each
 * benchmark's verdict.
 */
export function expectedKeys(benches: Bench[] = BENCHES): string[] {
  const rows = rowsOf(benches);
  const figures = new Set(rows.flatMap((r) => [r.figure, r.peer]));
  return [
    ...figures,
    ...rows.flatMap((r) => [...(r.ratio === false ? [] : [`${r.key}_ratio`]), `${r.key}_met`]),
    ...benches.map((b) => verdictKey(b.name)),
  ];
}

/** The benchmarks `--only` names (comma-separated names, as in BENCHES); throws on an unknown one. */
export function selectBenches(only: string): Bench[] {
  const names = only.split(",").map((n) => n.trim()).filter(Boolean);
  const unknown = names.filter((n) => !BENCHES.some((b) => b.name === n));
  if (unknown.length || !names.length) {
    throw new Error(
      `--only: unknown benchmark ${JSON.stringify(unknown.join(",") || only)}; the benchmarks: ${
        BENCHES.map((b) => b.name).join(", ")
      }`,
    );
  }
  return BENCHES.filter((b) => names.includes(b.name));
}

const TOTAL_MS = 15 * 60_000;
const TOTAL_WITH_SCALE_MS = 40 * 60_000;

/** How one benchmark ended: `passed` (exit 0), `failed` (non-zero or killed), or `skipped`. */
type Outcome = "passed" | "failed" | "skipped";

async function runBench(
  b: Bench,
  options: { smoke: boolean; json: string; deadline: number },
): Promise<Outcome> {
  if (b.root && Deno.uid() !== 0) {
    console.log(`\n== ${b.name}: skipped (needs root); its figures are missing`);
    return "skipped";
  }
  console.log(`\n== ${b.name}`);
  const child = new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "--allow-all",
      path.resolve(import.meta.dirname!, b.script),
      ...(options.smoke ? b.smokeArgs ?? [] : b.args ?? []),
    ],
    env: { [BENCH_JSON_ENV]: options.json, [BENCH_SMOKE_ENV]: options.smoke ? "1" : "0" },
    stdin: "null",
  }).spawn();
  const timer = setTimeout(() => {
    console.log(`== ${b.name}: killed at the run's time bound`);
    child.kill("SIGKILL");
  }, Math.max(0, options.deadline - Date.now()));
  const status = await child.status;
  clearTimeout(timer);
  if (status.success) return "passed";
  console.log(
    `== ${b.name}: FAILED (${
      status.signal ? `killed by ${status.signal}` : `exited ${status.code}`
    }); its figures do not count as met`,
  );
  return "failed";
}

function evaluate(row: Row, figures: Record<string, number>) {
  const f = figures[row.figure], p = figures[row.peer];
  // Equal figures are a ratio of 1, also when both are 0 (e.g. no runtime aborts on either peer).
  const ratio = row.ratio === false ? NaN : f === p ? 1 : row.better === "higher" ? f / p : p / f;
  let met = Number.isFinite(f);
  if (row.goal !== undefined) met &&= ratio >= row.goal;
  if (row.absolute?.max !== undefined) met &&= f <= row.absolute.max;
  if (row.absolute?.min !== undefined) met &&= f >= row.absolute.min;
  const goals = [
    row.goal !== undefined ? `ratio ≥ ${+row.goal.toPrecision(3)}` : "",
    row.absolute?.max !== undefined ? `≤ ${row.absolute.max} ${row.unit}` : "",
    row.absolute?.min !== undefined ? `≥ ${row.absolute.min} ${row.unit}` : "",
  ].filter(Boolean).join(", ");
  return { f, p, ratio, met, goals: goals || "—" };
}

/** What `runAll` returns: the flat results object and the benchmarks that failed. */
export interface RunAllResult {
  results: Record<string, number>;
  /** Names of the benchmarks that exited non-zero or were killed. */
  failed: string[];
}

/**
 * Runs the benchmarks (`benches`, default every one) and writes the results. A benchmark that
 * exits non-zero (a correctness check of its own failed) or is killed is listed in `failed`, its
 * verdict key is 0, and every row using a figure it wrote is not met.
 */
export async function runAll(
  options: { smoke: boolean; scale?: boolean; out: string; benches?: Bench[] },
): Promise<RunAllResult> {
  const benches = options.benches ?? BENCHES;
  // A subset of BENCHES (`--only`) fills only its own rows; stand-ins (tests) fill the whole table.
  const subset = benches !== BENCHES && benches.every((b) => BENCHES.includes(b));
  const rows = subset ? rowsOf(benches) : ROWS;
  const withOptIn = options.smoke || options.scale === true;
  const deadline = Date.now() + (options.scale ? TOTAL_WITH_SCALE_MS : TOTAL_MS);
  const json = await Deno.makeTempFile({ prefix: "podmin-bench-", suffix: ".json" });
  const notRun = new Set<string>();
  const outcomes = new Map<string, Outcome>();
  // Figure key -> the failed benchmark that wrote it.
  const fromFailed = new Map<string, string>();
  const readFigures = async (): Promise<Record<string, number>> =>
    JSON.parse(await Deno.readTextFile(json));
  try {
    await Deno.writeTextFile(json, "{}");
    for (const b of benches) {
      if (b.optIn && !withOptIn) {
        notRun.add(b.name);
        console.log(`\n== ${b.name}: not run (deno task bench --scale, or deno task bench:scale)`);
        continue;
      }
      const before = await readFigures();
      const outcome = await runBench(b, { smoke: options.smoke, json, deadline });
      outcomes.set(b.name, outcome);
      if (outcome === "failed") {
        for (const [k, v] of Object.entries(await readFigures())) {
          if (!(k in before) || !Object.is(before[k], v)) fromFailed.set(k, b.name);
        }
      }
    }
    const figures = await readFigures();
    const results: Record<string, number> = {};
    for (const k of new Set(rows.flatMap((r) => [r.figure, r.peer]))) {
      results[k] = figures[k] ?? NaN;
    }
    const fmt = (x: number) =>
      !Number.isFinite(x) ? "—" : Math.abs(x) >= 100 ? x.toFixed(0) : x.toPrecision(3);
    console.log(
      `\n${options.smoke ? "SMOKE RUN (tiny sizes: figures not meaningful)\n" : ""}` +
        `${"what".padEnd(62)} ${"figure".padStart(9)} ${"peer".padStart(9)} ${"unit".padEnd(9)} ` +
        `${"ratio".padStart(6)}  ${"goal".padEnd(22)} met`,
    );
    for (const row of rows) {
      if (row.bench && notRun.has(row.bench)) {
        console.log(`${row.label.padEnd(62)} not run (--scale)`);
        continue;
      }
      const e = evaluate(row, figures);
      const failedBench = fromFailed.get(row.figure) ?? fromFailed.get(row.peer);
      const met = e.met && failedBench === undefined;
      if (row.ratio !== false) results[`${row.key}_ratio`] = e.ratio;
      results[`${row.key}_met`] = met ? 1 : 0;
      console.log(
        `${row.label.padEnd(62)} ${fmt(e.f).padStart(9)} ${fmt(e.p).padStart(9)} ${
          row.unit.padEnd(9)
        } ${fmt(e.ratio).padStart(6)}  ${e.goals.padEnd(22)} ${
          failedBench !== undefined
            ? `NO (${failedBench} failed)`
            : e.goals === "—"
            ? ""
            : met
            ? "yes"
            : "NO"
        }`,
      );
    }
    const failed: string[] = [];
    for (const b of benches) {
      const outcome = outcomes.get(b.name);
      results[verdictKey(b.name)] = outcome === "passed" ? 1 : outcome === "failed" ? 0 : NaN;
      if (outcome === "failed") failed.push(b.name);
    }
    await Deno.mkdir(path.dirname(options.out), { recursive: true });
    // NaN is not JSON: a missing figure is written as null.
    await Deno.writeTextFile(options.out, JSON.stringify(results, null, 2) + "\n");
    console.log(`\nwritten: ${options.out}`);
    if (failed.length) {
      console.log(
        `FAILED: ${failed.length} benchmark(s) failed their own checks: ${failed.join(", ")}`,
      );
    }
    return { results, failed };
  } finally {
    await Deno.remove(json).catch(() => {});
  }
}

if (import.meta.main) {
  const { values } = parseArgs({
    args: Deno.args,
    options: {
      smoke: { type: "boolean", default: false },
      scale: { type: "boolean", default: false },
      only: { type: "string" },
      out: { type: "string", default: path.join(import.meta.dirname!, "../../bench/results.json") },
    },
  });
  const { failed } = await runAll({
    smoke: values.smoke,
    scale: values.scale,
    out: path.resolve(values.out),
    benches: values.only === undefined ? undefined : (() => {
      try {
        return selectBenches(values.only);
      } catch (e) {
        console.error((e as Error).message);
        Deno.exit(2);
      }
    })(),
  });
  Deno.exit(failed.length ? 1 : 0);
}

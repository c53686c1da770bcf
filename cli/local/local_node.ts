/**
 * `podmin local`: a real single-node Podmin cluster on this Linux host.
 *
 * Input: a bucket (the filesystem store under the state directory by default),
 * node programs (`--bin-dir` or the pinned catalogue), this host's facts.
 * Effect: a node directory under the state directory holding the files
 * vmconfig's generators render for a cloud node (plus the printed host
 * overrides), a persistent mount namespace that shows them at their real
 * paths, and four daemons in it — containerd, podmin-agent (manifests, the
 * loopback registry, the endpoint mesh and the Service zone), CoreDNS (Service
 * names, on the node's DNS address) and a standalone kubelet — on the host's
 * network.
 * `state.json` records everything `up` made, written before each step, so
 * `down` (or an `up` after a crash) removes exactly that: daemons by PID and
 * command line, Pods (CNI releases their addresses and routes), processes left
 * in the namespace, mounts, created mount points, cgroups kubelet created, the
 * DNS address it added to the host's loopback.
 */

import * as path from "node:path";
import { AGENT_ENV } from "../../core/model/agent_runtime_settings.ts";
import { nodeGoEnv } from "../../core/model/node_runtime_settings.ts";
import { LOCAL_DEFAULTS } from "./local_defaults.ts";
import {
  IDENTITY_WRITES,
  imageTagKey,
  parseImageRepository,
} from "../../core/bucket/bucket_layout.ts";
import { generateKeyPair, privateKeyPem } from "../../core/crypto/certificates.ts";
import { newCaPem } from "../setup/cluster_cas.ts";
import { PodminError } from "../../core/kit/errors.ts";
import { getIfExists, type ObjectStore } from "../../core/store/object_store.ts";
import { createBucket, openStore } from "../../core/store/store_url.ts";
import { writeFileAtomic } from "../../core/store/atomic_write.ts";
import {
  mirroredImageRef,
  mirrorPathOf,
  parseUpstreamRef,
  REGISTRY_HOSTNAME,
} from "../../core/model/image_ref.ts";
import { openImageSource } from "../../registry/image_source.ts";
import { writeImage } from "../../registry/image_writer.ts";
import { UpstreamSource } from "../../registry/upstream.ts";
import { NODE_DNS, renderNodeFiles } from "../../vmconfig/node_files.ts";
import {
  applyHostOverrides,
  type HostFacts,
  type Override,
  readHostFacts,
} from "./host_overrides.ts";
import type { NodeBinaries } from "./node_binaries.ts";
import {
  addLoopbackAddress,
  dnsListening,
  hasLoopbackAddress,
  localDnsAddress,
  removeLoopbackAddress,
} from "./node_dns.ts";
import {
  createMountPoints,
  createNamespace,
  exists,
  namespaceId,
  type NodeBind,
  processesIn,
  removeMountPoints,
  runOrThrow,
  unmountIfMounted,
} from "./node_namespace.ts";
import {
  type DaemonRecord,
  isRunning,
  startDaemon,
  stopDaemon,
  waitUntil,
} from "./node_processes.ts";
import { writePauseImageLayout } from "./pause_image.ts";

/** The daemons, in start order. */
export const DAEMONS = ["containerd", "podmin-agent", "coredns", "kubelet"] as const;
type DaemonName = typeof DAEMONS[number];

/** What `up` made, as recorded in `<state-dir>/state.json`. */
export interface LocalState {
  apiVersion: "podmin.dev/v1";
  kind: "LocalNode";
  bucket: string;
  cluster: string;
  nodeGroup: string;
  registryPort: number;
  podPrefix: string;
  containerdVersion?: string;
  kubeletVersion?: string;
  corednsVersion?: string;
  /** Where CoreDNS answers and kubelet sends the Pods' queries (`localDnsAddress`). */
  dnsAddress?: string;
  /** Addresses `up` added to the host's loopback (the DNS address unless it was there). */
  hostAddresses?: string[];
  /** Mount points created on the host (outermost first). */
  createdPaths: string[];
  /** Mounts made in the host's namespace (namespace directory, tmpfs). */
  hostMounts: string[];
  /** The node's mount namespace file, once created. */
  mountNs?: string;
  daemons: Partial<Record<DaemonName, DaemonRecord>>;
  /** cgroup directories kubelet's Pods live under that did not exist before `up`. */
  newCgroups: string[];
  overrides: Override[];
  /** argv of podmin-agent (without subcommand): `down` runs its `dataplane detach`. */
  agentCommand?: string[];
}

/** The node directory layout under the state directory. */
export function nodePaths(stateDir: string) {
  const root = path.join(stateDir, "node");
  return {
    root,
    state: path.join(stateDir, "state.json"),
    nsDir: path.join(stateDir, "ns"),
    logs: path.join(stateDir, "logs"),
    bin: path.join(root, "usr/local/bin"),
    defaultBucket: `file://${path.join(stateDir, "bucket")}`,
    agentState: path.join(root, "run/podmin/agent"),
    runPodmin: path.join(root, "run/podmin"),
  };
}

/** Real paths the node's files live at, each backed by a directory under the node root. */
function nodeBinds(root: string): NodeBind[] {
  const dirs = [
    "/etc/containerd",
    "/etc/podmin",
    "/etc/cni/net.d",
    "/opt/cni/bin",
    "/usr/local/sbin",
    "/var/lib/containerd",
    "/var/lib/kubelet",
    "/var/lib/cni",
    "/var/log/pods",
    "/var/log/containers",
    "/run/containerd",
    "/run/podmin",
    "/run/netns",
  ];
  return [
    ...dirs.map((d) => ({ source: path.join(root, d), target: d })),
    { source: path.join(root, "etc/crictl.yaml"), target: "/etc/crictl.yaml", file: true },
  ];
}

/** A local node operation failed; the message says which step and why. */
export class LocalNodeError extends PodminError {}

/** Fails unless this is Linux and the process is root (namespaces, mounts, containers). */
export function requireLocalHost(): void {
  if (Deno.build.os !== "linux") throw new LocalNodeError("podmin local needs Linux");
  if (Deno.uid() !== 0) {
    throw new LocalNodeError("podmin local needs root", { hint: "run it with sudo" });
  }
}

/** Reads the state file; undefined when there is none. */
export async function readState(stateDir: string): Promise<LocalState | undefined> {
  let text: string;
  try {
    text = await Deno.readTextFile(nodePaths(stateDir).state);
  } catch (err) {
    if (err instanceof Deno.errors.NotFound) return undefined;
    throw err;
  }
  const s = JSON.parse(text) as LocalState;
  if (s?.kind !== "LocalNode" || !Array.isArray(s.createdPaths) || !s.daemons) {
    throw new LocalNodeError(`${nodePaths(stateDir).state} is not a local node state file`, {
      hint: "remove it by hand if no local node is running",
    });
  }
  return s;
}

async function writeState(stateDir: string, s: LocalState): Promise<void> {
  await writeFileAtomic(nodePaths(stateDir).state, JSON.stringify(s, null, 2) + "\n");
}

/** Options of `localUp`. */
export interface LocalUpOptions {
  stateDir: string;
  bucket?: string;
  binaries: NodeBinaries;
  /** argv that runs podmin-agent (its subcommand and flags are appended). */
  agentCommand: string[];
  cluster: string;
  nodeGroup: string;
  podPrefix: string;
  registryPort: number;
  sandboxImage: string;
  /** The agent's index poll and value refresh intervals (agent defaults when absent). */
  interval?: string;
  secretsInterval?: string;
  /**
   * Where the agent serves the endpoint mesh and the address peers reach it at (default
   * 127.0.0.1:0 and 127.0.0.1: a single node). Another node joins when both are reachable from it.
   */
  mesh?: { listen: string; advertise: string };
  /** Override the detected host facts (tests). */
  host?: HostFacts;
  log: (line: string) => void;
  timeoutMs?: number;
}

/** The status of every daemon of a recorded node. */
export async function daemonsRunning(s: LocalState): Promise<Record<DaemonName, boolean>> {
  const out = {} as Record<DaemonName, boolean>;
  for (const d of DAEMONS) out[d] = s.daemons[d] ? await isRunning(s.daemons[d]!) : false;
  return out;
}

/** Brings the local node up; idempotent while it runs, recovering after a crash. */
export async function localUp(o: LocalUpOptions): Promise<LocalState> {
  requireLocalHost();
  const p = nodePaths(o.stateDir);
  const previous = await readState(o.stateDir);
  if (previous) {
    const resumed = await resumeNode(o, previous);
    if (resumed) return resumed;
  }

  const bucket = o.bucket ?? p.defaultBucket;
  const state = newState(o, bucket);
  await Deno.mkdir(p.logs, { recursive: true });
  await writeState(o.stateDir, state);
  if (bucket === p.defaultBucket && await createBucket(bucket)) o.log(`created ${bucket}`);
  const store = openStore(bucket);
  await writeNodeFiles(o, state);
  await makePrivateView(o, state);

  // 3. The sandbox image in the bucket: mirrored when reachable, else built here.
  await ensureSandboxImage({ store, ref: o.sandboxImage, log: o.log });

  // 4. The daemons, each waited for.
  await startDaemons({ ...o, state, bucket });
  o.log(`local node up: bucket ${bucket}, Pods from ${o.podPrefix}`);
  return state;
}

/**
 * A recorded node: returned as it is when every daemon runs, with what is down restarted when its
 * namespace is intact; removed (undefined returned) when it lost its namespace.
 */
async function resumeNode(
  o: LocalUpOptions,
  previous: LocalState,
): Promise<LocalState | undefined> {
  const p = nodePaths(o.stateDir);
  const running = await daemonsRunning(previous);
  if (Object.values(running).every(Boolean)) {
    o.log(`local node already up (state ${p.state})`);
    return previous;
  }
  const down = DAEMONS.filter((d) => !running[d]);
  if (previous.mountNs && await namespaceId(previous.mountNs)) {
    // The node's files and namespace are intact: restart only what is down.
    o.log(`local node partly down (${down.join(", ")}): restarting ${down.join(", ")}`);
    // The node keeps what it was brought up with; only the programs' paths come from here.
    await startDaemons({
      ...o,
      state: previous,
      bucket: previous.bucket,
      cluster: previous.cluster,
      nodeGroup: previous.nodeGroup,
    });
    return previous;
  }
  o.log(`a previous local node lost its namespace (${down.join(", ")} down): removing it first`);
  await localDown({ stateDir: o.stateDir, log: o.log });
  return undefined;
}

/** The state of a node about to be made: nothing created yet. */
function newState(o: LocalUpOptions, bucket: string): LocalState {
  return {
    apiVersion: "podmin.dev/v1",
    kind: "LocalNode",
    bucket,
    cluster: o.cluster,
    nodeGroup: o.nodeGroup,
    registryPort: o.registryPort,
    podPrefix: o.podPrefix,
    containerdVersion: o.binaries.containerdVersion,
    kubeletVersion: o.binaries.kubeletVersion,
    corednsVersion: o.binaries.corednsVersion,
    dnsAddress: localDnsAddress(o.podPrefix),
    hostAddresses: [],
    createdPaths: [],
    hostMounts: [],
    daemons: {},
    newCgroups: [],
    overrides: [],
    agentCommand: o.agentCommand,
  };
}

/** Step 1. Files: the programs, then every node file from vmconfig's generators, then overrides. */
async function writeNodeFiles(o: LocalUpOptions, state: LocalState): Promise<void> {
  const p = nodePaths(o.stateDir);
  o.log(
    `node programs: containerd ${o.binaries.containerdVersion}, kubelet ${o.binaries.kubeletVersion}, ` +
      `CoreDNS ${o.binaries.corednsVersion}`,
  );
  await installPrograms(p.root, o.binaries);
  const sandboxRef = parseUpstreamRef(o.sandboxImage);
  const files = await renderNodeFiles({
    containerdVersion: o.binaries.containerdVersion,
    kubeletVersion: o.binaries.kubeletVersion,
    sandboxImage: mirroredImageRef(sandboxRef, REGISTRY_HOSTNAME),
    socketGid: 0,
    registryHostname: REGISTRY_HOSTNAME,
    registryHost: "127.0.0.1",
    registryPort: o.registryPort,
    podPrefix: o.podPrefix,
    // Pods ask CoreDNS on the node's DNS address; it asks the host's resolvers for other names.
    dnsAddress: state.dnsAddress!,
    dnsUpstream: "/etc/resolv.conf",
  });
  state.overrides = applyHostOverrides(files, o.host ?? await readHostFacts());
  for (const ov of state.overrides) {
    o.log(`override for this host: ${ov.file}: ${ov.change} (${ov.reason})`);
  }
  for (const [real, content] of Object.entries(files)) {
    const at = path.join(p.root, real);
    await Deno.mkdir(path.dirname(at), { recursive: true });
    await Deno.writeTextFile(at, content);
  }
  await Deno.mkdir(path.join(p.root, "etc/podmin/manifests"), { recursive: true });
  o.log(`cluster DNS (CoreDNS, kubelet's clusterDNS): ${state.dnsAddress}`);
}

/** Step 2. The private view: mount points (recorded first), tmpfs for values, the namespace. */
async function makePrivateView(o: LocalUpOptions, state: LocalState): Promise<void> {
  const p = nodePaths(o.stateDir);
  const binds = nodeBinds(p.root);
  state.createdPaths = await createMountPoints(binds);
  await writeState(o.stateDir, state);
  await Deno.mkdir(p.runPodmin, { recursive: true });
  await runOrThrow(["mount", "-t", "tmpfs", "-o", "mode=0755,size=64m", "tmpfs", p.runPodmin]);
  state.hostMounts.push(p.runPodmin);
  state.hostMounts.unshift(p.nsDir);
  await writeState(o.stateDir, state);
  state.mountNs = await createNamespace({ nsDir: p.nsDir, binds });
  state.hostMounts.push(state.mountNs);
  await writeState(o.stateDir, state);
}

/** The local workload CA key as the agent sees it (the node's /run/podmin is a tmpfs). */
const LOCAL_CA_KEY = "/run/podmin/identity/workload-ca-key.pem";
/** The local cluster CA (certificate and key: the mesh's node certificates), on the tmpfs too. */
const LOCAL_CLUSTER_CA = "/run/podmin/identity/cluster-ca.pem";

/**
 * The local node's workload CA key: a cloud cluster keeps it in Parameter Store; a local node keeps
 * it on its tmpfs only, so it is made anew after a reboot. A new key means a new CA: the CA state
 * and leader lease made for the old key are removed from the bucket, and the agent bootstraps a
 * fresh CA (its Pods' certificates are reissued).
 */
async function ensureLocalCaKey(
  o: { runPodmin: string; store: ObjectStore; log: (line: string) => void },
): Promise<void> {
  const clusterCa = path.join(o.runPodmin, LOCAL_CLUSTER_CA.slice("/run/podmin/".length));
  if (!await exists(clusterCa)) {
    await Deno.mkdir(path.dirname(clusterCa), { recursive: true, mode: 0o700 });
    const ca = await newCaPem("podmin local cluster CA");
    await writeFileAtomic(clusterCa, `${ca.certPem}${ca.keyPem}`, { mode: 0o600 });
  }
  const file = path.join(o.runPodmin, LOCAL_CA_KEY.slice("/run/podmin/".length));
  if (await exists(file)) return;
  await Deno.mkdir(path.dirname(file), { recursive: true, mode: 0o700 });
  const pem = await privateKeyPem((await generateKeyPair()).privateKey);
  await writeFileAtomic(file, pem, { mode: 0o600 });
  for (const key of IDENTITY_WRITES) await o.store.delete(key);
  o.log("new workload CA key on the node's tmpfs: the local workload CA starts over");
}

/** Starts the daemons of the node that are not running, in order, each waited for. */
async function startDaemons(o: LocalUpOptions & { state: LocalState; bucket: string }) {
  const { state } = o;
  const p = nodePaths(o.stateDir);
  const timeoutMs = o.timeoutMs ?? 60_000;
  const env = { PATH: `${p.bin}:/usr/local/sbin:/usr/sbin:/usr/bin:/sbin:/bin` };
  await ensureLocalCaKey({ runPodmin: p.runPodmin, store: openStore(o.bucket), log: o.log });
  const dnsAddress = state.dnsAddress ?? localDnsAddress(state.podPrefix);
  const specs: Record<DaemonName, { argv: string[]; ready: () => Promise<boolean> }> = {
    containerd: {
      argv: [path.join(p.bin, "containerd"), "--config", "/etc/containerd/config.toml"],
      ready: () => exists(path.join(p.root, "run/containerd/containerd.sock")),
    },
    "podmin-agent": {
      argv: [
        ...o.agentCommand,
        "run",
        `--bucket=${o.bucket}`,
        `--cluster=${o.cluster}`,
        `--nodegroup=${o.nodeGroup}`,
        `--ipv6-prefix=${state.podPrefix}`,
        "--manifest-dir=/etc/podmin/manifests",
        "--secrets-dir=/run/podmin/secrets",
        "--tls-dir=/run/podmin/tls",
        `--workload-ca-key=file:${LOCAL_CA_KEY}`,
        `--cluster-ca=file:${LOCAL_CLUSTER_CA}`,
        `--mesh-listen=${o.mesh?.listen ?? "127.0.0.1:0"}`,
        `--mesh-advertise=${o.mesh?.advertise ?? "127.0.0.1"}`,
        `--node-id=${LOCAL_DEFAULTS.nodeName}`,
        `--node-address=${dnsAddress}`,
        `--dns-dir=${NODE_DNS.zoneDir}`,
        "--state-dir=/run/podmin/agent",
        `--registry-listen=127.0.0.1:${state.registryPort}`,
        `--interval=${o.interval ?? "2s"}`,
        `--secrets-interval=${o.secretsInterval ?? "60s"}`,
        ...(state.kubeletVersion ? [`--kubelet-version=${state.kubeletVersion}`] : []),
      ],
      ready: () => httpOk(`http://127.0.0.1:${state.registryPort}/v2/`),
    },
    coredns: {
      argv: [path.join(p.bin, "coredns"), "-conf", NODE_DNS.corefile],
      ready: () => dnsListening(dnsAddress, NODE_DNS.port),
    },
    kubelet: {
      argv: [
        path.join(p.bin, "kubelet"),
        "--config=/etc/podmin/kubelet/config.yaml",
        `--hostname-override=${LOCAL_DEFAULTS.nodeName}`,
        "--v=2",
      ],
      ready: () => httpOk("http://127.0.0.1:10248/healthz"),
    },
  };
  for (const name of DAEMONS) {
    if (state.daemons[name] && await isRunning(state.daemons[name]!)) continue;
    if (name === "kubelet" && !state.daemons.kubelet) {
      state.newCgroups = await missingCgroups();
    }
    if (name === "coredns" && !(await hasLoopbackAddress(dnsAddress))) {
      // Recorded before it is made, so a crash in between still removes it.
      state.hostAddresses = [...new Set([...(state.hostAddresses ?? []), dnsAddress])];
      await writeState(o.stateDir, state);
      await addLoopbackAddress(dnsAddress);
      o.log(`added ${dnsAddress}/128 to the host's loopback (cluster DNS)`);
    }
    o.log(`starting ${name}`);
    const daemon = await startDaemon({
      mountNs: state.mountNs!,
      argv: specs[name].argv,
      log: path.join(p.logs, `${name}.log`),
      // Only the agent needs the caller's environment (AWS credentials, endpoint); it runs with
      // the process settings nodes give it; kubelet and containerd get their Go runtime settings.
      env: name === "podmin-agent"
        ? { ...Deno.env.toObject(), ...env, ...AGENT_ENV }
        : { ...env, ...nodeGoEnv(name) },
    });
    state.daemons[name] = daemon;
    await writeState(o.stateDir, state);
    await waitUntil({ daemon, name, ready: specs[name].ready, timeoutMs, log: o.log });
  }
}

/** Copies the programs to where the generated files and the daemons expect them. */
async function installPrograms(root: string, b: NodeBinaries): Promise<void> {
  const put = async (from: string, dir: string, name = path.basename(from)) => {
    await Deno.mkdir(path.join(root, dir), { recursive: true });
    const to = path.join(root, dir, name);
    await Deno.remove(to).catch(() => {});
    await Deno.copyFile(from, to);
    await Deno.chmod(to, 0o755);
  };
  for (
    const f of [b.containerd, b.shim, b.kubelet, b.crictl, b.coredns, ...(b.ctr ? [b.ctr] : [])]
  ) {
    await put(f, "usr/local/bin");
  }
  await put(b.runc, "usr/local/sbin", "runc");
  for (const plugin of ["ptp", "host-local", "loopback"]) {
    await put(path.join(b.cniDir, plugin), "opt/cni/bin");
  }
}

async function httpOk(url: string): Promise<boolean> {
  const res = await fetch(url, { signal: AbortSignal.timeout(2000) });
  await res.body?.cancel();
  return res.ok;
}

/** Options of `ensureSandboxImage`. */
export interface SandboxImageOptions {
  store: ObjectStore;
  /** Upstream reference, e.g. registry.k8s.io/pause:3.10. */
  ref: string;
  log: (line: string) => void;
  /** Skip the upstream attempt (tests, offline hosts). */
  offline?: boolean;
}

/** Makes sure the bucket holds the sandbox image at its mirror path. */
export async function ensureSandboxImage(
  o: SandboxImageOptions,
): Promise<"present" | "mirrored" | "built"> {
  const ref = parseUpstreamRef(o.ref);
  if (!ref.tag) throw new LocalNodeError(`the sandbox image needs a tag: ${o.ref}`);
  const repo = parseImageRepository(mirrorPathOf(ref));
  if (await getIfExists(o.store, imageTagKey(repo, ref.tag))) {
    o.log(`sandbox image ${o.ref} already in the bucket`);
    return "present";
  }
  if (!o.offline) {
    try {
      o.log(`mirroring sandbox image ${o.ref}`);
      await writeImage({
        store: o.store,
        source: new UpstreamSource({ ref }),
        repo,
        tag: ref.tag,
        platforms: ["linux/amd64", "linux/arm64"],
        log: o.log,
      });
      return "mirrored";
    } catch (err) {
      o.log(`cannot mirror ${o.ref} (${(err as Error).message}); building a pause image here`);
    }
  }
  const dir = await Deno.makeTempDir({ prefix: "podmin-pause-" });
  try {
    await writePauseImageLayout({ dir, tag: ref.tag, arches: ["amd64", "arm64"] });
    await writeImage({
      store: o.store,
      source: await openImageSource(`oci:${dir}:${ref.tag}`),
      repo,
      tag: ref.tag,
      log: o.log,
    });
  } finally {
    await Deno.remove(dir, { recursive: true }).catch(() => {});
  }
  o.log(
    `sandbox image built locally and stored as ${REGISTRY_HOSTNAME}/${
      mirrorPathOf(ref)
    }:${ref.tag}`,
  );
  return "built";
}

const KUBE_CGROUPS = ["kubepods", "kubepods.slice"];

/** kubelet's cgroup directories that do not exist yet, under every mounted hierarchy. */
async function missingCgroups(): Promise<string[]> {
  const roots: string[] = [];
  try {
    await Deno.stat("/sys/fs/cgroup/cgroup.controllers");
    roots.push("/sys/fs/cgroup");
  } catch {
    try {
      for await (const e of Deno.readDir("/sys/fs/cgroup")) {
        if (e.isDirectory) roots.push(path.join("/sys/fs/cgroup", e.name));
      }
    } catch { /* no cgroup hierarchy mounted */ }
  }
  const missing: string[] = [];
  for (const r of roots) {
    for (const c of KUBE_CGROUPS) {
      if (!(await exists(path.join(r, c)))) missing.push(path.join(r, c));
    }
  }
  return missing;
}

/** Removes a cgroup directory tree, deepest first (cgroup directories only rmdir). */
async function removeCgroupTree(dir: string): Promise<void> {
  let entries: Deno.DirEntry[];
  try {
    entries = await Array.fromAsync(Deno.readDir(dir));
  } catch {
    return;
  }
  for (const e of entries) {
    if (e.isDirectory && !e.isSymlink) await removeCgroupTree(path.join(dir, e.name));
  }
  await Deno.remove(dir).catch(() => {});
}

/** Options of `localDown`. */
export interface LocalDownOptions {
  stateDir: string;
  log: (line: string) => void;
  /** Also remove the default filesystem bucket (images, Deployments). */
  purge?: boolean;
}

/** Removes exactly what `up` made. Returns paths it had to leave (not empty, busy). */
export async function localDown(o: LocalDownOptions): Promise<string[]> {
  const p = nodePaths(o.stateDir);
  const s = await readState(o.stateDir);
  if (!s) {
    o.log(`no local node recorded in ${o.stateDir}`);
    return [];
  }
  const left: string[] = [];
  // Agent first (it would re-create manifests), then kubelet (it would restart Pods).
  for (const name of ["podmin-agent", "kubelet", "coredns"] as const) {
    if (s.daemons[name] && await stopDaemon(s.daemons[name]!)) o.log(`stopped ${name}`);
  }
  if (s.agentCommand) {
    // A stopped agent leaves its dataplane serving (restarts keep Services working); the node
    // shares this host's network, so its filters come off here.
    const out = await new Deno.Command(s.agentCommand[0], {
      args: [...s.agentCommand.slice(1), "dataplane", "detach"],
      stdout: "piped",
      stderr: "piped",
    }).output().catch((err) => ({ success: false, stdout: new Uint8Array(), stderr: err }));
    const text = (b: Uint8Array | Error) =>
      b instanceof Uint8Array ? new TextDecoder().decode(b).trim() : String(b);
    if (out.success) o.log(text(out.stdout));
    else o.log(`podmin-agent dataplane detach: ${text(out.stderr)}`);
  }
  const nsId = s.mountNs ? await namespaceId(s.mountNs) : undefined;
  if (s.daemons.containerd && await isRunning(s.daemons.containerd) && s.mountNs) {
    // Pods through CRI, so CNI releases their addresses and host routes.
    const crictl = path.join(p.bin, "crictl");
    const out = await new Deno.Command("nsenter", {
      args: [`--mount=${s.mountNs}`, "--", crictl, "rmp", "--all", "--force"],
      stdout: "piped",
      stderr: "piped",
    }).output().catch(() => undefined);
    if (out?.success) o.log("removed every Pod sandbox");
    else if (out) o.log(`crictl rmp: ${new TextDecoder().decode(out.stderr).trim()}`);
  }
  if (s.daemons.containerd && await stopDaemon(s.daemons.containerd)) o.log("stopped containerd");
  if (nsId) {
    // Shims and containers still in the node's namespace.
    const rest = await processesIn(nsId);
    for (const pid of rest) {
      try {
        Deno.kill(pid, "SIGKILL");
      } catch { /* gone */ }
    }
    if (rest.length) o.log(`killed ${rest.length} process(es) left in the node's namespace`);
  }
  for (const a of s.hostAddresses ?? []) {
    if (await removeLoopbackAddress(a)) o.log(`removed ${a}/128 from the host's loopback`);
  }
  for (const m of [...s.hostMounts].reverse()) await unmountIfMounted(m);
  for (const c of s.newCgroups) await removeCgroupTree(c);
  left.push(...await removeMountPoints(s.createdPaths));
  for (const dir of [p.root, p.nsDir, p.logs]) {
    await Deno.remove(dir, { recursive: true }).catch((err) => {
      if (!(err instanceof Deno.errors.NotFound)) left.push(dir);
    });
  }
  if (o.purge && s.bucket === p.defaultBucket) {
    await Deno.remove(decodeURIComponent(s.bucket.slice("file://".length)), { recursive: true })
      .catch(() => {});
    o.log(`removed the bucket ${s.bucket}`);
  }
  await Deno.remove(p.state);
  for (const l of left) o.log(`left in place (not empty or busy): ${l}`);
  o.log("local node removed");
  return left;
}

/**
 * The real-node topology of rollouts (issue 32), shared by the rollout end-to-end test
 * (tests/rollout/rollout_e2e_test.ts) and the rollout benchmark's failed-requests part
 * (tests/bench/rollout_bench.ts). It is the Services end-to-end test's: node A is `podmin local`
 * (real kubelet 1.36 + containerd, its agent in the endpoint mesh) running the backend Pods; node B
 * is a network namespace with its own agent (mesh, eBPF dataplane, NodeGroup `clients`) and a
 * client Pod that sends TCP and UDP requests through the Service's VIP without pause.
 *
 * Images (pushed to the bucket's registry): `echo:1.0` and `echo:2.0`, a static TCP + UDP server
 * on 8080 answering "<version> <request>", and `crash:1.0`, a container that exits at once.
 * Needs root and the node peers; run it under the host lock (`flock /work/scratch/host.lock`).
 */

import assert from "node:assert/strict";
import * as path from "node:path";
import { localDown, localUp, nodePaths } from "../../cli/local/local_node.ts";
import { resolveBinaries } from "../../cli/local/node_binaries.ts";
import type { AgentStatus } from "../../agent/deployments/status.ts";
import { readJsonStatus } from "../../agent/status_file.ts";
import { REGISTRY_HOSTNAME } from "../../core/model/image_ref.ts";
import { faultProxy } from "./fault_proxy.ts";
import { nsRun, sh, Topology } from "./dataplane_topology.ts";
import { echoSource, mirrorPauseImage, pushStaticProgram } from "./node_images.ts";
import { freePort, type Moto, moto, motoEnv } from "./moto.ts";
import { NODE_BIN_DIRS } from "./node_peers.ts";
import { podmin, waitFor } from "./programs.ts";
import { startDistributionRegistry } from "./registry.ts";

const ROOT = new URL("../../", import.meta.url).pathname;
const CLUSTER = "rollout";
const AGENT = [Deno.execPath(), "run", "--allow-all", path.join(ROOT, "agent/main.ts")];
const HOST_ADDR = "fd00:78::1";
const NODE_B_ADDR = "fd00:78::2";
const NODE_A_PODS = "fd00:706d:6f:1::/80";
const NODE_B_PODS = "fd00:78:b::/80";
const CLIENT_ADDR = "fd00:78:b::10";

/** The tools the topology needs on PATH (with root). */
export const ROLLOUT_TOPOLOGY_TOOLS = [
  "gcc",
  "skopeo",
  "nsenter",
  "unshare",
  "runc",
  "ip",
  "python3",
  "ethtool",
  "distribution-registry",
];

/** A container that exits at once. */
const CRASH_C = `int main(void) { return 1; }\n`;

/**
 * The client: a TCP request and a UDP request through the VIP in turn, without pause, until the
 * stop file exists; then one JSON line: counts, failures (first 20) and the replies' versions in
 * the order they changed.
 */
const CLIENT_PY = `
import json, os, socket, sys, time
vip, stop = sys.argv[1], sys.argv[2]
r = {"tcp_ok": 0, "tcp_failed": 0, "udp_ok": 0, "udp_failed": 0, "errors": [], "versions": []}
def seen(reply):
    v = reply.split(" ")[0]
    if not r["versions"] or r["versions"][-1] != v:
        r["versions"].append(v)
n = 0
while not os.path.exists(stop):
    n += 1
    try:
        c = socket.create_connection((vip, 80), timeout=3)
        c.sendall(b"req %d\\n" % n)
        line = c.makefile().readline().strip()
        c.close()
        if not line.endswith("req %d" % n):
            raise Exception("bad reply %r" % line)
        r["tcp_ok"] += 1
        seen(line)
    except Exception as e:
        r["tcp_failed"] += 1
        r["errors"].append("tcp %d: %s" % (n, e))
    try:
        u = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
        u.settimeout(3)
        u.connect((vip, 53))
        u.send(b"dgram %d" % n)
        reply = u.recv(512).decode()
        u.close()
        if not reply.endswith("dgram %d" % n):
            raise Exception("bad reply %r" % reply)
        r["udp_ok"] += 1
        seen(reply)
    except Exception as e:
        r["udp_failed"] += 1
        r["errors"].append("udp %d: %s" % (n, e))
    r["errors"] = r["errors"][:20]
    time.sleep(0.01)
print(json.dumps(r))
`;

/** What the client counted. */
export interface ClientResult {
  tcp_ok: number;
  tcp_failed: number;
  udp_ok: number;
  udp_failed: number;
  /** The first 20 failures. */
  errors: string[];
  /** The replies' versions in the order they changed. */
  versions: string[];
}

/** Options of the echo Deployment beyond its image and rollout. */
export interface EchoOptions {
  /** A CPU request (`resources.requests.cpu`). */
  cpu?: string;
  /** `terminationGracePeriodSeconds` (the echo server ignores SIGTERM as PID 1). */
  gracePeriodSeconds?: number;
}

/** The Deployment `echo` and its Service; `rollout` is spec.rollout as a YAML flow mapping. */
export function echoManifests(image: string, rollout: string, o: EchoOptions = {}): string {
  const grace = o.gracePeriodSeconds === undefined
    ? ""
    : `\n      terminationGracePeriodSeconds: ${o.gracePeriodSeconds}`;
  const cpu = o.cpu
    ? `\n          resources:\n            requests:\n              cpu: ${o.cpu}`
    : "";
  return `apiVersion: podmin.dev/v1
kind: Deployment
metadata:
  name: echo
spec:
  nodeGroup: default
  rollout: ${rollout}
  template:
    metadata:
      labels:
        app: echo
    spec:${grace}
      containers:
        - name: echo
          image: ${REGISTRY_HOSTNAME}/apps/${image}
          command: ["/${image.split(":")[0]}"]
          readinessProbe:
            tcpSocket:
              port: 8080
            periodSeconds: 1${cpu}
---
apiVersion: podmin.dev/v1
kind: Service
metadata:
  name: echo
spec:
  selector:
    app: echo
  ports:
    - name: tcp
      port: 80
      targetPort: 8080
      protocol: TCP
    - name: udp
      port: 53
      targetPort: 8080
      protocol: UDP
`;
}

/** Node A (`podmin local`) and node B (a network namespace with a client Pod), on moto. */
export class RolloutTopology {
  readonly work: string;
  readonly bucket: string;
  readonly env: Record<string, string>;
  /** `podmin local`'s state directory (node A). */
  readonly stateDir: string;
  /** The Service's VIP, once `apply` created it. */
  vip = "";
  readonly #moto: Moto;
  readonly #upstream: Awaited<ReturnType<typeof startDistributionRegistry>>;
  readonly #topo: Topology;
  readonly #hostIf: string;
  readonly #forwarding: string;
  readonly #logs: string[] = [];
  #nodeB = "";
  #client = "";
  #agentB?: Deno.ChildProcess;
  #relay?: ReturnType<typeof faultProxy>;

  private constructor(o: {
    moto: Moto;
    work: string;
    bucket: string;
    upstream: Awaited<ReturnType<typeof startDistributionRegistry>>;
    forwarding: string;
  }) {
    this.#moto = o.moto;
    this.work = o.work;
    this.stateDir = path.join(o.work, "state");
    this.bucket = o.bucket;
    this.env = motoEnv(o.moto);
    this.#upstream = o.upstream;
    this.#topo = Topology.create("ro");
    this.#hostIf = `${this.#topo.prefix}h`;
    this.#forwarding = o.forwarding;
  }

  /** moto (its variables set in this process's environment), a bucket, an upstream registry. */
  static async create(bucketName = "podmin-rollout-e2e"): Promise<RolloutTopology> {
    const m = await moto();
    const work = await Deno.makeTempDir({ prefix: "podmin-rollout-" });
    const bucket = `s3://${await m.createBucket(bucketName)}`;
    for (const [k, v] of Object.entries(motoEnv(m))) Deno.env.set(k, v);
    const forwarding = (await Deno.readTextFile("/proc/sys/net/ipv6/conf/all/forwarding")).trim();
    const upstream = await startDistributionRegistry();
    return new RolloutTopology({ moto: m, work, bucket, upstream, forwarding });
  }

  /** The agent status file of node A. */
  get statusFile(): string {
    return path.join(this.stateDir, "node/run/podmin/agent/status.json");
  }

  /** Pushes echo v1 (`echo:1.0`) and v2 (`echo:2.0`), `crash:1.0` and the pause image. */
  async pushImages(): Promise<void> {
    const o = { work: this.work, bucket: this.bucket, env: this.env };
    await mirrorPauseImage({ ...o, upstreamPort: this.#upstream.port });
    await pushStaticProgram({ ...o, name: "echo", source: echoSource("v1") });
    await pushStaticProgram({ ...o, name: "echo", source: echoSource("v2"), tag: "2.0" });
    await pushStaticProgram({ ...o, name: "crash", source: CRASH_C });
  }

  /** Node B's namespace and the client Pod in it, linked to the host (node A). */
  async linkNetwork(): Promise<void> {
    const hostIf = this.#hostIf;
    const nodeB = this.#nodeB = await this.#topo.node("nodeb");
    await sh("ip", [
      "link",
      "add",
      hostIf,
      "type",
      "veth",
      "peer",
      "name",
      "uplink",
      "netns",
      nodeB,
    ]);
    await sh("ip", ["-6", "addr", "add", `${HOST_ADDR}/64`, "dev", hostIf, "nodad"]);
    await sh("ip", ["link", "set", hostIf, "up"]);
    await nsRun(nodeB, "ip", ["-6", "addr", "add", `${NODE_B_ADDR}/64`, "dev", "uplink", "nodad"]);
    await nsRun(nodeB, "ip", ["link", "set", "uplink", "up"]);
    await this.#topo.route(nodeB, "default", "via", HOST_ADDR, "dev", "uplink");
    await sh("ip", ["-6", "route", "add", NODE_B_PODS, "via", NODE_B_ADDR, "dev", hostIf]);
    await Deno.writeTextFile("/proc/sys/net/ipv6/conf/all/forwarding", "1");
    this.#client = (await this.#topo.pod(nodeB, "client", "vclient", CLIENT_ADDR)).ns;
    this.#relay = faultProxy(this.#moto.port, { listen: HOST_ADDR });
  }

  /** Node A: `podmin local up` in the mesh; node B's agent joins it (its first snapshot). */
  async startNodes(): Promise<void> {
    const stateDir = this.stateDir;
    await localUp({
      stateDir,
      bucket: this.bucket,
      binaries: await resolveBinaries({ binDirs: NODE_BIN_DIRS }),
      agentCommand: AGENT,
      cluster: CLUSTER,
      nodeGroup: "default",
      podPrefix: NODE_A_PODS,
      registryPort: await freePort(),
      sandboxImage: `127.0.0.1:${this.#upstream.port}/pause:3.10`,
      interval: "1s",
      secretsInterval: "60s",
      mesh: { listen: "[::]:0", advertise: HOST_ADDR },
      log: (l) => this.#logs.push(l),
    });
    const nodeBState = path.join(this.work, "nodeb");
    const clusterCa = path.join(nodePaths(stateDir).runPodmin, "identity/cluster-ca.pem");
    const agentLog = await Deno.open(path.join(this.work, "agent-b.log"), {
      write: true,
      create: true,
    });
    this.#agentB = new Deno.Command("nsenter", {
      args: [
        `--net=/run/netns/${this.#nodeB}`,
        ...AGENT,
        "run",
        `--bucket=${this.bucket}`,
        `--cluster=${CLUSTER}`,
        "--nodegroup=clients",
        "--node-id=nodeb",
        `--node-address=${NODE_B_ADDR}`,
        `--ipv6-prefix=${NODE_B_PODS}`,
        "--mesh-listen=[::]:0",
        `--mesh-advertise=${NODE_B_ADDR}`,
        `--cluster-ca=file:${clusterCa}`,
        `--pods-api-socket=${path.join(nodeBState, "no-kubelet.sock")}`,
        `--dns-dir=${path.join(nodeBState, "dns")}`,
        "--workload-ca-key=off",
        "--registry-listen=off",
        `--manifest-dir=${path.join(nodeBState, "manifests")}`,
        `--secrets-dir=${path.join(nodeBState, "secrets")}`,
        `--tls-dir=${path.join(nodeBState, "tls")}`,
        `--state-dir=${path.join(nodeBState, "state")}`,
        "--interval=1s",
      ],
      env: { ...this.env, AWS_ENDPOINT_URL: this.#relay!.endpoint },
      stdout: "null",
      stderr: "piped",
    }).spawn();
    this.#agentB.stderr.pipeTo(agentLog.writable).catch(() => {});
    await waitFor("node B's first mesh snapshot", async () => {
      const s = JSON.parse(
        await Deno.readTextFile(path.join(nodeBState, "state/mesh.json")).catch(() => "{}"),
      );
      return s.snapshot !== undefined;
    }, 60_000);
  }

  /** `podmin apply` of the echo Deployment and Service; its output. */
  async apply(image: string, rollout: string, o: EchoOptions = {}): Promise<string> {
    const file = path.join(this.work, "echo.yaml");
    await Deno.writeTextFile(file, echoManifests(image, rollout, o));
    const applied = await this.podmin(["apply", "-f", file]);
    assert.equal(applied.code, 0, applied.stderr);
    return applied.stdout;
  }

  /** `podmin --bucket … ARGS` with moto's environment. */
  podmin(args: string[]): ReturnType<typeof podmin> {
    return podmin(["--bucket", this.bucket, ...args], this.env);
  }

  /** `podmin rollout ARGS`. */
  rollout(args: string[]): ReturnType<typeof podmin> {
    return this.podmin(["rollout", ...args]);
  }

  /** Node A's agent status (undefined while unreadable). */
  status(): Promise<AgentStatus | undefined> {
    return readJsonStatus<AgentStatus>(this.statusFile).catch(() => undefined);
  }

  /** Reads the echo Service's VIP (after the first apply) and waits until v1 answers through it. */
  async awaitService(): Promise<void> {
    const services = await this.podmin(["get", "services", "-o", "json"]);
    const listed = JSON.parse(services.stdout);
    this.vip = (listed.items ?? [listed]).find((s: { metadata: { name: string } }) =>
      s.metadata.name === "echo"
    )?.status?.vip;
    assert.ok(this.vip, services.stdout);
    await waitFor("the echo Service answers through the VIP", async () => {
      const r = await this.clientDuring(() => new Promise((ok) => setTimeout(ok, 500)));
      return r.tcp_ok > 0 && r.tcp_failed === 0 && r.udp_failed === 0;
    }, 180_000);
  }

  /** Runs the client until `until` resolves, then stops it and returns its counts. */
  async clientDuring(until: () => Promise<void>): Promise<ClientResult> {
    const stop = path.join(this.work, `stop-${crypto.randomUUID()}`);
    const proc = new Deno.Command("nsenter", {
      args: [`--net=/run/netns/${this.#client}`, "python3", "-c", CLIENT_PY, this.vip, stop],
      stdout: "piped",
      stderr: "piped",
    }).spawn();
    const output = proc.output();
    try {
      await until();
    } finally {
      await Deno.writeTextFile(stop, "");
    }
    const out = await output;
    const text = new TextDecoder().decode(out.stdout).trim();
    assert.ok(out.success, new TextDecoder().decode(out.stderr));
    return JSON.parse(text) as ClientResult;
  }

  /** Prints node A's agent log, kubelet's lines about echo and its status (after a failure). */
  async dumpLogs(): Promise<void> {
    const log = (name: string) =>
      Deno.readTextFile(path.join(this.stateDir, `logs/${name}.log`)).catch(() => "");
    console.error(
      `node A agent log (tail):\n${(await log("podmin-agent")).split("\n").slice(-60).join("\n")}`,
    );
    const kubelet = (await log("kubelet")).split("\n").filter((l) => l.includes("echo"));
    console.error(`node A kubelet log about echo (tail):\n${kubelet.slice(-40).join("\n")}`);
    console.error(`node A status: ${JSON.stringify(await this.status())}`);
    console.error(`kept for inspection: ${this.work}`);
  }

  /** Stops everything; the work directory is removed when `keep` is false. */
  async destroy(keep: boolean): Promise<void> {
    try {
      this.#agentB?.kill("SIGTERM");
    } catch { /* gone */ }
    await this.#agentB?.status.catch(() => {});
    this.#relay?.close();
    await localDown({ stateDir: this.stateDir, log: (l) => this.#logs.push(l) })
      .catch((e) => console.error(e));
    await sh("ip", ["link", "del", this.#hostIf]).catch(() => {});
    await this.#topo.destroy();
    await Deno.writeTextFile("/proc/sys/net/ipv6/conf/all/forwarding", this.#forwarding);
    await this.#upstream.stop();
    if (!keep) await Deno.remove(this.work, { recursive: true }).catch(() => {});
  }
}

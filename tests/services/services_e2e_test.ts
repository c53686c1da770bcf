/**
 * A Service end to end across two nodes (issue 14): `podmin apply` to a client Pod's connect().
 *
 * Node A is `podmin local` in this machine's network namespace: a real kubelet 1.36 + containerd
 * 2.1 (built from the Go module proxy by tests/setup.sh) runs the backend Pod, and its agent joins
 * the endpoint mesh on a veth address. Node B is a network namespace joined to node A by a veth
 * pair (the "VPC"): its own podmin-agent (the mesh, the DNS zone, the eBPF dataplane), real
 * CoreDNS serving that zone with the Corefile vmconfig generates, and a client Pod namespace
 * (ptp-style veth). Node B runs no kubelet: its agent's Pods API watch finds no socket and keeps
 * retrying, which must not keep it from receiving the cluster's snapshots.
 *
 * The client resolves `echo.default.svc.cluster.local` through CoreDNS (`dig`) and reaches the
 * backend through the VIP over TCP and UDP; with the backend deleted the name still resolves and
 * connections are refused at once (ICMPv6 Port Unreachable from node B's dataplane); with the
 * Service deleted node B's dataplane detaches.
 */

import assert from "node:assert/strict";
import * as path from "node:path";
import { localDown, localUp, nodePaths } from "../../cli/local/local_node.ts";
import { resolveBinaries } from "../../cli/local/node_binaries.ts";
import { REGISTRY_HOSTNAME } from "../../core/model/image_ref.ts";
import { faultProxy } from "../support/fault_proxy.ts";
import { nsRun, sh, Topology } from "../support/dataplane_topology.ts";
import { echoSource, mirrorPauseImage, pushStaticProgram } from "../support/node_images.ts";
import { freePort, moto, motoEnv } from "../support/moto.ts";
import { podmin, waitFor } from "../support/programs.ts";
import { startDistributionRegistry } from "../support/registry.ts";
import { testWith } from "../support/requirements.ts";

const NODE_BINS = NODE_BIN_DIRS;
const COREDNS = nodePeerProgram("coredns");
const ROOT = new URL("../../", import.meta.url).pathname;
const CLUSTER = "svce2e";
const AGENT = [Deno.execPath(), "run", "--allow-all", path.join(ROOT, "agent/main.ts")];
/** The "VPC" link between node A (this namespace) and node B. */
const HOST_ADDR = "fd00:77::1";
const NODE_B_ADDR = "fd00:77::2";
const NODE_A_PODS = "fd00:706d:6f:1::/80";
const NODE_B_PODS = "fd00:77:b::/80";
const CLIENT_ADDR = "fd00:77:b::10";
const NAME = "echo.default.svc.cluster.local";

/** A connected UDP socket (so ICMP errors reach it): prints the reply or the error's name. */
const UDP_PROBE = `
import socket, sys
s = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
s.settimeout(3)
s.connect((sys.argv[1], int(sys.argv[2])))
try:
    s.send(b"ping")
    print(s.recv(512).decode())
except Exception as e:
    print(type(e).__name__)
`;
import { NODE_BIN_DIRS, nodePeerProgram } from "../support/node_peers.ts";

interface Many {
  ok: number;
  failed: number;
  replies: string[];
  errors: string[];
}

testWith(
  "services e2e [two nodes, kubelet + containerd + CoreDNS + eBPF + moto]: apply → dig → connect over TCP and UDP; scale away → refused at once; delete → detached",
  {
    root: true,
    tools: [
      "gcc",
      "skopeo",
      "nsenter",
      "unshare",
      "runc",
      "ip",
      "dig",
      "python3",
      "ethtool",
      "distribution-registry",
    ],
  },
  async (t) => {
    const m = await moto();
    const work = await Deno.makeTempDir({ prefix: "podmin-svc-" });
    const stateDir = path.join(work, "state");
    const bucket = `s3://${await m.createBucket("podmin-svc-e2e")}`;
    const env = motoEnv(m);
    for (const [k, v] of Object.entries(env)) Deno.env.set(k, v);
    const upstream = await startDistributionRegistry();
    const topo = Topology.create("se");
    const hostIf = `${topo.prefix}h`;
    const nodeBState = path.join(work, "nodeb");
    const forwarding = (await Deno.readTextFile("/proc/sys/net/ipv6/conf/all/forwarding")).trim();
    const logs: string[] = [];
    let agentB: Deno.ChildProcess | undefined;
    let coredns: Deno.ChildProcess | undefined;
    let relay: ReturnType<typeof faultProxy> | undefined;

    const inClient = (cmd: string, args: string[]) => nsRun(client, cmd, args);
    const dig = async () =>
      (await inClient("dig", ["+short", "+time=1", "+tries=1", `@${NODE_B_ADDR}`, "AAAA", NAME]))
        .trim();
    const tcp = async (count: number) =>
      JSON.parse(await topo.peer(client, ["tcp-many", vip, "80", String(count), "1"])) as Many;
    const udp = async () => (await inClient("python3", ["-c", UDP_PROBE, vip, "53"])).trim();
    const bStatus = async () =>
      JSON.parse(
        await nsRun(nodeB, AGENT[0], [
          ...AGENT.slice(1),
          "dataplane",
          "status",
          "-o",
          "json",
          "--flows",
          "0",
          "--state-dir",
          path.join(nodeBState, "state"),
        ]),
      );
    let nodeB = "";
    let client = "";
    let vip = "";

    try {
      await t.step("images: the echo backend pushed, a pause image mirrored", async () => {
        await mirrorPauseImage({ work, bucket, env, upstreamPort: upstream.port });
        await pushStaticProgram({ work, bucket, env, name: "echo", source: echoSource("echo") });
      });

      await t.step("the network: node B and a client Pod, linked to node A", async () => {
        nodeB = await topo.node("nodeb");
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
        await nsRun(nodeB, "ip", [
          "-6",
          "addr",
          "add",
          `${NODE_B_ADDR}/64`,
          "dev",
          "uplink",
          "nodad",
        ]);
        await nsRun(nodeB, "ip", ["link", "set", "uplink", "up"]);
        await topo.route(nodeB, "default", "via", HOST_ADDR, "dev", "uplink");
        await sh("ip", ["-6", "route", "add", NODE_B_PODS, "via", NODE_B_ADDR, "dev", hostIf]);
        // Node A routes between its Pods and the VPC link (a VM forwards for its Pods too).
        await Deno.writeTextFile("/proc/sys/net/ipv6/conf/all/forwarding", "1");
        client = (await topo.pod(nodeB, "client", "vclient", CLIENT_ADDR)).ns;
        // The AWS endpoint as node B sees it: moto through a relay on the link.
        relay = faultProxy(m.port, { listen: HOST_ADDR });
      });

      await t.step("node A: podmin local up, its mesh reachable on the link", async () => {
        await localUp({
          stateDir,
          bucket,
          binaries: await resolveBinaries({ binDirs: NODE_BINS }),
          agentCommand: AGENT,
          cluster: CLUSTER,
          nodeGroup: "default",
          podPrefix: NODE_A_PODS,
          registryPort: await freePort(),
          sandboxImage: `127.0.0.1:${upstream.port}/pause:3.10`,
          interval: "1s",
          secretsInterval: "60s",
          mesh: { listen: "[::]:0", advertise: HOST_ADDR },
          log: (l) => logs.push(l),
        });
      });

      await t.step("node B: its agent joins the mesh; CoreDNS serves its zone", async () => {
        const clusterCa = path.join(nodePaths(stateDir).runPodmin, "identity/cluster-ca.pem");
        const dnsDir = path.join(nodeBState, "dns");
        await Deno.mkdir(dnsDir, { recursive: true });
        const agentLog = await Deno.open(path.join(work, "agent-b.log"), {
          write: true,
          create: true,
        });
        agentB = new Deno.Command("nsenter", {
          args: [
            `--net=/run/netns/${nodeB}`,
            ...AGENT,
            "run",
            `--bucket=${bucket}`,
            `--cluster=${CLUSTER}`,
            "--nodegroup=clients",
            "--node-id=nodeb",
            `--node-address=${NODE_B_ADDR}`,
            `--ipv6-prefix=${NODE_B_PODS}`,
            "--mesh-listen=[::]:0",
            `--mesh-advertise=${NODE_B_ADDR}`,
            `--cluster-ca=file:${clusterCa}`,
            `--pods-api-socket=${path.join(nodeBState, "no-kubelet.sock")}`,
            `--dns-dir=${dnsDir}`,
            "--workload-ca-key=off",
            "--registry-listen=off",
            `--manifest-dir=${path.join(nodeBState, "manifests")}`,
            `--secrets-dir=${path.join(nodeBState, "secrets")}`,
            `--tls-dir=${path.join(nodeBState, "tls")}`,
            `--state-dir=${path.join(nodeBState, "state")}`,
            "--interval=1s",
          ],
          env: { ...env, AWS_ENDPOINT_URL: relay!.endpoint },
          stdout: "null",
          stderr: "piped",
        }).spawn();
        agentB.stderr.pipeTo(agentLog.writable).catch(() => {});
        // The Corefile vmconfig generates, bound to node B's address.
        const corefile = await sh("bash", [
          "-c",
          `set -euo pipefail; source ${ROOT}vmconfig/lib/common.sh; source ${ROOT}vmconfig/lib/generate.sh; gen_corefile "$@"`,
          "gen",
          NODE_B_ADDR,
          "53",
          path.join(dnsDir, "cluster.local.db"),
          "cluster.local",
          "/etc/resolv.conf",
        ]);
        await Deno.writeTextFile(path.join(nodeBState, "Corefile"), corefile);
        coredns = new Deno.Command("nsenter", {
          args: [`--net=/run/netns/${nodeB}`, COREDNS, "-conf", path.join(nodeBState, "Corefile")],
          cwd: nodeBState,
          stdout: "null",
          stderr: "null",
        }).spawn();
        const mesh = path.join(nodeBState, "state/mesh.json");
        await waitFor("node B's first mesh snapshot", async () => {
          const s = JSON.parse(await Deno.readTextFile(mesh).catch(() => "{}"));
          return s.snapshot !== undefined;
        }, 60_000).catch(async (e) => {
          throw new Error(
            `${e.message}\n${await Deno.readTextFile(path.join(work, "agent-b.log"))}`,
          );
        });
        const nodes = await podmin(["--bucket", bucket, "get", "nodes"], env);
        assert.match(nodes.stdout, /nodeb/);
      });

      await t.step(
        "apply: the name resolves on node B and TCP and UDP reach the backend",
        async () => {
          const file = path.join(work, "echo.yaml");
          await Deno.writeTextFile(
            file,
            `apiVersion: podmin.dev/v1
kind: Deployment
metadata:
  name: echo
spec:
  nodeGroup: default
  template:
    metadata:
      labels:
        app: echo
    spec:
      containers:
        - name: echo
          image: ${REGISTRY_HOSTNAME}/apps/echo:1.0
          command: ["/echo"]
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
`,
          );
          const applied = await podmin(["--bucket", bucket, "apply", "-f", file], env);
          assert.equal(applied.code, 0, applied.stderr);
          const services = await podmin(["--bucket", bucket, "get", "services", "-o", "json"], env);
          const listed = JSON.parse(services.stdout);
          vip = (listed.items ?? [listed]).find((s: { metadata: { name: string } }) =>
            s.metadata.name === "echo"
          )?.status?.vip;
          assert.ok(vip, services.stdout);
          await waitFor(
            "CoreDNS on node B answers the VIP",
            async () => (await dig()) === vip,
            30_000,
          );
          let last: Many | undefined;
          await waitFor("TCP through the VIP reaches the backend", async () => {
            last = await tcp(1).catch(() => undefined);
            return last?.ok === 1;
          }, 180_000).catch((e) => {
            throw new Error(`${e.message}: ${JSON.stringify(last)}`);
          });
          const r = await tcp(5);
          assert.equal(r.ok, 5, r.errors.join("; "));
          assert.ok(r.replies.every((l) => /^echo req \d$/.test(l)), r.replies.join("; "));
          assert.equal(await udp(), "echo ping");
          const status = await bStatus();
          assert.equal(status.agent.applied.loaded, true);
          assert.equal(status.agent.applied.backends, 1);
          assert.ok(status.agent.applied.version >= 1);
          assert.ok(
            status.attachments.some((a: { interface: string }) => a.interface === "vclient"),
            JSON.stringify(status.attachments),
          );
        },
      );

      await t.step(
        "scale away: the name still resolves, connections are refused at once",
        async () => {
          const deleted = await podmin(["--bucket", bucket, "delete", "deployment", "echo"], env);
          assert.equal(deleted.code, 0, deleted.stderr);
          await waitFor("node B's dataplane has no backend left", async () => {
            const s = await bStatus().catch(() => undefined);
            return s?.agent?.applied?.backends === 0;
          }, 120_000);
          assert.equal(await dig(), vip, "the name stays");
          const r = await tcp(3);
          assert.equal(r.ok, 0);
          assert.ok(
            r.errors.every((e) => /Connection refused|ConnectionRefused/.test(e)),
            `refused, not timed out: ${r.errors.join("; ")}`,
          );
          assert.equal(await udp(), "ConnectionRefusedError");
        },
      );

      await t.step("the last Service deleted: node B's dataplane detaches", async () => {
        const deleted = await podmin(["--bucket", bucket, "delete", "service", "echo"], env);
        assert.equal(deleted.code, 0, deleted.stderr);
        await waitFor("node B's dataplane unloaded", async () => {
          const s = await bStatus().catch(() => undefined);
          return s?.agent?.applied?.services === 0 && s.attachments.length === 0 &&
            s.programs.length === 0;
        }, 60_000);
        const links = await nsRun(nodeB, "bpftool", ["-j", "net", "show"]);
        assert.doesNotMatch(links, /podmin_/, "nothing of ours attached in node B");
        await waitFor("the name is gone", async () => (await dig()) === "", 30_000);
      });
    } finally {
      for (const p of [agentB, coredns]) {
        try {
          p?.kill("SIGTERM");
        } catch { /* gone */ }
        await p?.status.catch(() => {});
      }
      relay?.close();
      await localDown({ stateDir, log: (l) => logs.push(l) }).catch((e) => console.error(e));
      await sh("ip", ["link", "del", hostIf]).catch(() => {});
      await topo.destroy();
      await Deno.writeTextFile("/proc/sys/net/ipv6/conf/all/forwarding", forwarding);
      await upstream.stop();
    }
  },
);

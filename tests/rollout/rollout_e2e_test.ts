/**
 * A rollout on a real node (issue 32 items 2 and 4): surge beside the running Pod, handover with
 * no gap, halt on a crashing image.
 *
 * The topology is the Services end-to-end test's (tests/services/services_e2e_test.ts): node A is
 * `podmin local` (real kubelet 1.36 + containerd, its agent in the endpoint mesh) running the
 * backend Pods; node B is a network namespace with its own agent (mesh, eBPF dataplane) and a
 * client Pod. The client sends TCP and UDP requests through the Service's VIP without pause while:
 *
 * - the Deployment moves from image v1 to v2: node A starts the v2 Pod beside the v1 Pod, withdraws
 *   v1 from its endpoints once v2 was Ready for minReadySeconds, then removes it. No request
 *   fails, and the replies move from v1 to v2;
 * - the Deployment moves to an image whose container exits at once: node A halts past the progress
 *   deadline with kubelet's reason in its status and node record (`podmin rollout status` names
 *   the node and the reason), the v2 Pod keeps serving, no request fails;
 * - `podmin rollout undo` goes back to v2: the crashing Pod is removed, the v2 Pod never moves;
 * - `podmin rollout pause`, then v1 applied: node A waits (rollout status: `waiting`, paused) with
 *   the v2 Pod alone; `rollout resume` rolls v1 out, no request fails;
 * - with a CPU request that node A's allocatable holds once but not twice, kubelet refuses the
 *   surge Pod at admission and node A replaces in place (the agent logs `replacing` with
 *   kubelet's reason).
 */

import assert from "node:assert/strict";
import * as path from "node:path";
import { localDown, localUp, nodePaths } from "../../cli/local/local_node.ts";
import { resolveBinaries } from "../../cli/local/node_binaries.ts";
import type { AgentStatus } from "../../agent/deployments/status.ts";
import { readJsonStatus } from "../../agent/status_file.ts";
import { REGISTRY_HOSTNAME } from "../../core/model/image_ref.ts";
import { faultProxy } from "../support/fault_proxy.ts";
import { nsRun, sh, Topology } from "../support/dataplane_topology.ts";
import { mirrorPauseImage, pushStaticProgram } from "../support/node_images.ts";
import { freePort, moto, motoEnv } from "../support/moto.ts";
import { NODE_BIN_DIRS } from "../support/node_peers.ts";
import { podmin, waitFor } from "../support/programs.ts";
import { startDistributionRegistry } from "../support/registry.ts";
import { testWith } from "../support/requirements.ts";

const ROOT = new URL("../../", import.meta.url).pathname;
const CLUSTER = "rollout";
const AGENT = [Deno.execPath(), "run", "--allow-all", path.join(ROOT, "agent/main.ts")];
const HOST_ADDR = "fd00:78::1";
const NODE_B_ADDR = "fd00:78::2";
const NODE_A_PODS = "fd00:706d:6f:1::/80";
const NODE_B_PODS = "fd00:78:b::/80";
const CLIENT_ADDR = "fd00:78:b::10";

/** A static TCP + UDP server on 8080 answering "<VERSION> <line>" / "<VERSION> <datagram>". */
const echoSource = (version: string) =>
  `#include <netinet/in.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <stdio.h>
int main(void) {
  struct sockaddr_in6 a; memset(&a, 0, sizeof a);
  a.sin6_family = AF_INET6; a.sin6_port = htons(8080); a.sin6_addr = in6addr_any;
  int one = 1, t = socket(AF_INET6, SOCK_STREAM, 0), u = socket(AF_INET6, SOCK_DGRAM, 0);
  setsockopt(t, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (bind(t, (void *)&a, sizeof a) || listen(t, 64) || bind(u, (void *)&a, sizeof a)) return 1;
  struct pollfd p[2] = {{t, POLLIN, 0}, {u, POLLIN, 0}};
  char in[512], out[600];
  for (;;) {
    if (poll(p, 2, -1) < 0) continue;
    if (p[0].revents) {
      int c = accept(t, 0, 0); ssize_t n = 0, r;
      while (c >= 0 && n < (ssize_t)sizeof in - 1 && (r = read(c, in + n, sizeof in - 1 - n)) > 0) {
        n += r; if (memchr(in, '\\n', n)) break;
      }
      if (c >= 0) {
        in[n > 0 ? n : 0] = 0; char *nl = strchr(in, '\\n'); if (nl) *nl = 0;
        int m = snprintf(out, sizeof out, "${version} %s\\n", in); write(c, out, m); close(c);
      }
    }
    if (p[1].revents) {
      struct sockaddr_in6 from; socklen_t fl = sizeof from;
      ssize_t n = recvfrom(u, in, sizeof in - 1, 0, (void *)&from, &fl);
      if (n >= 0) { in[n] = 0; int m = snprintf(out, sizeof out, "${version} %s", in);
        sendto(u, out, m, 0, (void *)&from, fl); }
    }
  }
}
`;

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

interface ClientResult {
  tcp_ok: number;
  tcp_failed: number;
  udp_ok: number;
  udp_failed: number;
  errors: string[];
  versions: string[];
}

/** The Deployment and its Service; `rollout` is spec.rollout as YAML flow mapping. */
function manifests(image: string, rollout: string, cpu?: string): string {
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
    spec:
      containers:
        - name: echo
          image: ${REGISTRY_HOSTNAME}/apps/${image}
          command: ["/${image.split(":")[0]}"]
          readinessProbe:
            tcpSocket:
              port: 8080
            periodSeconds: 1${
    cpu ? `\n          resources:\n            requests:\n              cpu: ${cpu}` : ""
  }
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

testWith(
  "rollout e2e [kubelet + containerd + eBPF + moto]: a new image surges with 0 failed requests; a crashing image halts with the old Pod serving; undo goes back",
  {
    root: true,
    tools: [
      "gcc",
      "skopeo",
      "nsenter",
      "unshare",
      "runc",
      "ip",
      "python3",
      "ethtool",
      "distribution-registry",
    ],
  },
  async (t) => {
    const m = await moto();
    const work = await Deno.makeTempDir({ prefix: "podmin-rollout-" });
    const stateDir = path.join(work, "state");
    const bucket = `s3://${await m.createBucket("podmin-rollout-e2e")}`;
    const env = motoEnv(m);
    for (const [k, v] of Object.entries(env)) Deno.env.set(k, v);
    const upstream = await startDistributionRegistry();
    const topo = Topology.create("ro");
    const hostIf = `${topo.prefix}h`;
    const nodeBState = path.join(work, "nodeb");
    const statusFile = path.join(stateDir, "node/run/podmin/agent/status.json");
    const forwarding = (await Deno.readTextFile("/proc/sys/net/ipv6/conf/all/forwarding")).trim();
    const logs: string[] = [];
    let agentB: Deno.ChildProcess | undefined;
    let relay: ReturnType<typeof faultProxy> | undefined;
    let nodeB = "";
    let client = "";
    let vip = "";
    let ok = false;
    let v2File = "";

    /** A step whose failure ends the test (with the node's logs), not only the step. */
    const step = async (name: string, fn: () => Promise<void>) => {
      if (!(await t.step(name, fn))) throw new Error(`step failed: ${name}`);
    };
    const apply = async (image: string, rollout: string, cpu?: string) => {
      const file = path.join(work, "echo.yaml");
      await Deno.writeTextFile(file, manifests(image, rollout, cpu));
      const applied = await podmin(["--bucket", bucket, "apply", "-f", file], env);
      assert.equal(applied.code, 0, applied.stderr);
      return applied.stdout;
    };
    const status = () => readJsonStatus<AgentStatus>(statusFile).catch(() => undefined);
    const rollout = (args: string[]) => podmin(["--bucket", bucket, "rollout", ...args], env);
    /** Runs the client until `until` resolves, then stops it and returns its counts. */
    const clientDuring = async (until: () => Promise<void>): Promise<ClientResult> => {
      const stop = path.join(work, `stop-${crypto.randomUUID()}`);
      const proc = new Deno.Command("nsenter", {
        args: [`--net=/run/netns/${client}`, "python3", "-c", CLIENT_PY, vip, stop],
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
    };

    try {
      await step("images: echo v1 and v2, a crashing one, a pause image", async () => {
        await mirrorPauseImage({ work, bucket, env, upstreamPort: upstream.port });
        await pushStaticProgram({ work, bucket, env, name: "echo", source: echoSource("v1") });
        await pushStaticProgram({
          work,
          bucket,
          env,
          name: "echo",
          source: echoSource("v2"),
          tag: "2.0",
        });
        await pushStaticProgram({ work, bucket, env, name: "crash", source: CRASH_C });
      });

      await step("the network: node B and a client Pod, linked to node A", async () => {
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
        await Deno.writeTextFile("/proc/sys/net/ipv6/conf/all/forwarding", "1");
        client = (await topo.pod(nodeB, "client", "vclient", CLIENT_ADDR)).ns;
        relay = faultProxy(m.port, { listen: HOST_ADDR });
      });

      await step("node A: podmin local up in the mesh; node B's agent joins it", async () => {
        await localUp({
          stateDir,
          bucket,
          binaries: await resolveBinaries({ binDirs: NODE_BIN_DIRS }),
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
        const clusterCa = path.join(nodePaths(stateDir).runPodmin, "identity/cluster-ca.pem");
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
            `--dns-dir=${path.join(nodeBState, "dns")}`,
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
        await waitFor("node B's first mesh snapshot", async () => {
          const s = JSON.parse(
            await Deno.readTextFile(path.join(nodeBState, "state/mesh.json")).catch(() => "{}"),
          );
          return s.snapshot !== undefined;
        }, 60_000);
      });

      await step("v1: the client reaches it through the VIP over TCP and UDP", async () => {
        const out = await apply("echo:1.0", "{minReadySeconds: 2}");
        assert.match(out, /deployment default\/echo created \(revision 1\)/);
        const services = await podmin(["--bucket", bucket, "get", "services", "-o", "json"], env);
        const listed = JSON.parse(services.stdout);
        vip = (listed.items ?? [listed]).find((s: { metadata: { name: string } }) =>
          s.metadata.name === "echo"
        )?.status?.vip;
        assert.ok(vip, services.stdout);
        await waitFor("v1 answers through the VIP", async () => {
          const r = await clientDuring(() => new Promise((ok) => setTimeout(ok, 500)));
          return r.tcp_ok > 0 && r.tcp_failed === 0 && r.udp_failed === 0;
        }, 180_000);
      });

      await step("v2: surge and handover with 0 failed requests", async () => {
        const phases = new Set<string>();
        const result = await clientDuring(async () => {
          const out = await apply("echo:2.0", "{minReadySeconds: 2}");
          assert.match(out, /deployment default\/echo configured \(revision 2\)/);
          await waitFor("node A settled on v2 alone", async () => {
            const s = await status();
            for (const r of s?.rollouts ?? []) phases.add(r.phase);
            return !!s?.converged && s.written.length === 1 && phases.has("surging");
          }, 240_000);
        });
        assert.deepEqual([...phases], ["surging"], "no in-place replacement, no failure");
        assert.equal(result.tcp_failed + result.udp_failed, 0, result.errors.join("\n"));
        assert.ok(result.tcp_ok > 0 && result.udp_ok > 0);
        assert.equal(result.versions[0], "v1");
        assert.equal(result.versions.at(-1), "v2", JSON.stringify(result.versions));
        const s = (await status())!;
        assert.equal(s.written.length, 1, "v2 runs alone");
        assert.match(s.written[0], /^podmin_default_echo\.[0-9a-f]{8}\.json$/, "in its own slot");
        v2File = s.written[0];
      });

      await step("rollout status and history: every node new, two revisions", async () => {
        const st = await rollout(["status", "echo", "--wait", "--timeout", "180"]);
        assert.equal(st.code, 0, st.stdout + st.stderr);
        assert.match(st.stdout, /rolled out; 1 of 1 node\(s\) up to date, 1 available/);
        assert.match(st.stdout, /^podmin-local\s+new\s+true\s*$/m);
        const history = await rollout(["history", "echo"]);
        assert.equal(history.code, 0, history.stderr);
        assert.match(history.stdout, /^1\s.*apps\/echo:1\.0\s*$/m);
        assert.match(history.stdout, /^2\s.*apps\/echo:2\.0\s+\(current\)$/m);
      });

      await step(
        "a crashing image: node A halts with kubelet's reason, v2 keeps serving",
        async () => {
          let halted: NonNullable<AgentStatus["rollouts"]>[number] | undefined;
          const result = await clientDuring(async () => {
            await apply("crash:1.0", "{minReadySeconds: 2, progressDeadlineSeconds: 20}");
            await waitFor("node A halted", async () => {
              halted = (await status())?.rollouts?.find((r) => r.phase === "failed");
              return halted !== undefined;
            }, 240_000);
          });
          assert.match(halted!.reason ?? "", /within 20 s: .*(CrashLoopBackOff|exit 1|Error)/);
          assert.equal(result.tcp_failed + result.udp_failed, 0, result.errors.join("\n"));
          assert.deepEqual(result.versions, ["v2"], "only the old Pod answered");
          const s = (await status())!;
          assert.equal(s.written.length, 2, "the crashing Pod beside the v2 Pod");
          assert.ok(s.written.includes(v2File), s.written.join());
          assert.equal(s.converged, false);
          // The node record carries it for `podmin get nodes` and a rollout status.
          await waitFor("the node record says failed", async () => {
            const nodes = await podmin(["--bucket", bucket, "get", "nodes", "-o", "json"], env);
            return /"phase":\s*"failed"/.test(nodes.stdout);
          }, 60_000);
          const st = await rollout(["status", "echo"]);
          assert.equal(st.code, 1, st.stdout + st.stderr);
          assert.match(st.stdout, /halted/);
          assert.match(st.stdout, /^podmin-local\s+failed\s+true\s+.*(CrashLoopBackOff|exit 1)/m);
          assert.match(st.stdout, /podmin rollout undo echo/);
          // The node halted the rollout cluster-wide in its rollout object.
          assert.match(st.stdout, /^halted on podmin-local at .*(CrashLoopBackOff|exit 1)/m);
        },
      );

      await step(
        "rollout undo: back to v2 on the node, the crashing Pod removed, 0 failures",
        async () => {
          let out = "";
          const result = await clientDuring(async () => {
            const undo = await rollout(["undo", "echo"]);
            assert.equal(undo.code, 0, undo.stderr);
            out = undo.stdout;
            const st = await rollout(["status", "echo", "--wait", "--timeout", "180"]);
            assert.equal(st.code, 0, st.stdout + st.stderr);
            await waitFor("node A back on v2 alone", async () => {
              const s = await status();
              return !!s?.converged && s.written.length === 1;
            }, 120_000);
          });
          assert.match(out, /rolled back to revision 2 \(now revision 4\)/);
          assert.equal(result.tcp_failed + result.udp_failed, 0, result.errors.join("\n"));
          assert.deepEqual(result.versions, ["v2"]);
          assert.deepEqual((await status())!.written, [v2File], "the v2 Pod never moved");
        },
      );

      await step(
        "rollout pause holds a new spec on the node; resume rolls it out with 0 failures",
        async () => {
          const paused = await rollout(["pause", "echo"]);
          assert.equal(paused.code, 0, paused.stderr);
          const result = await clientDuring(async () => {
            await apply("echo:1.0", "{minReadySeconds: 2}");
            await waitFor("node A waits, paused", async () => {
              const s = await status();
              return !!s?.rollouts?.some((r) =>
                r.phase === "waiting" && /paused/.test(r.reason ?? "")
              );
            }, 120_000);
            assert.deepEqual((await status())!.written, [v2File], "nothing started while paused");
            // The node record follows the status file within its write delay.
            let st = await rollout(["status", "echo"]);
            await waitFor("rollout status: node A waiting", async () => {
              st = await rollout(["status", "echo"]);
              return /^podmin-local\s+waiting\s+/m.test(st.stdout);
            }, 60_000);
            assert.equal(st.code, 3, st.stdout + st.stderr);
            assert.match(st.stdout, /^podmin-local\s+waiting\s+true\s+rollout paused/m);
            assert.match(st.stdout, /paused: no node is admitted/);
            const resumed = await rollout(["resume", "echo"]);
            assert.equal(resumed.code, 0, resumed.stderr);
            const done = await rollout(["status", "echo", "--wait", "--timeout", "180"]);
            assert.equal(done.code, 0, done.stdout + done.stderr);
            await waitFor("node A on v1 alone", async () => {
              const s = await status();
              return !!s?.converged && s.written.length === 1 && s.written[0] !== v2File;
            }, 120_000);
          });
          assert.equal(result.tcp_failed + result.udp_failed, 0, result.errors.join("\n"));
          assert.equal(result.versions.at(-1), "v1", JSON.stringify(result.versions));
        },
      );

      await step("a node whose allocatable cannot hold both Pods replaces in place", async () => {
        // One Pod's request fits the node's allocatable CPU (its cores less the 200m vmconfig
        // reserves), two do not: kubelet's admission refuses the second.
        const allocatable = navigator.hardwareConcurrency * 1000 - 200;
        const cpu = `${Math.floor(allocatable / 2) + 50}m`;
        /** Waits until node A took an index newer than `generation` and runs one Pod. */
        const settled = async (what: string, generation: number) =>
          await waitFor(what, async () => {
            const s = await status();
            return (s?.indexGeneration ?? 0) > generation && !!s?.converged &&
              s.written.length === 1;
          }, 240_000);
        const generation = async () => (await status())!.indexGeneration ?? 0;
        /** The rollout phases the agent logged since `from` (a phase may last a pass or two). */
        const logged = async (from: number) =>
          (await Deno.readTextFile(path.join(stateDir, "logs/podmin-agent.log")))
            .split("\n").filter((l) => l.includes('"msg":"rollout"')).map((l) => JSON.parse(l))
            .filter((l) => Date.parse(l.ts) >= from);
        const withRequest = Date.now();
        let before = await generation();
        await apply("echo:2.0", "{minReadySeconds: 2}", cpu);
        await settled("v2 with its CPU request beside v2 without, then alone", before);
        const surged = await logged(withRequest);
        assert.ok(
          surged.length > 0 && surged.every((l) => l.phase === "surging"),
          JSON.stringify(surged),
        );
        const full = Date.now();
        before = await generation();
        await apply("echo:1.0", "{minReadySeconds: 2}", cpu);
        await settled("v1 replaced v2 in place", before);
        const replaced = await logged(full);
        assert.ok(
          replaced.some((l) =>
            l.phase === "replacing" &&
            /kubelet cannot run both Pods \((OutOfcpu|UnexpectedAdmissionError)\b/.test(l.reason)
          ),
          JSON.stringify(replaced),
        );
        // In place, the old container runs until kubelet stops it (its grace period: the echo
        // server ignores SIGTERM as PID 1), then the new one starts under the same name.
        let last: ClientResult | undefined;
        await waitFor("v1 answers alone", async () => {
          last = await clientDuring(() => new Promise((ok) => setTimeout(ok, 500)));
          return last.tcp_ok > 0 && last.tcp_failed === 0 && last.versions.join() === "v1";
        }, 180_000).catch((e) => {
          throw new Error(`${e.message}: ${JSON.stringify(last)}`);
        });
      });
      ok = true;
    } catch (err) {
      const log = (name: string) =>
        Deno.readTextFile(path.join(stateDir, `logs/${name}.log`)).catch(() => "");
      console.error(
        `node A agent log (tail):\n${
          (await log("podmin-agent")).split("\n").slice(-60).join("\n")
        }`,
      );
      const kubelet = (await log("kubelet")).split("\n").filter((l) => l.includes("echo"));
      console.error(`node A kubelet log about echo (tail):\n${kubelet.slice(-40).join("\n")}`);
      console.error(`node A status: ${JSON.stringify(await status())}`);
      console.error(`kept for inspection: ${work}`);
      throw err;
    } finally {
      try {
        agentB?.kill("SIGTERM");
      } catch { /* gone */ }
      await agentB?.status.catch(() => {});
      relay?.close();
      await localDown({ stateDir, log: (l) => logs.push(l) }).catch((e) => console.error(e));
      await sh("ip", ["link", "del", hostIf]).catch(() => {});
      await topo.destroy();
      await Deno.writeTextFile("/proc/sys/net/ipv6/conf/all/forwarding", forwarding);
      await upstream.stop();
      if (ok) await Deno.remove(work, { recursive: true }).catch(() => {});
    }
  },
);

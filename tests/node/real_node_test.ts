/**
 * A real Podmin node, end to end: `podmin local up` renders every node file with
 * vmconfig's generators (applying only the host overrides it prints) and runs
 * a real containerd 2.1, runc, the ptp/host-local CNI plugins, a standalone
 * kubelet 1.36, CoreDNS 1.12 (the default catalogue's pins, all built from the Go module proxy by
 * tests/setup.sh) and podmin-agent against moto. Images come from `podmin push` and from
 * `podmin mirror` of a locally built pause image served by the CNCF
 * distribution registry (there is no internet here); Pods pull them through the
 * agent's loopback registry.
 */

import assert from "node:assert/strict";
import * as path from "node:path";
import { readHostFacts } from "../../cli/local/host_overrides.ts";
import { localDown, localUp, readState } from "../../cli/local/local_node.ts";
import { resolveBinaries } from "../../cli/local/node_binaries.ts";
import { hasLoopbackAddress, localDnsAddress } from "../../cli/local/node_dns.ts";
import { isRunning } from "../../cli/local/node_processes.ts";
import { PodsWatch } from "../../agent/discovery/pods_api.ts";
import {
  connectionLines,
  distinctViews,
  type PodsApiRecording,
  RecordingProxy,
  replayOnSimulator,
  viewLines,
} from "../support/pods_api_recorder.ts";
import type { AgentStatus } from "../../agent/deployments/status.ts";
import { readJsonStatus } from "../../agent/status_file.ts";
import { REGISTRY_HOSTNAME } from "../../core/model/image_ref.ts";
import { mirrorPauseImage, pushStaticProgram } from "../support/node_images.ts";
import { freePort, moto, motoEnv, putParameter, putSecret } from "../support/moto.ts";
import { podmin, waitFor } from "../support/programs.ts";
import { startDistributionRegistry } from "../support/registry.ts";
import { testWith } from "../support/requirements.ts";
import { NODE_BIN_DIRS } from "../support/node_peers.ts";

const BIN = Deno.env.get("PODMIN_TEST_BIN") ?? "/opt/podmin-test/bin";
const NODE_BINS = NODE_BIN_DIRS;
const CLUSTER = "nodetest";
const LINE = "hello from a podmin node";
/** podmin-agent from this source tree, as `podmin local` runs it from source. */
const AGENT_COMMAND = [
  Deno.execPath(),
  "run",
  "--allow-all",
  new URL("../../agent/main.ts", import.meta.url).pathname,
];

/**
 * A static program: prints LINE and its values, then waits until SIGTERM ends it (so kubelet stops
 * it at once, not after the grace period); `cat FILE` prints a file.
 */
const APP_C = `#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
static void stop(int sig) { (void)sig; _exit(0); }
static void show(const char *p) {
  FILE *f = fopen(p, "r"); char b[256]; size_t n;
  if (!f) { printf("%s: missing\\n", p); return; }
  n = fread(b, 1, sizeof b - 1, f); b[n] = 0; printf("%s", b); fclose(f);
}
int main(int argc, char **argv) {
  if (argc > 2 && !strcmp(argv[1], "cat")) { show(argv[2]); return 0; }
  signal(SIGTERM, stop);
  puts(${JSON.stringify(LINE)}); fflush(stdout);
  for (;;) pause();
}
`;

async function must(cmd: string, args: string[], env?: Record<string, string>): Promise<string> {
  const out = await new Deno.Command(cmd, { args, env, stdout: "piped", stderr: "piped" }).output();
  const dec = new TextDecoder();
  if (!out.success) {
    throw new Error(`${cmd} ${args.join(" ")}: ${dec.decode(out.stderr)}${dec.decode(out.stdout)}`);
  }
  return dec.decode(out.stdout);
}

interface PodsApiPod {
  name: string;
  namespace: string;
  uid: string;
  phase: string;
  ready: boolean;
  ips: string[] | null;
}

async function podsApiBinary(): Promise<string> {
  for await (const e of Deno.readDir(path.join(BIN, "node"))) {
    if (e.name.startsWith("podsapi-")) return path.join(BIN, "node", e.name, "podsapi");
  }
  throw new Error("podsapi test peer not built (tests/peers/build_node_peers.sh)");
}

testWith(
  "real node [pinned kubelet 1.36 + containerd 2.1 + moto]: podmin local runs a Deployment from push to Ready, values, delete, agent restart, reboot",
  {
    root: true,
    tools: ["gcc", "skopeo", "nsenter", "unshare", "runc", "ip", "distribution-registry", "dig"],
  },
  async (t) => {
    const m = await moto();
    const work = await Deno.makeTempDir({ prefix: "podmin-node-" });
    const stateDir = path.join(work, "state");
    const bucketName = await m.createBucket("podmin-node-test");
    const bucket = `s3://${bucketName}`;
    const env = motoEnv(m);
    for (const [k, v] of Object.entries(env)) Deno.env.set(k, v);
    const upstream = await startDistributionRegistry();
    const registryPort = await freePort();
    const podsapi = await podsApiBinary();
    const logs: string[] = [];
    const log = (l: string) => logs.push(l);
    const binaries = await resolveBinaries({ binDirs: NODE_BINS });
    const upOptions = {
      stateDir,
      bucket,
      binaries,
      agentCommand: AGENT_COMMAND,
      cluster: CLUSTER,
      nodeGroup: "default",
      podPrefix: "fd00:706d:6e:1::/80",
      registryPort,
      sandboxImage: `127.0.0.1:${upstream.port}/pause:3.10`,
      interval: "1s",
      secretsInterval: "2s",
      log,
    };
    // crictl inside the node's view, configured only by the generated /etc/crictl.yaml.
    const inNode = async (...args: string[]) => {
      const s = await readState(stateDir);
      return await must("nsenter", [`--mount=${s!.mountNs}`, "--", ...args]);
    };
    const crictl = (...args: string[]) =>
      inNode(path.join(stateDir, "node/usr/local/bin/crictl"), ...args);
    const containers = async (name: string) =>
      JSON.parse(
        await inNode(path.join(stateDir, "node/usr/local/bin/crictl"), "ps", "-a", "-o", "json"),
      )
        .containers.filter((c: { metadata: { name: string } }) => c.metadata.name === name);
    const podsApi = async (): Promise<PodsApiPod[]> =>
      (await inNode(podsapi, "--socket", "/var/lib/kubelet/pods-api/pods-api.sock")).trim().split(
        "\n",
      )
        .filter(Boolean).map((l) => JSON.parse(l));
    // A restarted kubelet answers FailedPrecondition ("Kubelet is initializing") for a moment:
    // not ready yet.
    const readyPod = async () =>
      (await podsApi().catch(() => [])).find((p) => p.name.startsWith("hello") && p.ready);
    const valueInContainer = async (key: string) => {
      const [c] = (await containers("hello")).filter((c: { state: string }) =>
        c.state === "CONTAINER_RUNNING"
      );
      if (!c) return undefined;
      return await inNode(
        path.join(stateDir, "node/usr/local/bin/crictl"),
        "exec",
        c.id,
        "/hello",
        "cat",
        `/var/run/secrets/podmin.dev/values/${key}`,
      ).catch(() => undefined);
    };

    /** `dig @server TYPE name` (from the host, or inside a process's network namespace). */
    const dig = async (server: string, type: string, name: string, netnsOf?: number) => {
      const args = ["+time=1", "+tries=1", `@${server}`, type, name];
      const out = netnsOf === undefined
        ? await new Deno.Command("dig", { args, stdout: "piped" }).output()
        : await new Deno.Command("nsenter", {
          args: [`--target=${netnsOf}`, "--net", "dig", ...args],
          stdout: "piped",
        }).output();
      const text = new TextDecoder().decode(out.stdout);
      const answer = text.split(";; ANSWER SECTION:\n")[1]?.split("\n\n")[0] ?? "";
      return {
        status: /status: (\w+)/.exec(text)?.[1] ?? `no answer: ${text}`,
        answers: answer.split("\n").filter(Boolean).map((l) => l.split(/\s+/).slice(4).join(" ")),
      };
    };

    const agentStatusFile = path.join(stateDir, "node/run/podmin/agent/status.json");
    /** The agent's manifests in kubelet's static Pod directory: file name -> content. */
    const manifestFiles = async (): Promise<Record<string, string>> => {
      const dir = path.join(stateDir, "node/etc/podmin/manifests");
      const out: Record<string, string> = {};
      for await (const e of Deno.readDir(dir)) {
        if (!e.name.startsWith(".")) out[e.name] = await Deno.readTextFile(path.join(dir, e.name));
      }
      return out;
    };

    const valueBecomes = (key: string, want: string, timeoutMs: number) =>
      waitFor(
        `value ${key} = ${want} inside the container`,
        async () => (await valueInContainer(key)) === want,
        timeoutMs,
      );

    /** Applies a one-container Deployment of an image under apps/. */
    const applyDeployment = async (d: { name: string; image: string; command?: string[] }) => {
      const file = path.join(work, `${d.name}.yaml`);
      await Deno.writeTextFile(
        file,
        `apiVersion: podmin.dev/v1
kind: Deployment
metadata:
  name: ${d.name}
spec:
  nodeGroup: default
  template:
    spec:
      containers:
        - name: ${d.name}
          image: ${REGISTRY_HOSTNAME}/apps/${d.image}
${d.command ? `          command: ${JSON.stringify(d.command)}\n` : ""}`,
      );
      const applied = await podmin(["--bucket", bucket, "apply", "-f", file], env);
      assert.equal(applied.code, 0, applied.stderr);
    };
    /** Polls `podmin local status` until its output matches; returns that output. */
    const statusMatching = async (re: RegExp): Promise<string> => {
      let out = "";
      await waitFor(`local status matching ${re}`, async () => {
        out = (await podmin(["local", "status", "--state-dir", stateDir], env)).stdout;
        return re.test(out);
      }, 90_000).catch((e) => {
        throw new Error(`${e.message}\n${out}`);
      });
      return out;
    };

    try {
      await t.step("images: a pause image mirrored from a registry, the app pushed", async () => {
        await mirrorPauseImage({ work, bucket, env, upstreamPort: upstream.port });
        await pushStaticProgram({ work, bucket, env, name: "hello", source: APP_C });
      });

      await t.step("local up: generated files, printed overrides, four daemons", async () => {
        await localUp(upOptions);
        const printed = logs.filter((l) => l.startsWith("override for this host:"));
        // Every override names its file and reason; none touches hosts.toml, CNI or crictl.
        for (const l of printed) {
          assert.match(
            l,
            /^override for this host: \/etc\/(containerd|podmin\/kubelet)\/\S+: .+ \(.+\)$/,
          );
        }
        console.error(printed.join("\n"));
        assert.match(logs.join("\n"), /sandbox image .*pause:3\.10 already in the bucket/);
        const kubeletConfig = await Deno.readTextFile(
          path.join(stateDir, "node/etc/podmin/kubelet/config.yaml"),
        );
        // The pinned kubelet 1.36 has the local Pods API as alpha: the generator turns its gate on.
        assert.match(
          kubeletConfig,
          /^featureGates:\n {2}PodsAPI: true$/m,
          "kubelet 1.36: gate PodsAPI",
        );
        // Pods resolve through the node's CoreDNS, on the DNS address up put on the loopback.
        const dnsAddress = localDnsAddress(upOptions.podPrefix);
        assert.equal((await readState(stateDir))!.dnsAddress, dnsAddress);
        assert.match(kubeletConfig, new RegExp(`^clusterDNS:\n  - ${dnsAddress}$`, "m"));
        assert.ok(await hasLoopbackAddress(dnsAddress), `${dnsAddress} on lo`);
        const corefile = await Deno.readTextFile(
          path.join(stateDir, "node/etc/podmin/coredns/Corefile"),
        );
        assert.match(corefile, new RegExp(`^ {4}bind ${dnsAddress}$`, "m"));
        assert.match(corefile, /^ {4}forward \. \/etc\/resolv\.conf$/m);
        assert.ok(await isRunning((await readState(stateDir))!.daemons.coredns!), "CoreDNS runs");
        const hosts = await Deno.readTextFile(
          path.join(stateDir, `node/etc/containerd/certs.d/${REGISTRY_HOSTNAME}/hosts.toml`),
        );
        assert.match(hosts, new RegExp(`server = "http://127\\.0\\.0\\.1:${registryPort}"`));
        // Again: a no-op while it runs.
        const before = (await readState(stateDir))!.daemons;
        await localUp(upOptions);
        assert.deepEqual((await readState(stateDir))!.daemons, before);
      });

      await t.step(
        "apply: the Pod becomes Ready, logs its line, image through the loopback registry",
        async () => {
          await putParameter(`/${CLUSTER}/default/hello/greeting`, "hi-1");
          await putSecret(`/${CLUSTER}/default/hello/token`, "tok-1");
          await Deno.writeTextFile(
            path.join(work, "hello.yaml"),
            `apiVersion: podmin.dev/v1
kind: Deployment
metadata:
  name: hello
spec:
  nodeGroup: default
  secrets:
    - key: greeting
      from: ssm
    - key: token
      from: secretsmanager
  template:
    metadata:
      labels:
        app: hello
    spec:
      containers:
        - name: hello
          image: ${REGISTRY_HOSTNAME}/apps/hello:1.0
          command: ["/hello"]
---
apiVersion: podmin.dev/v1
kind: Service
metadata:
  name: hello
spec:
  selector:
    app: hello
  ports:
    - name: http
      port: 80
      targetPort: 8080
`,
          );
          const applied = await podmin(
            ["--bucket", bucket, "apply", "-f", path.join(work, "hello.yaml")],
            env,
          );
          assert.equal(applied.code, 0, applied.stderr);
          await waitFor(
            "the Pod Ready in kubelet's Pods API",
            async () => !!(await readyPod()),
            120_000,
          );
          const [c] = await containers("hello");
          await waitFor(
            "the container's line",
            async () => (await crictl("logs", c.id).catch(() => "")).includes(LINE),
            30_000,
          );
          const images = await inNode(
            path.join(stateDir, "node/usr/local/bin/crictl"),
            "images",
            "-o",
            "json",
          );
          const tags = JSON.parse(images).images.flatMap((i: { repoTags: string[] }) => i.repoTags);
          assert.ok(tags.includes(`${REGISTRY_HOSTNAME}/apps/hello:1.0`), tags.join(" "));
          assert.ok(
            tags.some((t: string) => t.includes(`${REGISTRY_HOSTNAME}/mirror/`)),
            tags.join(" "),
          );
        },
      );

      await t.step(
        "the Pod's IPv6 is from the prefix and the host routes it as a /128",
        async () => {
          const pod = (await readyPod())!;
          const ip = pod.ips?.[0] ?? "";
          assert.match(ip, /^fd00:706d:6e:1::/, ip);
          const route = await must("ip", ["-6", "route", "show", `${ip}/128`]);
          assert.match(route, new RegExp(`^${ip.replaceAll(".", "\\.")} dev \\S+`), route);
        },
      );

      await t.step(
        "values from Parameter Store and Secrets Manager inside the container; rotation",
        async () => {
          await valueBecomes("greeting", "hi-1", 30_000);
          assert.equal(await valueInContainer("token"), "tok-1");
          await putParameter(`/${CLUSTER}/default/hello/greeting`, "hi-2");
          await valueBecomes("greeting", "hi-2", 60_000);
        },
      );

      await t.step(
        "the Pod's workload certificate: mounted read-only, verified by openssl, names the Pod",
        async () => {
          const tls = path.join(stateDir, "node/run/podmin/tls/default_hello");
          await waitFor("the certificate", async () => {
            try {
              await Deno.stat(path.join(tls, "tls.crt"));
              return true;
            } catch {
              return false;
            }
          }, 30_000);
          const verify = await must("openssl", [
            "verify",
            "-CAfile",
            path.join(tls, "ca.crt"),
            path.join(tls, "tls.crt"),
          ]);
          assert.match(verify, /OK/);
          const san = await must("openssl", [
            "x509",
            "-noout",
            "-ext",
            "subjectAltName",
            "-in",
            path.join(tls, "tls.crt"),
          ]);
          assert.match(
            san,
            new RegExp(`URI:spiffe://${CLUSTER}\\.podmin/ns/default/deployment/hello`),
          );
          // Inside the container, at the mount path (the app prints at most 255 bytes of a file).
          const [c] = (await containers("hello")).filter((c: { state: string }) =>
            c.state === "CONTAINER_RUNNING"
          );
          const seen = await inNode(
            path.join(stateDir, "node/usr/local/bin/crictl"),
            "exec",
            c.id,
            "/hello",
            "cat",
            "/var/run/secrets/podmin.dev/tls/tls.crt",
          );
          const onHost = await Deno.readTextFile(path.join(tls, "tls.crt"));
          assert.ok(seen.startsWith("-----BEGIN CERTIFICATE-----"), seen);
          assert.ok(onHost.startsWith(seen.trimEnd().slice(0, 200)), "the same certificate");
        },
      );

      await t.step(
        "discovery: the agent reports the Ready Pod behind its Service into the mesh snapshot",
        async () => {
          const pod = (await readyPod())!;
          const status = path.join(stateDir, "node/run/podmin/agent/mesh.json");
          let seen = "";
          await waitFor("the Pod's address in the mesh snapshot", async () => {
            seen = await Deno.readTextFile(status).catch(() => "");
            const s = seen && JSON.parse(seen);
            return !!s?.snapshot?.endpoints?.["default/hello"]?.includes(pod.ips![0]);
          }, 60_000).catch((e) => {
            throw new Error(`${e.message}\n${seen}`);
          });
          const s = JSON.parse(seen);
          assert.equal(s.coordinator, true, "a single node coordinates itself");
          assert.deepEqual(s.local, { "default/hello": [pod.ips![0]] });
        },
      );

      await t.step(
        "Service DNS: the Pod's resolv.conf names the node's CoreDNS, which answers the Service VIP (from the host and from inside the Pod)",
        async () => {
          const dnsAddress = (await readState(stateDir))!.dnsAddress!;
          const [c] = (await containers("hello")).filter((c: { state: string }) =>
            c.state === "CONTAINER_RUNNING"
          );
          const resolv = await crictl("exec", c.id, "/hello", "cat", "/etc/resolv.conf");
          assert.match(resolv, new RegExp(`^nameserver ${dnsAddress}$`, "m"), resolv);
          assert.match(
            resolv,
            /^search default\.svc\.cluster\.local svc\.cluster\.local cluster\.local\b/m,
            resolv,
          );
          const got = await podmin(
            ["--bucket", bucket, "get", "service", "hello", "-o", "json"],
            env,
          );
          assert.equal(got.code, 0, got.stderr);
          const vip = JSON.parse(got.stdout).status.vip as string;
          assert.match(vip, /:/, vip);
          const name = "hello.default.svc.cluster.local";
          let seen = {};
          await waitFor("CoreDNS answering the Service's VIP", async () => {
            seen = await dig(dnsAddress, "AAAA", name);
            return JSON.stringify(seen) === JSON.stringify({ status: "NOERROR", answers: [vip] });
          }, 30_000).catch((e) => {
            throw new Error(`${e.message}: ${JSON.stringify(seen)}`);
          });
          // The named port as SRV; a name that is no Service does not exist.
          assert.deepEqual(await dig(dnsAddress, "SRV", `_http._tcp.${name}`), {
            status: "NOERROR",
            answers: [`0 100 80 ${name}.`],
          });
          assert.equal(
            (await dig(dnsAddress, "AAAA", "nope.default.svc.cluster.local")).status,
            "NXDOMAIN",
          );
          // From the Pod's own network namespace: through its veth and the host's /128 route.
          const [sandbox] = JSON.parse(
            await crictl("pods", "--name", "hello", "--state", "ready", "-o", "json"),
          ).items;
          const pid = JSON.parse(await crictl("inspectp", "-o", "json", sandbox.id)).info.pid;
          // The Pod's first packet to the host may wait for neighbour discovery on its veth:
          // dig tries once per second, so ask until the answer comes (or 15 s pass).
          let fromPod = {};
          await waitFor("CoreDNS answering from inside the Pod", async () => {
            fromPod = await dig(dnsAddress, "AAAA", name, pid);
            return JSON.stringify(fromPod) ===
              JSON.stringify({ status: "NOERROR", answers: [vip] });
          }, 15_000).catch((e) => {
            throw new Error(`${e.message}: ${JSON.stringify(fromPod)}`);
          });
        },
      );

      await t.step(
        "the agent's Pods API client reports exactly what kubelet's own Go client reports",
        async () => {
          const key = (p: PodsApiPod) =>
            JSON.stringify([p.namespace, p.name, p.uid, p.phase, p.ready, p.ips ?? []]);
          const ours = (await inNode(...AGENT_COMMAND, "pods", "-o", "json")).trim().split("\n")
            .filter(Boolean).map((l) => JSON.parse(l) as PodsApiPod);
          const theirs = await podsApi();
          assert.ok(ours.some((p) => p.name.startsWith("hello") && p.ready), JSON.stringify(ours));
          assert.deepEqual(ours.map(key).sort(), theirs.map(key).sort());
        },
      );

      await t.step(
        "crictl with the generated /etc/crictl.yaml; an agent restart restarts no container",
        async () => {
          // The operator's way: no endpoint flag, so crictl reads the generated /etc/crictl.yaml.
          const listed = await podmin([
            "local",
            "exec",
            "--state-dir",
            stateDir,
            "--",
            "crictl",
            "ps",
          ]);
          assert.equal(listed.code, 0, listed.stderr);
          assert.match(listed.stdout, /hello/);
          const [before] = await containers("hello");
          const podBefore = (await readyPod())!;
          const manifestsBefore = await manifestFiles();
          assert.ok(Object.keys(manifestsBefore).length > 0, "the agent wrote manifests");
          const s = (await readState(stateDir))!;
          const killedAt = Date.now();
          Deno.kill(s.daemons["podmin-agent"]!.pid, "SIGKILL");
          await waitFor("the agent gone", async () => {
            try {
              await Deno.stat(`/proc/${s.daemons["podmin-agent"]!.pid}`);
              return false;
            } catch {
              return true;
            }
          });
          await localUp(upOptions); // restarts only what is down
          assert.match(logs.join("\n"), /restarting podmin-agent/);
          // The event: the restarted agent has completed a converged pass over every Deployment
          // (its status file is written after each pass; lastAttempt is when the pass began).
          let seen: AgentStatus | undefined;
          await waitFor("a converged pass of the restarted agent", async () => {
            seen = await readJsonStatus<AgentStatus>(agentStatusFile).catch(() => undefined);
            return !!seen && Date.parse(seen.lastAttempt) > killedAt && seen.converged &&
              seen.desired.includes("default/hello");
          }, 60_000).catch((e) => {
            throw new Error(`${e.message}: ${JSON.stringify(seen)}`);
          });
          // That pass rewrote no manifest (a changed manifest is what makes kubelet restart a
          // static Pod), kubelet still reports the same Pod, and its container is the same one.
          assert.deepEqual(await manifestFiles(), manifestsBefore, "manifests after the restart");
          const podAfter = await readyPod();
          assert.equal(podAfter?.uid, podBefore.uid, "the same Pod, Ready");
          const after = await containers("hello");
          assert.deepEqual(after.map((c: { id: string }) => c.id), [before.id]);
          assert.equal(after[0].state, "CONTAINER_RUNNING");
        },
      );

      await t.step(
        "the Pods API over time: the agent's watch across a kubelet restart and a re-created static Pod; the simulator replays the session and the watch sees the same",
        async () => {
          const kubeletSocket = path.join(stateDir, "node/var/lib/kubelet/pods-api/pods-api.sock");
          const proxySocket = path.join(work, "pods-proxy.sock");
          const proxy = await RecordingProxy.start({
            listen: proxySocket,
            upstream: kubeletSocket,
          });
          const views: string[][] = [];
          const watch: PodsWatch = new PodsWatch({
            socket: proxySocket,
            maxBackoffMs: 1_000,
            onChange: () => views.push(viewLines(watch.view().pods)),
          });
          const helloReady = () =>
            watch.view().pods.some((p) => p.name.startsWith("hello") && p.ready);
          const events = () => proxy.connections.flatMap((c) => c.events);
          try {
            watch.start();
            await waitFor(
              "the watch synced, hello Ready",
              () => watch.view().synced && helloReady(),
            );
            // kubelet restarted mid-watch (its containers keep running under containerd).
            const s = (await readState(stateDir))!;
            Deno.kill(s.daemons.kubelet!.pid, "SIGKILL");
            await waitFor("the watch's stream ended", () => proxy.connections[0].end !== undefined);
            await localUp(upOptions);
            await waitFor("the watch resynced after the restart, hello Ready", () => {
              const last = proxy.connections.at(-1)!;
              return proxy.connections.length > 1 &&
                last.events.some((e) => e.type === "INITIAL_SYNC_COMPLETE") && helloReady();
            }, 120_000);
            // The static Pod re-created: its manifest removed, the agent writes it again.
            const manifest = path.join(
              stateDir,
              "node/etc/podmin/manifests/podmin_default_hello.json",
            );
            const seen = events().length;
            await Deno.remove(manifest);
            await waitFor(
              "kubelet reporting hello deleted",
              () =>
                events().slice(seen).some((e) =>
                  e.type === "DELETED" && e.pod?.name.startsWith("hello")
                ),
              60_000,
            );
            await waitFor("the re-created hello Ready", helloReady, 120_000);
          } finally {
            watch.stop();
            await waitFor(
              "the watch's cancel through the proxy",
              () => proxy.connections.every((c) => c.end !== undefined),
            ).finally(() => proxy.stop());
          }
          const recording: PodsApiRecording = {
            peer: `kubelet v${binaries.kubeletVersion}`,
            connections: proxy.connections,
            views,
          };
          const file = Deno.env.get("PODMIN_PODS_API_RECORDING");
          if (file) await Deno.writeTextFile(file, JSON.stringify(recording, null, 2) + "\n");
          const summary = recording.connections.map(connectionLines);
          console.error(
            `recorded ${summary.length} connections:\n${JSON.stringify(summary, null, 1)}`,
          );
          // The session's shape: a restart (a stream ended, connects refused or told to wait, a
          // resync) and a re-created Pod (DELETED, then the Pod again).
          assert.ok(recording.connections.length >= 2, "a reconnect after the restart");
          assert.ok(
            recording.connections.filter((c) =>
              c.events.some((e) => e.type === "INITIAL_SYNC_COMPLETE")
            ).length >= 2,
            "a resync after the restart",
          );
          const replay = await replayOnSimulator(recording, { dir: work });
          assert.deepEqual(distinctViews(replay.views), distinctViews(views), "the watch's views");
          assert.deepEqual(
            replay.connections.map(connectionLines),
            recording.connections.map(connectionLines),
            "what the simulator sent, connection by connection",
          );
        },
      );

      await t.step(
        "a simulated reboot (every process gone, /run/podmin empty): the Pod comes back",
        async () => {
          const s = (await readState(stateDir))!;
          for (const d of ["podmin-agent", "kubelet", "coredns"] as const) {
            Deno.kill(s.daemons[d]!.pid, "SIGKILL");
          }
          await crictl("rmp", "-af");
          Deno.kill(s.daemons.containerd!.pid, "SIGKILL");
          await new Promise((r) => setTimeout(r, 1000));
          for await (const e of Deno.readDir(path.join(stateDir, "node/run/podmin"))) {
            await Deno.remove(path.join(stateDir, "node/run/podmin", e.name), { recursive: true });
          }
          await localUp(upOptions);
          await waitFor("the Pod Ready again", async () => !!(await readyPod()), 120_000);
          await valueBecomes("greeting", "hi-2", 60_000);
          // The agent writes the zone anew on the empty tmpfs; the restarted CoreDNS serves it.
          const dnsAddress = (await readState(stateDir))!.dnsAddress!;
          await waitFor(
            "the Service name again",
            async () =>
              (await dig(dnsAddress, "AAAA", "hello.default.svc.cluster.local")).answers.length ===
                1,
            30_000,
          );
        },
      );

      await t.step(
        "a Pod whose image cannot be pulled: status names it with kubelet's own message",
        async () => {
          await applyDeployment({ name: "broken", image: "missing:1.0" });
          // kubelet's own reason for a failed pull and containerd's (the image's own name,
          // missing:1.0, proves nothing).
          const out = await statusMatching(
            /broken-podmin-local: .*\b(ErrImagePull|ImagePullBackOff)\b.*failed to pull and unpack image\b.*: not found/,
          );
          console.error(out);
          assert.match(out, /^default\s+hello-podmin-local\s+Running\s+fd00:706d:6e:1::/m, out);
          const deleted = await podmin(["--bucket", bucket, "delete", "deployment", "broken"], env);
          assert.equal(deleted.code, 0, deleted.stderr);
        },
      );

      await t.step("a CNI error: status names the Pod with the plugin's own message", async () => {
        const ptp = path.join(stateDir, "node/opt/cni/bin/ptp");
        await Deno.rename(ptp, `${ptp}.off`);
        try {
          await applyDeployment({ name: "nonet", image: "hello:1.0", command: ["/hello"] });
          const out = await statusMatching(/^ {2}nonet-podmin-local: .*ptp/m);
          console.error(out);
          assert.match(out, /^default\s+nonet-podmin-local\s+NoSandbox/m);
        } finally {
          await Deno.rename(`${ptp}.off`, ptp);
        }
        const deleted = await podmin(["--bucket", bucket, "delete", "deployment", "nonet"], env);
        assert.equal(deleted.code, 0, deleted.stderr);
      });

      await t.step("delete removes the Pod; the agent's Pods API watch sees it go", async () => {
        const s = (await readState(stateDir))!;
        const watch = new Deno.Command("nsenter", {
          args: [`--mount=${s.mountNs}`, "--", ...AGENT_COMMAND, "pods", "--watch", "-o", "json"],
          stdout: "piped",
          stderr: "null",
        }).spawn();
        const lines = watch.stdout.pipeThrough(new TextDecoderStream()).getReader();
        let seen = "";
        /** Reads one-line views ({"pods":[…]}) until `done` holds for one. */
        const viewUntil = async (done: (names: string[]) => boolean) => {
          for (;;) {
            const nl = seen.indexOf("\n");
            if (nl >= 0) {
              const view = JSON.parse(seen.slice(0, nl)) as { pods: { name: string }[] };
              seen = seen.slice(nl + 1);
              if (done(view.pods.map((p) => p.name))) return;
              continue;
            }
            const { value, done: end } = await lines.read();
            if (end) throw new Error(`watch ended: ${seen}`);
            seen += value;
          }
        };
        try {
          await viewUntil((names) => names.some((n) => n.startsWith("hello")));
          const deleted = await podmin(["--bucket", bucket, "delete", "deployment", "hello"], env);
          assert.equal(deleted.code, 0, deleted.stderr);
          await viewUntil((names) => !names.some((n) => n.startsWith("hello")));
        } finally {
          watch.kill("SIGTERM");
          await lines.cancel().catch(() => {});
          await watch.status;
        }
        await waitFor(
          "the Pod gone",
          async () =>
            !(await podsApi().catch(() => [{ name: "hello" }])).some((p) =>
              p.name.startsWith("hello")
            ),
          60_000,
        );
      });

      await t.step("down removes what up made and nothing else", async () => {
        const s = (await readState(stateDir))!;
        const left = await localDown({ stateDir, log });
        assert.deepEqual(left, []);
        assert.equal(await hasLoopbackAddress(s.dnsAddress!), false, "the DNS address is gone");
        // The record is not empty: the loops below would otherwise check nothing.
        assert.deepEqual(
          Object.keys(s.daemons).sort(),
          ["containerd", "coredns", "kubelet", "podmin-agent"],
        );
        assert.ok(s.createdPaths.length > 0, "up recorded the paths it created");
        for (const d of Object.values(s.daemons)) {
          assert.equal(await isRunning(d!), false, d!.program);
        }
        for (const p of s.createdPaths) {
          await assert.rejects(Deno.lstat(p), p);
        }
        const mounts = await Deno.readTextFile("/proc/self/mountinfo");
        assert.ok(!mounts.includes(stateDir), "no mount of the node is left");
        await assert.rejects(Deno.stat(path.join(stateDir, "node")));
        await assert.rejects(Deno.stat(path.join(stateDir, "state.json")));
      });
    } finally {
      if (await readState(stateDir).catch(() => undefined)) {
        await localDown({ stateDir, log }).catch((e) => console.error(e));
      }
      await upstream.stop();
      console.error(logs.join("\n"));
      await Deno.remove(work, { recursive: true }).catch(() => {});
    }
  },
);

testWith(
  "real node: a kubelet that refuses its configuration is named by local up and local status with its own message",
  { root: true, tools: ["nsenter", "unshare", "runc"] },
  async () => {
    const host = await readHostFacts();
    if (host.cgroupV2) {
      throw new Error("this test makes a real kubelet refuse cgroup v1 and needs a cgroup v1 host");
    }
    const work = await Deno.makeTempDir({ prefix: "podmin-node-refuse-" });
    const stateDir = path.join(work, "state");
    const logs: string[] = [];
    try {
      // Claiming cgroup v2 drops the failCgroupV1 override: kubelet ≥ 1.35 refuses this host.
      await assert.rejects(
        localUp({
          stateDir,
          binaries: await resolveBinaries({ binDirs: NODE_BINS }),
          agentCommand: AGENT_COMMAND,
          cluster: CLUSTER,
          nodeGroup: "default",
          podPrefix: "fd00:706d:6e:2::/80",
          registryPort: await freePort(),
          sandboxImage: "registry.k8s.io/pause:3.10",
          host: { ...host, cgroupV2: true },
          log: (l) => logs.push(l),
          // The daemons before kubelet (the agent from source among them) must come up first; on
          // a loaded host (three lanes of the suite) the agent took over 60 s once.
          timeoutMs: 180_000,
        }),
        (err: Error) => {
          assert.match(err.message, /^kubelet exited at start: .*cgroup v1/s);
          return true;
        },
      );
      const st = await podmin(["local", "status", "--state-dir", stateDir]);
      assert.equal(st.code, 1);
      assert.match(st.stdout, /^kubelet\s+NOT running: .*cgroup v1/m, st.stdout);
      assert.match(st.stdout, /^containerd\s+running/m);
    } finally {
      await localDown({ stateDir, log: (l) => logs.push(l) });
      await Deno.remove(work, { recursive: true }).catch(() => {});
    }
  },
);

testWith(
  "real node: local up killed half-way leaves a record; the next up recovers and down removes everything",
  { root: true, tools: ["nsenter", "unshare", "runc"] },
  async () => {
    const work = await Deno.makeTempDir({ prefix: "podmin-node-crash-" });
    const stateDir = path.join(work, "state");
    const args = [
      "local",
      "up",
      "--state-dir",
      stateDir,
      ...NODE_BINS.flatMap((d) => ["--bin-dir", d]),
      "--registry-port",
      String(await freePort()),
      "--pod-prefix",
      "fd00:706d:6e:3::/80",
    ];
    try {
      // Kill the CLI as soon as it has started containerd.
      const child = new Deno.Command(Deno.execPath(), {
        args: [
          "run",
          "--allow-all",
          new URL("../../cli/main.ts", import.meta.url).pathname,
          ...args,
        ],
        stdout: "null",
        stderr: "piped",
      }).spawn();
      let seen = "";
      const reader = child.stderr.pipeThrough(new TextDecoderStream()).getReader();
      while (!seen.includes("starting podmin-agent")) {
        const { value, done } = await reader.read();
        if (done) break;
        seen += value;
      }
      assert.match(seen, /starting podmin-agent/, seen);
      child.kill("SIGKILL");
      assert.equal((await child.status).signal, "SIGKILL");
      reader.releaseLock();
      const recorded = (await readState(stateDir))!;
      assert.ok(recorded.daemons.containerd, "the record names the daemon already started");

      const again = await podmin(args);
      assert.equal(again.code, 0, again.stderr);
      assert.match(again.stderr, /local node (partly down|already up)/);
      const st = await podmin(["local", "status", "--state-dir", stateDir]);
      assert.equal(st.code, 0, st.stdout);
      const running = (await readState(stateDir))!.daemons;
      const down = await podmin(["local", "down", "--state-dir", stateDir]);
      assert.equal(down.code, 0, down.stderr);
      // Exited (an orphan may stay a zombie until PID 1 reaps it: that counts as gone). The
      // records are not empty, or the loops would check nothing.
      assert.ok(Object.keys(running).length > 0, "the recovered node records its daemons");
      assert.ok(recorded.createdPaths.length > 0, "the half-way record names created paths");
      for (const d of Object.values(running)) assert.equal(await isRunning(d!), false, d!.program);
      for (const p of recorded.createdPaths) await assert.rejects(Deno.lstat(p), p);
      assert.ok(!(await Deno.readTextFile("/proc/self/mountinfo")).includes(stateDir));
      assert.equal(await hasLoopbackAddress(recorded.dnsAddress!), false);
    } finally {
      if (await readState(stateDir).catch(() => undefined)) {
        await localDown({ stateDir, log: () => {} }).catch((e) => console.error(e));
      }
      await Deno.remove(work, { recursive: true }).catch(() => {});
    }
  },
);

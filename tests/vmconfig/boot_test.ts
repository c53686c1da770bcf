/**
 * vmconfig end to end: the rendered user-data boots a node (and NAT VMs) as root against an
 * isolated root directory (PODMIN_ROOT), downloading real dependency files from moto with
 * requests signed by the instance role of an IMDSv2 emulator (which also answers the EC2 calls
 * bootstrap makes). The VMs' interfaces are veths in a throwaway network namespace
 * (PODMIN_NETNS). systemd and apt-get are the only doubles: recorders.
 * Afterwards the generated containerd config is loaded by the real containerd, the CNI conflist
 * drives the real (installed) ptp/host-local plugins, the Pod routing script runs for real in
 * the node's namespace, and the NAT VM's nat.sh loads its ruleset into the real nftables.
 *
 * This is the fast, unit-level layer (seconds per case, no systemd): the recorders stay for what
 * it checks that a machine cannot show cheaply (each systemctl call configure.sh makes, idempotent
 * re-runs that restart nothing, apt-get's arguments, a Jool stand-in that a machine cannot load).
 * Booting under a real systemd with the real node programs is the machine harness's job
 * (tests/box/: one node, a NAT64 VM, and the cluster box's whole operator path).
 */

import assert from "node:assert/strict";
import { PutObjectCommand, S3Client } from "@aws-sdk/client-s3";
import { moto } from "../support/moto.ts";
import { testWith } from "../support/requirements.ts";
import { startImds } from "../support/imds_emulator.ts";
import {
  aptRecorder,
  deb,
  fakeBinary,
  listTree,
  must,
  netns,
  ownerMode,
  recorder,
  run,
  seedRoot,
  systemctlRecorder,
  tgz,
  vethEni,
} from "./fixture.ts";
import { buildVmconfigArchive } from "../../vmconfig/archive.ts";
import {
  type Dependency,
  dependency,
  POOL4_DETECT,
  renderUserData,
  SOURCES_DETECT,
} from "../../vmconfig/render_user_data.ts";
import { dependencyBlobKey } from "../../core/bucket/bucket_layout.ts";
import { nodePeerProgram } from "../support/node_peers.ts";

const TOOLS = ["curl", "containerd", "bats", "ip", "nft", "dpkg-deb", "useradd"];
/** The real CoreDNS (built from the Go module proxy by tests/setup.sh). */
const COREDNS = nodePeerProgram("coredns");
const NODE_MAC = "02:00:5e:00:00:0a";
const POD_MAC = "02:00:5e:00:00:0b";
const NODE_IP = "2600:1f18:4b2:aa00::a";
const POD_IP = "2600:1f18:4b2:aa00::b";
const PREFIX = "2600:1f18:4b2:aa00:1234::/80";

async function upload(s3: S3Client, bucket: string, key: string, body: Uint8Array) {
  await s3.send(new PutObjectCommand({ Bucket: bucket, Key: key, Body: body }));
}

/** The node's dependency files: fakes, except containerd's CNI plugins, which are real. */
async function nodeFiles(dir: string): Promise<Record<string, [string, Uint8Array]>> {
  const cni: Array<[string, Uint8Array]> = [];
  for (const p of ["ptp", "host-local", "loopback"]) {
    cni.push([`./${p}`, await Deno.readFile(`/usr/lib/cni/${p}`)]);
  }
  const ssm = await deb(
    dir,
    "amazon-ssm-agent",
    "3.3.1",
    ["amazon-ssm-agent", "ssm-agent-worker", "ssm-document-worker", "ssm-session-worker"].map(
      (b) => [`usr/bin/${b}`, fakeBinary(b, "3.3.1")],
    ),
  );
  const a = buildVmconfigArchive();
  return {
    vmconfig: [a.version, a.bytes],
    containerd: [
      "1.6.20",
      tgz(
        ["containerd", "containerd-shim-runc-v2", "ctr"].map((
          b,
        ) => [`bin/${b}`, fakeBinary(b, "1.6.20")]),
      ),
    ],
    runc: ["1.1.5", fakeBinary("runc", "1.1.5")],
    "cni-plugins": ["1.1.1", tgz(cni)],
    crictl: ["1.33.0", tgz([["crictl", fakeBinary("crictl", "1.33.0")]])],
    kubelet: ["1.34.0", fakeBinary("kubelet", "1.34.0")],
    coredns: ["1.12.1", tgz([["coredns", fakeBinary("coredns", "1.12.1")]])],
    "podmin-agent": ["0.1.0", fakeBinary("podmin-agent", "0.1.0")],
    "amazon-ssm-agent": ["3.3.1", ssm],
  };
}

async function publish(
  files: Record<string, [string, Uint8Array]>,
  bucket: string,
  tamper?: string,
): Promise<Dependency[]> {
  const m = await moto();
  const s3 = new S3Client({ region: "us-east-1", endpoint: m.endpoint, forcePathStyle: true });
  const deps: Dependency[] = [];
  for (const [name, [version, bytes]] of Object.entries(files)) {
    const d = dependency(name, version, bytes);
    // A tampered file sits under the key of the digest the user-data expects.
    // Same size, one byte changed: only the digest can tell.
    const body = name === tamper ? bytes.map((b, i) => i === bytes.length - 1 ? b ^ 1 : b) : bytes;
    await upload(s3, bucket, dependencyBlobKey(d.sha256), body);
    deps.push(d);
  }
  s3.destroy();
  return deps;
}

interface Booted {
  root: string;
  out: { code: number; stdout: string; stderr: string };
  recorder: { path: string; log: string };
  apt: { path: string; log: string };
  env: Record<string, string>;
}

async function boot(
  userData: string,
  dir: string,
  extraEnv: Record<string, string>,
): Promise<Booted> {
  const root = `${dir}/root`;
  await seedRoot(root);
  const recorder = await systemctlRecorder(dir);
  const apt = await aptRecorder(dir);
  await Deno.writeTextFile(`${dir}/user-data`, userData);
  const env = {
    PODMIN_ROOT: root,
    SYSTEMCTL: recorder.path,
    APT_GET: apt.path,
    PODMIN_IMDS_ATTEMPTS: "5",
    PODMIN_CURL_RETRIES: "1",
    ...extraEnv,
  };
  const out = await run("bash", [`${dir}/user-data`], { env });
  return { root, out, recorder, apt, env };
}

testWith(
  "vmconfig boot: node user-data installs, configures and routes (moto, IMDSv2, netns)",
  { root: true, tools: [...TOOLS, "dig", "unshare"], files: [new URL(`file://${COREDNS}`)] },
  async (t) => {
    const m = await moto();
    const bucket = await m.createBucket();
    const dir = await Deno.makeTempDir({ prefix: "podmin-vmc-node-" });
    const ns = await netns(`podmin-vmc-${Deno.pid}`);
    const podns = await netns(`podmin-vmc-pod-${Deno.pid}`);
    let addedPodIp = 0;
    const imds = startImds({
      instanceId: "i-0123456789abcdef0",
      availabilityZone: "us-east-1a",
      enis: [
        { mac: NODE_MAC, deviceNumber: 0, interfaceId: "eni-0aaaaaaaaaaaaaaa0", ipv6s: [NODE_IP] },
        {
          mac: POD_MAC,
          deviceNumber: 1,
          interfaceId: "eni-0bbbbbbbbbbbbbbb0",
          ipv6s: [POD_IP],
          prefixToAssign: PREFIX,
        },
      ],
      beforeAssign: async () => {
        const addrs = await must("ip", ["-n", ns.name, "-6", "-o", "addr", "show", "dev", "ens6"]);
        return addrs.includes(POD_IP)
          ? undefined
          : "prefix requested before the Pod ENI had its address";
      },
    });
    try {
      // The node ENI is ready; the Pod ENI gets its address only later (as DHCPv6 would).
      for (const [dev, mac] of [["ens5", NODE_MAC], ["ens6", POD_MAC]]) {
        await vethEni(ns.name, dev, { mac });
      }
      await must("ip", ["-n", ns.name, "addr", "add", `${NODE_IP}/64`, "dev", "ens5", "nodad"]);
      const late = setTimeout(async () => {
        await must("ip", ["-n", ns.name, "addr", "add", `${POD_IP}/64`, "dev", "ens6", "nodad"]);
        addedPodIp = Date.now();
      }, 1500);

      const deps = await publish(await nodeFiles(dir), bucket);
      const ud = renderUserData({
        cluster: "prod",
        bucket,
        region: "us-east-1",
        nodeGroup: "workers",
        architecture: "amd64",
        dependencies: deps,
        workloadCaPublish: "s3://trust-bundles/podmin/prod-ca.pem",
      });
      assert.ok(ud.size <= 16384, `user-data is ${ud.size} bytes`);
      const started = Date.now();
      const b = await boot(ud.text, dir, {
        PODMIN_S3_BASE_URL: `${m.endpoint}/${bucket}`,
        PODMIN_IMDS_ENDPOINTS: imds.endpoint,
        PODMIN_EC2_ENDPOINT: imds.endpoint,
        PODMIN_NETNS: ns.name,
      });
      clearTimeout(late);
      console.error(`node boot took ${Date.now() - started} ms`);
      assert.equal(b.out.code, 0, `user-data failed:\n${b.out.stderr}`);
      assert.deepEqual(imds.violations, []);
      assert.ok(addedPodIp > 0 && imds.assignedAt! >= addedPodIp, "prefix assigned after address");
      const root = b.root;

      await t.step("users, groups, files with fixed owners and modes", async () => {
        const passwd = await Deno.readTextFile(`${root}/etc/passwd`);
        const group = await Deno.readTextFile(`${root}/etc/group`);
        const gid = /^podmin:x:(\d+):/m.exec(group)?.[1];
        assert.ok(gid, "group podmin");
        assert.match(
          passwd,
          new RegExp(`^podmin:x:\\d+:${gid}:Podmin:/var/lib/podmin:/usr/sbin/nologin$`, "m"),
        );
        const uid = /^podmin:x:(\d+):/m.exec(passwd)![1];
        const expect: Record<string, string> = {
          "/usr/local/bin/containerd": "0:0 0755",
          "/usr/local/bin/containerd-shim-runc-v2": "0:0 0755",
          "/usr/local/sbin/runc": "0:0 0755",
          "/usr/local/bin/kubelet": "0:0 0755",
          "/usr/local/bin/crictl": "0:0 0755",
          "/usr/local/bin/podmin-agent": "0:0 0755",
          "/usr/local/bin/coredns": "0:0 0755",
          "/opt/cni/bin/ptp": "0:0 0755",
          "/opt/cni/bin/host-local": "0:0 0755",
          "/usr/bin/amazon-ssm-agent": "0:0 0755",
          "/opt/podmin/bin/configure.sh": "0:0 0755",
          "/opt/podmin/lib/validate.sh": "0:0 0644",
          "/opt/podmin/etc": `0:${gid} 0750`,
          "/opt/podmin/etc/user-data.env": `0:${gid} 0640`,
          "/opt/podmin/etc/detected.env": `0:${gid} 0640`,
          "/opt/podmin/etc/mutable.env": `0:${gid} 0640`,
          "/opt/env": `0:${gid} 0750`,
          "/opt/env/kubelet.env": `0:${gid} 0640`,
          "/etc/podmin/manifests": `0:${gid} 0750`,
          "/var/lib/podmin": `${uid}:${gid} 0750`,
          "/etc/systemd/system/kubelet.service": "0:0 0644",
          "/etc/systemd/system/podmin-coredns.service": "0:0 0644",
          "/etc/podmin/coredns/Corefile": "0:0 0644",
          "/etc/containerd/config.toml": "0:0 0644",
          "/etc/crictl.yaml": "0:0 0644",
          "/etc/cni/net.d/10-podmin.conflist": "0:0 0644",
          "/etc/amazon/ssm/amazon-ssm-agent.json": "0:0 0644",
        };
        for (const [p, want] of Object.entries(expect)) {
          assert.equal(await ownerMode(`${root}${p}`), want, p);
        }
        assert.match(await must(`${root}/usr/local/bin/kubelet`, []), /kubelet 1\.34\.0/);
        const tree = await listTree(root);
        assert.ok(!tree.some((p) => p.includes(".staging")), "staging removed");
      });

      await t.step("layered env files and generated configuration", async () => {
        const det = await Deno.readTextFile(`${root}/opt/podmin/etc/detected.env`);
        for (
          const line of [
            "DETECTED_INSTANCE_ID=i-0123456789abcdef0",
            "DETECTED_NODE_INTERFACE=ens5",
            "DETECTED_POD_INTERFACE=ens6",
            `DETECTED_POD_PREFIX=${PREFIX}`,
            `DETECTED_POD_IPV6=${POD_IP}`,
            "DETECTED_POD_ENI_ID=eni-0bbbbbbbbbbbbbbb0",
            "DETECTED_IMDS_MODE=IPv4",
          ]
        ) assert.ok(det.includes(`${line}\n`), line);
        const agentEnv = await Deno.readTextFile(`${root}/opt/env/podmin-agent.env`);
        for (
          const line of [
            `PODMIN_BUCKET=s3://${bucket}`, // the agent takes URLs only
            "PODMIN_CLUSTER=prod",
            "PODMIN_NODEGROUP=workers",
            `PODMIN_IPV6_PREFIX=${PREFIX}`,
            "PODMIN_REGISTRY_LISTEN=127.0.0.1:5000",
            "PODMIN_NODE_ID=i-0123456789abcdef0", // the instance id from IMDS
            "PODMIN_AGENT_CA_ARGS=--workload-ca-publish=s3://trust-bundles/podmin/prod-ca.pem",
            // The endpoint mesh and the Service zone (CoreDNS reads it from the tmpfs).
            `PODMIN_NODE_ADDRESS=${NODE_IP}`,
            "PODMIN_MESH_LISTEN=[::]:7443",
            "PODMIN_DNS_DIR=/run/podmin/dns",
            "PODMIN_KUBELET_VERSION=1.34.0", // the installed kubelet, for the agent's status
            "AWS_USE_DUALSTACK_ENDPOINT=true",
          ]
        ) assert.ok(agentEnv.includes(`${line}\n`), line);
        const kubelet = await Deno.readTextFile(`${root}/etc/podmin/kubelet/config.yaml`);
        for (
          const s of [
            "staticPodPath: /etc/podmin/manifests",
            "  cpu: 200m\n  memory: 512Mi",
            "enforceNodeAllocatable:\n  - pods",
            // Pods resolve through the node's CoreDNS.
            `clusterDNS:\n  - ${NODE_IP}\nclusterDomain: cluster.local`,
          ]
        ) assert.ok(kubelet.includes(s), s);
        // The installed kubelet is 1.34.0: it knows no Pods API gate, so none is written.
        assert.ok(!kubelet.includes("featureGates"), kubelet);
        const hosts = await Deno.readTextFile(
          `${root}/etc/containerd/certs.d/registry.podmin.internal/hosts.toml`,
        );
        assert.match(
          hosts,
          /\[host\."http:\/\/127\.0\.0\.1:5000"\]\n {2}capabilities = \["pull", "resolve"\]/,
        );
        assert.match(
          await Deno.readTextFile(`${root}/etc/crictl.yaml`),
          /runtime-endpoint: unix:\/\/\/run\/containerd\/containerd\.sock/,
        );
        const ssm = JSON.parse(
          await Deno.readTextFile(`${root}/etc/amazon/ssm/amazon-ssm-agent.json`),
        );
        assert.deepEqual(ssm, { Agent: { Region: "us-east-1", UseDualStackEndpoint: true } });
        const calls = (await Deno.readTextFile(b.recorder.log)).trim().split("\n");
        assert.deepEqual(calls, [
          "daemon-reload",
          "enable podmin-pod-network containerd kubelet podmin-agent podmin-coredns amazon-ssm-agent",
          "restart podmin-pod-network containerd kubelet podmin-agent podmin-coredns amazon-ssm-agent",
        ]);
      });

      await t.step("the real containerd loads the generated config", async () => {
        const gid = /^podmin:x:(\d+):/m.exec(await Deno.readTextFile(`${root}/etc/group`))![1];
        const dump = await must("containerd", [
          "--config",
          `${root}/etc/containerd/config.toml`,
          "config",
          "dump",
        ]);
        assert.match(
          dump,
          /sandbox_image = "registry\.podmin\.internal\/mirror\/registry\.k8s\.io\/pause:3\.10"/,
        );
        assert.match(dump, /config_path = "\/etc\/containerd\/certs\.d"/);
        assert.match(dump, /SystemdCgroup = true/);
        assert.match(dump, new RegExp(`\\[grpc\\][^[]*gid = ${gid}`));
        assert.match(dump, /bin_dir = "\/opt\/cni\/bin"/);
      });

      await t.step("the CNI conflist drives the installed ptp + host-local plugins", async () => {
        const conflist = JSON.parse(
          await Deno.readTextFile(`${root}/etc/cni/net.d/10-podmin.conflist`),
        );
        assert.equal(conflist.plugins.length, 1);
        // As libcni does: each plugin gets name and cniVersion; host-local state stays in the root.
        const conf = {
          ...conflist.plugins[0],
          name: conflist.name,
          cniVersion: conflist.cniVersion,
        };
        conf.ipam = { ...conf.ipam, dataDir: `${root}/var/lib/cni/networks` };
        const cniEnv = (cmd: string) => ({
          CNI_COMMAND: cmd,
          CNI_CONTAINERID: "podmin-test-1",
          CNI_NETNS: `/run/netns/${podns.name}`,
          CNI_IFNAME: "eth0",
          CNI_PATH: `${root}/opt/cni/bin`,
          PATH: Deno.env.get("PATH") ?? "/usr/bin:/bin",
        });
        const ptp = `${root}/opt/cni/bin/ptp`;
        const version = await must("ip", [
          "netns",
          "exec",
          ns.name,
          "env",
          ...Object.entries(cniEnv("VERSION")).map(([k, v]) => `${k}=${v}`),
          ptp,
        ], { stdin: JSON.stringify(conf) });
        assert.ok(JSON.parse(version).supportedVersions.includes("1.0.0"));
        const add = await must("ip", [
          "netns",
          "exec",
          ns.name,
          "env",
          ...Object.entries(cniEnv("ADD")).map(([k, v]) => `${k}=${v}`),
          ptp,
        ], { stdin: JSON.stringify(conf) });
        const result = JSON.parse(add);
        // host-local hands out an address of the delegated prefix (ptp keeps the /80 mask on it
        // but replaces the on-link route by a route via the host side).
        const addr = String(result.ips[0].address).replace(/\/\d+$/, "");
        assert.match(addr, /^2600:1f18:4b2:aa00:1234::[0-9a-f]+$/, addr);
        const gateway = String(result.ips[0].gateway);
        const hostRoute = await must("ip", ["-n", ns.name, "-6", "route", "show", `${addr}/128`]);
        assert.match(hostRoute, new RegExp(`^${addr} dev veth`), `host /128 route: ${hostRoute}`);
        const podRoutes = await must("ip", ["-n", podns.name, "-6", "route", "show", "default"]);
        assert.match(podRoutes, new RegExp(`default via ${gateway} dev eth0`));
        const hostAll = await must("ip", ["-n", ns.name, "-6", "route", "show"]);
        assert.ok(!/bridge|vxlan|geneve/.test(hostAll), "no bridge or overlay");
        await must("ip", [
          "netns",
          "exec",
          ns.name,
          "env",
          ...Object.entries(cniEnv("DEL")).map(([k, v]) => `${k}=${v}`),
          ptp,
        ], { stdin: JSON.stringify(conf) });
        assert.equal(
          (await must("ip", ["-n", ns.name, "-6", "route", "show", `${addr}/128`])).trim(),
          "",
        );
      });

      await t.step("pod-network.sh routes the delegated prefix through the Pod ENI", async () => {
        await must("ip", [
          "-n",
          ns.name,
          "-6",
          "route",
          "add",
          "default",
          "via",
          "fe80::1",
          "dev",
          "ens6",
        ]);
        // The rule of an older version (suppress_prefixlength 0) is replaced, not kept beside.
        await must("ip", [
          "-n",
          ns.name,
          "-6",
          "rule",
          "add",
          "priority",
          "1000",
          "from",
          PREFIX,
          "lookup",
          "main",
          "suppress_prefixlength",
          "0",
        ]);
        const out = await run("ip", [
          "netns",
          "exec",
          ns.name,
          "env",
          `PODMIN_ROOT=${root}`,
          `${root}/opt/podmin/bin/pod-network.sh`,
        ]);
        assert.equal(out.code, 0, out.stderr);
        // Twice: idempotent.
        assert.equal(
          (await run("ip", [
            "netns",
            "exec",
            ns.name,
            "env",
            `PODMIN_ROOT=${root}`,
            `${root}/opt/podmin/bin/pod-network.sh`,
          ])).code,
          0,
        );
        const rules = await must("ip", ["-n", ns.name, "-6", "rule", "show"]);
        assert.match(
          rules,
          new RegExp(
            `1000:\\s+from ${
              PREFIX.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")
            } lookup main suppress_prefixlength 64`,
          ),
        );
        assert.equal(rules.match(/^1000:/gm)?.length, 1, rules);
        assert.equal(rules.match(/^1001:/gm)?.length, 1, rules);
        // A Pod's packet to another node (or its Pods) in the subnet's on-link /64 leaves through
        // the Pod ENI, never the node ENI that main's first /64 route names.
        for (const to of ["2600:1f18:4b2:aa00::77", "2600:1f18:4b2:aa00:5678::9"]) {
          assert.match(
            await must("ip", [
              "-n",
              ns.name,
              "-6",
              "route",
              "get",
              to,
              "from",
              "2600:1f18:4b2:aa00:1234::2",
            ]),
            /via fe80::1 dev ens6 table 100/,
          );
        }
        assert.match(
          await must("ip", ["-n", ns.name, "-6", "route", "show", "table", "100"]),
          /default via fe80::1 dev ens6/,
        );
        assert.match(
          await must("ip", ["-n", ns.name, "-6", "route", "show", "type", "unreachable"]),
          /unreachable 2600:1f18:4b2:aa00:1234::\/80/,
        );
        assert.equal(
          (await must("ip", [
            "netns",
            "exec",
            ns.name,
            "sysctl",
            "-n",
            "net.ipv6.conf.all.forwarding",
          ])).trim(),
          "1",
        );
        assert.equal(
          (await must("ip", [
            "netns",
            "exec",
            ns.name,
            "sysctl",
            "-n",
            "net.ipv6.conf.ens6.accept_ra",
          ])).trim(),
          "2",
        );
      });

      await t.step("configure.sh again changes nothing and restarts nothing", async () => {
        const snapshot = async () => {
          const out: Record<string, string> = {};
          for (const p of await listTree(root)) {
            const st = await Deno.lstat(`${root}${p}`);
            if (st.isFile) out[p] = `${st.mtime?.getTime()} ${await ownerMode(`${root}${p}`)}`;
          }
          return out;
        };
        const before = await snapshot();
        await Deno.writeTextFile(b.recorder.log, "");
        const out = await run(`${root}/opt/podmin/bin/configure.sh`, [], { env: b.env });
        assert.equal(out.code, 0, out.stderr);
        assert.deepEqual(await snapshot(), before);
        const calls = (await Deno.readTextFile(b.recorder.log)).trim().split("\n");
        assert.ok(!calls.some((c) => c.startsWith("restart")), calls.join("\n"));
      });

      await t.step(
        "update-mutable-env.sh: valid keys applied, invalid files rejected",
        async () => {
          await Deno.writeTextFile(`${root}/tmp-mutable.env`, "KUBE_LOG_LEVEL=4\n");
          await Deno.writeTextFile(b.recorder.log, "");
          let out = await run(
            `${root}/opt/podmin/bin/update-mutable-env.sh`,
            ["/tmp-mutable.env"],
            { env: b.env },
          );
          assert.equal(out.code, 0, out.stderr);
          assert.match(
            await Deno.readTextFile(`${root}/opt/env/kubelet.env`),
            /^KUBE_LOG_LEVEL=4$/m,
          );
          assert.match(await Deno.readTextFile(b.recorder.log), /^restart kubelet$/m);
          const accepted = await Deno.readTextFile(`${root}/opt/podmin/etc/mutable.env`);
          await Deno.writeTextFile(`${root}/tmp-mutable.env`, "KUBE_LOG_LEVEL=5\nSURPRISE=1\n");
          out = await run(`${root}/opt/podmin/bin/update-mutable-env.sh`, ["/tmp-mutable.env"], {
            env: b.env,
          });
          assert.equal(out.code, 1);
          assert.match(out.stderr, /unknown key SURPRISE/);
          assert.equal(await Deno.readTextFile(`${root}/opt/podmin/etc/mutable.env`), accepted);
        },
      );

      await t.step(
        "the real CoreDNS with the generated Corefile answers on the node's address: the agent's zone, other names from the VPC resolver",
        async () => {
          // The VPC resolver's address (fd00:ec2::253, the Corefile's default upstream) on this
          // namespace's loopback, served by a second CoreDNS with a name of its own.
          await must("ip", ["-n", ns.name, "addr", "add", "fd00:ec2::253/128", "dev", "lo"]);
          await Deno.writeTextFile(
            `${dir}/Upstream`,
            "example.test:53 {\n    bind fd00:ec2::253\n    hosts {\n        2001:db8::80 www.example.test\n    }\n}\n",
          );
          // A zone as the agent writes it, at the path the Corefile names (a private /run).
          await Deno.writeTextFile(
            `${dir}/cluster.local.db`,
            "$ORIGIN cluster.local.\n$TTL 5\n@ IN SOA ns.dns.cluster.local. hostmaster.cluster.local. 1 60 30 3600 5\n@ IN NS ns.dns.cluster.local.\nweb.shop.svc IN AAAA fd00:10:96::a\n",
          );
          const inNs = (script: string) =>
            new Deno.Command("ip", {
              args: ["netns", "exec", ns.name, "unshare", "--mount", "--propagation", "private"]
                .concat(["bash", "-c", script]),
              stdout: "null",
              stderr: "piped",
            }).spawn();
          const servers = [
            inNs(`exec ${COREDNS} -conf ${dir}/Upstream`),
            inNs(
              `mount -t tmpfs tmpfs /run && mkdir -p /run/podmin/dns && ` +
                `cp ${dir}/cluster.local.db /run/podmin/dns/ && ` +
                `exec ${COREDNS} -conf ${root}/etc/podmin/coredns/Corefile`,
            ),
          ];
          const dig = async (server: string, type: string, name: string) => {
            const out = await run("ip", [
              "netns",
              "exec",
              ns.name,
              "dig",
              `@${server}`,
              "+time=1",
              "+tries=1",
              type,
              name,
            ]);
            const status = /status: (\w+)/.exec(out.stdout)?.[1] ?? "no answer";
            const answer = out.stdout.split(";; ANSWER SECTION:\n")[1]?.split("\n\n")[0] ?? "";
            return {
              status,
              answers: answer.split("\n").filter(Boolean).map((l) => l.split(/\s+/)[4]),
            };
          };
          try {
            const deadline = Date.now() + 20_000;
            let got = await dig(NODE_IP, "AAAA", "web.shop.svc.cluster.local");
            while (got.answers[0] !== "fd00:10:96::a" && Date.now() < deadline) {
              await new Promise((r) => setTimeout(r, 100));
              got = await dig(NODE_IP, "AAAA", "web.shop.svc.cluster.local");
            }
            assert.deepEqual(got, { status: "NOERROR", answers: ["fd00:10:96::a"] });
            // A name outside the zone goes to the VPC resolver.
            assert.deepEqual(await dig(NODE_IP, "AAAA", "www.example.test"), {
              status: "NOERROR",
              answers: ["2001:db8::80"],
            });
            assert.equal(
              (await dig(NODE_IP, "AAAA", "gone.shop.svc.cluster.local")).status,
              "NXDOMAIN",
            );
            // Bound to the node's address only: nothing answers on loopback.
            assert.equal(
              (await dig("::1", "AAAA", "web.shop.svc.cluster.local")).status,
              "no answer",
            );
          } finally {
            for (const p of servers) {
              try {
                p.kill("SIGTERM");
              } catch { /* exited */ }
              const out = await p.output();
              if (out.code !== 0 && out.signal !== "SIGTERM") {
                console.error(new TextDecoder().decode(out.stderr));
              }
            }
          }
        },
      );

      await t.step("systemd-analyze accepts the installed units", async () => {
        for (
          const u of [
            "containerd",
            "kubelet",
            "podmin-agent",
            "podmin-coredns",
            "podmin-pod-network",
            "amazon-ssm-agent",
          ]
        ) {
          const out = await run("systemd-analyze", [
            "verify",
            "--man=no",
            `${root}/etc/systemd/system/${u}.service`,
          ]);
          // The programs live under the root, not on this host: only that complaint is expected.
          const rest = out.stderr.split("\n").filter((l) =>
            l && !/Command \S+ is not executable: No such file/.test(l)
          );
          assert.deepEqual(rest, [], `${u}: ${out.stderr}`);
        }
      });
    } finally {
      await imds.close();
      await ns.close();
      await podns.close();
      await Deno.remove(dir, { recursive: true });
    }
  },
);

testWith(
  "vmconfig boot: runtime-plus-bundle node user-data starts the bundled agent with the pinned runtime",
  { root: true, tools: [...TOOLS, "unshare"] },
  async () => {
    const m = await moto();
    const bucket = await m.createBucket();
    const dir = await Deno.makeTempDir({ prefix: "podmin-vmc-rt-" });
    const ns = await netns(`podmin-vmc-rt-${Deno.pid}`);
    const imds = startImds({
      instanceId: "i-0123456789abcdef1",
      availabilityZone: "us-east-1a",
      enis: [
        { mac: NODE_MAC, deviceNumber: 0, interfaceId: "eni-0aaaaaaaaaaaaaaa1", ipv6s: [NODE_IP] },
        {
          mac: POD_MAC,
          deviceNumber: 1,
          interfaceId: "eni-0bbbbbbbbbbbbbbb1",
          ipv6s: [POD_IP],
          prefixToAssign: PREFIX,
        },
      ],
    });
    try {
      for (const [dev, mac] of [["ens5", NODE_MAC], ["ens6", POD_MAC]]) {
        await vethEni(ns.name, dev, { mac });
      }
      await must("ip", ["-n", ns.name, "addr", "add", `${NODE_IP}/64`, "dev", "ens5", "nodad"]);
      await must("ip", ["-n", ns.name, "addr", "add", `${POD_IP}/64`, "dev", "ens6", "nodad"]);
      // The real distribution: this Deno (the pinned 2.9.6 runtime) and the stamped agent bundle.
      await must("bash", [new URL("../../cli/build.sh", import.meta.url).pathname, "bundle"], {
        env: { PODMIN_DIST: `${dir}/dist` },
      });
      const runtime = await Deno.readFile(Deno.execPath());
      const bundle = await Deno.readFile(`${dir}/dist/podmin-agent.js`);
      const files = await nodeFiles(dir);
      delete files["podmin-agent"];
      files.deno = [Deno.version.deno, runtime];
      files["podmin-agent-bundle"] = ["0.1.0-test", bundle];
      const deps = await publish(files, bucket);
      const ud = renderUserData({
        cluster: "prod",
        bucket,
        region: "us-east-1",
        nodeGroup: "workers",
        architecture: "amd64",
        dependencies: deps,
      });
      const b = await boot(ud.text, dir, {
        PODMIN_S3_BASE_URL: `${m.endpoint}/${bucket}`,
        PODMIN_IMDS_ENDPOINTS: imds.endpoint,
        PODMIN_EC2_ENDPOINT: imds.endpoint,
        PODMIN_NETNS: ns.name,
      });
      assert.equal(b.out.code, 0, `user-data failed:\n${b.out.stderr}`);
      assert.match(
        b.out.stderr,
        /podmin-agent: runtime-plus-bundle \(deno 2\.9\.6, bundle 0\.1\.0-test\)/,
      );
      const root = b.root;
      for (
        const [p, want] of [
          ["/usr/local/lib/podmin/deno", "0:0 0755"],
          ["/usr/local/lib/podmin/podmin-agent.js", "0:0 0644"],
          ["/usr/local/bin/podmin-agent", "0:0 0755"],
        ]
      ) assert.equal(await ownerMode(`${root}${p}`), want, p);
      assert.deepEqual(await Deno.readFile(`${root}/usr/local/lib/podmin/podmin-agent.js`), bundle);
      // systemd starts the unit whose ExecStart is the launcher.
      const unit = await Deno.readTextFile(`${root}/etc/systemd/system/podmin-agent.service`);
      assert.match(unit, /^ExecStart=\/usr\/local\/bin\/podmin-agent run /m);
      const calls = (await Deno.readTextFile(b.recorder.log)).trim().split("\n");
      assert.ok(
        calls.includes(
          "restart podmin-pod-network containerd kubelet podmin-agent podmin-coredns amazon-ssm-agent",
        ),
        calls.join("\n"),
      );
      // The installed launcher, run as the unit runs it, with the node's paths mounted in a
      // private mount namespace: the pinned runtime runs the bundled agent.
      const script = [
        "set -e",
        "mount -t tmpfs tmpfs /usr/local/lib",
        "mkdir /usr/local/lib/podmin",
        `mount --bind ${root}/usr/local/lib/podmin /usr/local/lib/podmin`,
        "mount -t tmpfs tmpfs /var/lib",
        "mkdir -p /var/lib/podmin",
        `exec ${root}/usr/local/bin/podmin-agent --version`,
      ].join("\n");
      const ran = await run("unshare", [
        "--mount",
        "--propagation",
        "private",
        "bash",
        "-c",
        script,
      ]);
      assert.equal(ran.code, 0, ran.stderr);
      assert.match(
        ran.stdout,
        /^podmin-agent 0\.1\.0 \(commit [0-9a-f]{12}(-dirty)?, deno 2\.9\.6, linux\/x86_64\)$/m,
      );
    } finally {
      await imds.close();
      await ns.close();
      await Deno.remove(dir, { recursive: true });
    }
  },
);

testWith(
  "vmconfig boot: a dependency with a wrong sha256 aborts the boot with nothing installed",
  { root: true, tools: TOOLS },
  async () => {
    const m = await moto();
    const bucket = await m.createBucket();
    const dir = await Deno.makeTempDir({ prefix: "podmin-vmc-bad-" });
    const imds = startImds({
      instanceId: "i-0fedcba9876543210",
      availabilityZone: "us-east-1a",
      enis: [],
    });
    try {
      const deps = await publish(await nodeFiles(dir), bucket, "kubelet");
      const ud = renderUserData({
        cluster: "prod",
        bucket,
        region: "us-east-1",
        nodeGroup: "workers",
        architecture: "amd64",
        dependencies: deps,
      });
      const b = await boot(ud.text, dir, {
        PODMIN_S3_BASE_URL: `${m.endpoint}/${bucket}`,
        PODMIN_IMDS_ENDPOINTS: imds.endpoint,
      });
      assert.notEqual(b.out.code, 0);
      assert.match(
        b.out.stderr,
        /sha256 mismatch for kubelet 1\.34\.0: expected [0-9a-f]{64} \(\d+ bytes\), got [0-9a-f]{64}/,
      );
      assert.match(b.out.stderr, /dependency verification failed; nothing installed/);
      // Every file was downloaded (all verified before anything is installed) ...
      assert.ok(imds.requests.some((r) => r.startsWith("GET /latest/meta-data/iam/")));
      // ... and the root holds only what the test seeded.
      assert.deepEqual(await listTree(b.root), [
        "/etc",
        "/etc/group",
        "/etc/gshadow",
        "/etc/passwd",
        "/etc/shadow",
      ]);
      assert.equal(await Deno.readTextFile(b.recorder.log), "");
    } finally {
      await imds.close();
      await Deno.remove(dir, { recursive: true });
    }
  },
);

testWith(
  "vmconfig boot: NAT VM with Jool NAT64, filters before translation, valid nftables ruleset",
  { root: true, tools: TOOLS },
  async () => {
    const m = await moto();
    const bucket = await m.createBucket();
    const dir = await Deno.makeTempDir({ prefix: "podmin-vmc-nat-" });
    const ns = await netns(`podmin-vmc-nat-${Deno.pid}`);
    const imds = startImds({
      instanceId: "i-0aaaabbbbccccdddd",
      availabilityZone: "us-east-1b",
      enis: [{
        mac: "02:00:5e:00:01:0a",
        deviceNumber: 0,
        interfaceId: "eni-0cccccccccccccccc",
        ipv6s: [],
      }],
    });
    try {
      await vethEni(ns.name, "ens5");
      await must("ip", ["-n", ns.name, "addr", "add", "10.99.0.10/24", "dev", "ens5"]);
      await must("ip", ["-n", ns.name, "route", "add", "default", "via", "10.99.0.1"]);
      const kver = (await must("uname", ["-r"])).trim();
      const a = buildVmconfigArchive();
      const files: Record<string, [string, Uint8Array]> = {
        vmconfig: [a.version, a.bytes],
        jool: [
          "4.1.14",
          tgz([
            ["bin/jool", fakeBinary("jool", "4.1.14")],
            [`modules/${kver}/jool_common.ko`, fakeBinary("jool_common.ko", "4.1.14"), 0o644],
            [`modules/${kver}/jool.ko`, fakeBinary("jool.ko", "4.1.14"), 0o644],
          ]),
        ],
      };
      const deps = await publish(files, bucket);
      const ud = renderUserData({
        kind: "nat",
        cluster: "prod",
        bucket,
        region: "us-east-1",
        architecture: "amd64",
        dependencies: deps,
        nat: {
          ipv4SourceCidrs: ["10.0.0.0/16"],
          nat64: { sourceIpv6Cidrs: ["2600:1f18:4b2:aa00::/56"], pool4Address: "10.99.0.10" },
        },
      });
      const b = await boot(ud.text, dir, {
        PODMIN_S3_BASE_URL: `${m.endpoint}/${bucket}`,
        PODMIN_IMDS_ENDPOINTS: imds.endpoint,
        PODMIN_NETNS: ns.name,
      });
      assert.equal(b.out.code, 0, `user-data failed:\n${b.out.stderr}`);
      const root = b.root;
      assert.equal(await ownerMode(`${root}/usr/local/sbin/jool`), "0:0 0755");
      assert.equal(
        await ownerMode(`${root}/usr/lib/modules/${kver}/extra/podmin/jool.ko`),
        "0:0 0644",
      );
      const env = await Deno.readTextFile(`${root}/opt/env/podmin-nat.env`);
      for (
        const line of [
          "NAT_WAN_INTERFACE=ens5",
          "NAT_METRICS_INTERFACE=ens5",
          "NAT_CONNTRACK_MAX=262144",
          "NAT64_ENABLED=true",
          "NAT64_PREFIX=64:ff9b::/96",
          "NAT64_POOL4_ADDRESS=10.99.0.10",
        ]
      ) assert.ok(env.includes(`${line}\n`), line);
      assert.match(
        await Deno.readTextFile(`${root}/etc/sysctl.d/90-podmin-nat.conf`),
        /net\.netfilter\.nf_conntrack_max = 262144/,
      );
      const ruleset = `${root}/etc/podmin/nat/nat.nft`;
      const text = await Deno.readTextFile(ruleset);
      assert.match(text, /64:ff9b:0:0:0:0:a00:0\/104/); // 10.0.0.0/8
      assert.match(text, /64:ff9b:0:0:0:0:a9fe:0\/112/); // 169.254.0.0/16 (instance metadata)
      assert.match(text, /priority raw;[^}]*ip6 daddr 64:ff9b::\/96 ip6 saddr != @nat64_sources/);
      // The real nftables accepts and loads the ruleset in the throwaway namespace.
      await must("ip", ["netns", "exec", ns.name, "nft", "-c", "-f", ruleset]);
      await must("ip", ["netns", "exec", ns.name, "nft", "-f", ruleset]);
      await must("ip", ["netns", "exec", ns.name, "nft", "-f", ruleset]); // idempotent
      const listed = await must("ip", [
        "netns",
        "exec",
        ns.name,
        "nft",
        "list",
        "table",
        "inet",
        "podmin_nat",
      ]);
      assert.match(listed, /set nat64_blocked/);
      assert.match(listed, /ip6 saddr != @nat64_sources counter name "nat64_denied_source" drop/);
      const calls = (await Deno.readTextFile(b.recorder.log)).trim().split("\n");
      assert.deepEqual(calls, ["daemon-reload", "enable podmin-nat", "restart podmin-nat"]);
      // The pinned archive is Jool's source: no attach, no apt-get.
      assert.ok(env.includes("NAT64_JOOL=archive\n"), env);
      assert.ok(!env.includes("NAT64_INTERFACE="), env);
      assert.match(b.out.stderr, /jool: installing the pinned archive jool 4\.1\.14/);
      assert.match(b.out.stderr, /Jool: the pinned jool 4\.1\.14 archive/);
      assert.equal(await Deno.readTextFile(b.apt.log), "");
      assert.deepEqual(imds.attachCalls, []);
      assert.ok(!imds.requests.some((r) => r.includes("/tags/")), "no tag lookup");
    } finally {
      await imds.close();
      await ns.close();
      await Deno.remove(dir, { recursive: true });
    }
  },
);

testWith(
  "vmconfig boot: NAT VM with pool4 and sources detect attaches its stable ENI, routes through it, Jool from Debian",
  { root: true, tools: TOOLS },
  async () => {
    const m = await moto();
    const bucket = await m.createBucket();
    const dir = await Deno.makeTempDir({ prefix: "podmin-vmc-nat64-" });
    const ns = await netns(`podmin-vmc-nat64-${Deno.pid}`);
    const INSTANCE = "i-0aaaabbbbccccddd1";
    const STABLE_ENI = "eni-0dddddddddddddddd";
    const STABLE_MAC = "02:00:5e:00:01:0b";
    const POOL4 = "10.99.0.20";
    const SUBNET = "10.99.0.0/27";
    // The VPC's IPv6 blocks (an Amazon-provided /56 and a second one), as the metadata lists them.
    const VPC_BLOCKS = ["2600:1f18:4b2:aa00::/56", "2600:1f18:77:c100::/56"];
    let addressAt = 0;
    const imds = startImds({
      instanceId: INSTANCE,
      availabilityZone: "us-east-1b",
      enis: [{
        mac: "02:00:5e:00:01:0a",
        deviceNumber: 0,
        interfaceId: "eni-0cccccccccccccccc",
        ipv6s: ["2600:1f18:4b2:ab00::10"],
        localIpv4s: ["10.99.0.10"],
        subnetIpv4CidrBlock: SUBNET,
        vpcIpv6CidrBlocks: VPC_BLOCKS,
      }],
      tags: { "podmin:cluster": "prod", "podmin:nat64": "zone-b", "podmin:nat64-eni": STABLE_ENI },
      attachable: [{
        mac: STABLE_MAC,
        interfaceId: STABLE_ENI,
        ipv6s: ["2600:1f18:4b2:ab00::20"],
        localIpv4s: [POOL4],
        subnetIpv4CidrBlock: SUBNET,
        vpcIpv6CidrBlocks: VPC_BLOCKS,
      }],
      // The replaced instance still holds the ENI for the first attempt.
      attachInUse: 1,
      // Hot-plug: the interface shows up at once, its address (DHCP) a little later.
      onAttach: async (eni) => {
        await vethEni(ns.name, "ens6", { mac: eni.mac, up: false });
        await new Promise((r) => setTimeout(r, 800));
        await must("ip", ["-n", ns.name, "addr", "add", `${POOL4}/27`, "dev", "ens6"]);
        addressAt = Date.now();
      },
    });
    try {
      await vethEni(ns.name, "ens5", { mac: "02:00:5e:00:01:0a" });
      await must("ip", ["-n", ns.name, "addr", "add", "10.99.0.10/27", "dev", "ens5"]);
      await must("ip", ["-n", ns.name, "route", "add", "default", "via", "10.99.0.1"]);
      const kver = (await must("uname", ["-r"])).trim();
      const a = buildVmconfigArchive();
      // No pinned jool: the VM installs Debian's packages.
      const deps = await publish({ vmconfig: [a.version, a.bytes] }, bucket);
      const ud = renderUserData({
        kind: "nat",
        cluster: "prod",
        bucket,
        region: "us-east-1",
        architecture: "arm64",
        dependencies: deps,
        nat: {
          ipv4SourceCidrs: ["10.0.0.0/16"],
          nat64: { sourceIpv6Cidrs: [SOURCES_DETECT], pool4Address: POOL4_DETECT },
        },
      });
      assert.ok(ud.size <= 16384, `user-data is ${ud.size} bytes`);
      const b = await boot(ud.text, dir, {
        PODMIN_S3_BASE_URL: `${m.endpoint}/${bucket}`,
        PODMIN_IMDS_ENDPOINTS: imds.endpoint,
        PODMIN_EC2_ENDPOINT: imds.endpoint,
        PODMIN_NETNS: ns.name,
        PODMIN_EC2_RETRY_SECONDS: "1",
      });
      assert.equal(b.out.code, 0, `user-data failed:\n${b.out.stderr}`);
      assert.deepEqual(imds.violations, []);
      const root = b.root;

      // The ENI id came from the instance tag; the attach was retried while "in use".
      assert.ok(imds.requests.includes("GET /latest/meta-data/tags/instance/podmin:nat64-eni"));
      const attach = { networkInterfaceId: STABLE_ENI, instanceId: INSTANCE, deviceIndex: "1" };
      assert.deepEqual(imds.attachCalls, [
        { ...attach, error: "InvalidNetworkInterface.InUse" },
        attach,
      ]);
      assert.match(b.out.stderr, /AttachNetworkInterface: InvalidNetworkInterface\.InUse/);
      assert.ok(addressAt > 0, "the address was added");
      // Bootstrap waited for the address on the interface (DHCP), not only for the metadata.
      const detectedAt = (await Deno.stat(`${root}/opt/podmin/etc/detected.env`)).mtime!.getTime();
      assert.ok(detectedAt >= addressAt, `detected.env at ${detectedAt}, address at ${addressAt}`);

      // Pool4 is the address the attached interface really holds.
      const onIface = await must("ip", ["-n", ns.name, "-4", "-o", "addr", "show", "dev", "ens6"]);
      assert.match(onIface, new RegExp(`inet ${POOL4.replaceAll(".", "\\.")}/27 `));
      const userDataEnv = await Deno.readTextFile(`${root}/opt/podmin/etc/user-data.env`);
      assert.ok(userDataEnv.includes("\nNAT64_POOL4_ADDRESS=detect\n"), userDataEnv);
      assert.ok(userDataEnv.includes("\nNAT64_SOURCE_IPV6_CIDRS=detect\n"), userDataEnv);
      const det = await Deno.readTextFile(`${root}/opt/podmin/etc/detected.env`);
      for (
        const line of [
          `DETECTED_INSTANCE_ID=${INSTANCE}`,
          "DETECTED_DEFAULT_INTERFACE=ens5",
          `DETECTED_NAT64_ENI_ID=${STABLE_ENI}`,
          "DETECTED_NAT64_INTERFACE=ens6",
          `DETECTED_NAT64_POOL4_ADDRESS=${POOL4}`,
          `DETECTED_NAT64_SUBNET_IPV4_CIDR=${SUBNET}`,
          `DETECTED_NAT64_SOURCE_IPV6_CIDRS=${VPC_BLOCKS.join(",")}`,
        ]
      ) assert.ok(det.includes(`${line}\n`), `${line} in\n${det}`);
      assert.ok(
        imds.requests.includes(
          "GET /latest/meta-data/network/interfaces/macs/02:00:5e:00:01:0a/vpc-ipv6-cidr-blocks",
        ),
        "the VPC's blocks come from the boot ENI's metadata",
      );
      const envFile = `${root}/opt/env/podmin-nat.env`;
      const env = await Deno.readTextFile(envFile);
      // IPv4 leaves through the stable ENI (the EIP's), not the boot ENI.
      assert.deepEqual(env.split("\n").filter((l) => l && !l.startsWith("#")), [
        "NAT_WAN_INTERFACE=ens6",
        "NAT_METRICS_INTERFACE=ens6",
        "NAT_CONNTRACK_MAX=262144",
        "NAT64_ENABLED=true",
        "NAT64_PREFIX=64:ff9b::/96",
        "NAT64_INTERFACE=ens6",
        `NAT64_IPV4_SUBNET=${SUBNET}`,
        "NAT64_IPV4_GATEWAY=10.99.0.1",
        "NAT64_ROUTE_TABLE=110",
        `NAT64_POOL4_ADDRESS=${POOL4}`,
        "NAT64_JOOL=debian",
        "NAT_RULESET=/etc/podmin/nat/nat.nft",
        "NAT_SYSCTL=/etc/sysctl.d/90-podmin-nat.conf",
      ]);

      // Jool: Debian's packages through the apt-get double (never the real apt), logged.
      const apt = (await Deno.readTextFile(b.apt.log)).trim().split("\n");
      const opts = "-q -o DPkg::Lock::Timeout=300 -o Acquire::Retries=5";
      assert.deepEqual(apt, [
        `DEBIAN_FRONTEND=noninteractive ${opts} update`,
        `DEBIAN_FRONTEND=noninteractive ${opts} -y --no-install-recommends install ` +
        `jool-dkms jool-tools linux-headers-${kver}`,
      ]);
      assert.match(b.out.stderr, /jool: no pinned archive/);
      assert.match(
        b.out.stderr,
        /Jool: no pinned jool dependency; installing Debian's jool-dkms jool-tools linux-headers-/,
      );
      await assert.rejects(Deno.lstat(`${root}/usr/local/sbin/jool`));
      assert.deepEqual((await Deno.readTextFile(b.recorder.log)).trim().split("\n"), [
        "daemon-reload",
        "enable podmin-nat",
        "restart podmin-nat",
      ]);

      // The detected VPC blocks are the NAT64 source allowlist; source NAT leaves through ens6.
      const ruleset = await Deno.readTextFile(`${root}/etc/podmin/nat/nat.nft`);
      assert.ok(
        ruleset.includes(
          `set nat64_sources {\n    type ipv6_addr; flags interval;\n` +
            `    elements = { ${VPC_BLOCKS.join(", ")} }\n  }`,
        ),
        ruleset,
      );
      assert.ok(!/detect|::\/0/.test(ruleset), ruleset);
      const sysctlConf = await Deno.readTextFile(`${root}/etc/sysctl.d/90-podmin-nat.conf`);
      assert.match(sysctlConf, /^net\.ipv6\.conf\.\*\.accept_ra = 2$/m);
      // The real sysctl applies the file in the VM's namespace (but the conntrack maximum, which
      // only the initial namespace may set): router advertisements stay on with forwarding.
      await must("ip", ["netns", "exec", ns.name, "sysctl", "-q", "-p-"], {
        stdin: sysctlConf.replace(/^net\.netfilter\..*$/m, ""),
      });
      const sysctlGet = async (key: string) =>
        (await must("ip", ["netns", "exec", ns.name, "sysctl", "-n", key])).trim();
      assert.equal(await sysctlGet("net.ipv6.conf.ens6.accept_ra"), "2");
      assert.equal(await sysctlGet("net.ipv6.conf.ens6.forwarding"), "1");
      assert.equal(await sysctlGet("net.ipv4.conf.ens6.send_redirects"), "0");
      // The stable ENI's router advertisement (the VPC router's link-local address).
      await must("ip", [
        "-n",
        ns.name,
        "-6",
        "route",
        "add",
        "default",
        "via",
        "fe80::1",
        "dev",
        "ens6",
      ]);

      // podmin-nat.service's script, in the VM's namespace: the real nftables loads the ruleset,
      // the real ip sets up the routing; kernel modules, sysctl and Jool's program (as jool-tools
      // would install it) are recorders.
      const stubs = `${dir}/stubs`;
      await Deno.mkdir(stubs);
      for (const c of ["modprobe", "sysctl", "insmod", "modinfo"]) {
        await Deno.rename((await recorder(dir, c)).path, `${stubs}/${c}`);
      }
      const jool = await recorder(dir, "jool");
      await Deno.mkdir(`${root}/usr/bin`, { recursive: true });
      await Deno.copyFile(jool.path, `${root}/usr/bin/jool`);
      await Deno.chmod(`${root}/usr/bin/jool`, 0o755);
      const natSh = () =>
        run("ip", [
          "netns",
          "exec",
          ns.name,
          "env",
          `PODMIN_ROOT=${root}`,
          `PATH=${stubs}:${Deno.env.get("PATH") ?? "/usr/sbin:/usr/bin:/sbin:/bin"}`,
          `${root}/opt/podmin/bin/nat.sh`,
        ]);
      const natOut = await natSh();
      assert.equal(natOut.code, 0, natOut.stderr);
      assert.match(
        natOut.stderr,
        /NAT64 egress through ens6: table 110, IPv4 via 10\.99\.0\.1, IPv6 via fe80::1/,
      );
      assert.match(natOut.stderr, /NAT64 64:ff9b::\/96 -> 10\.99\.0\.20 \(Jool instance podmin\)/);
      assert.deepEqual((await Deno.readTextFile(`${dir}/modprobe.log`)).trim().split("\n"), [
        "nf_conntrack",
        "-a nf_defrag_ipv4 nf_defrag_ipv6",
        "jool",
      ]);
      assert.equal(await Deno.readTextFile(`${dir}/insmod.log`), "");
      assert.deepEqual((await Deno.readTextFile(jool.log)).trim().split("\n"), [
        "instance display",
        "instance add podmin --netfilter --pool6 64:ff9b::/96",
        `-i podmin pool4 add --tcp ${POOL4} 61001-65535`,
        `-i podmin pool4 add --udp ${POOL4} 61001-65535`,
        `-i podmin pool4 add --icmp ${POOL4} 61001-65535`,
      ]);
      const listed = await must("ip", [
        "netns",
        "exec",
        ns.name,
        "nft",
        "list",
        "table",
        "inet",
        "podmin_nat",
      ]);
      assert.match(listed, /ip6 saddr != @nat64_sources counter name "nat64_denied_source" drop/);
      assert.match(
        listed,
        /oifname "ens6" meta l4proto \{ icmp, tcp, udp \} masquerade to :1024-61000\n/,
      );
      assert.match(listed, /oifname "ens6" masquerade\n/);
      assert.ok(!listed.includes('"ens5"'), listed);
      const sourcesSet = /set nat64_sources \{[^}]*\}/.exec(listed)?.[0] ?? "";
      for (const block of VPC_BLOCKS) assert.ok(sourcesSet.includes(block), sourcesSet);
      assert.equal(sourcesSet.match(/\/56/g)?.length, VPC_BLOCKS.length, sourcesSet);

      // The routing the kernel really has: pool4-sourced IPv4 (Jool), IPv4 forwarded from the
      // stable ENI (source NAT) and IPv6 from the NAT64 prefix (Jool's replies) use table 110,
      // whose default routes leave through ens6; the main table still uses the boot ENI.
      const routing = async () => ({
        rules4: await must("ip", ["-n", ns.name, "-4", "rule", "show"]),
        rules6: await must("ip", ["-n", ns.name, "-6", "rule", "show"]),
        table4: await must("ip", ["-n", ns.name, "-4", "route", "show", "table", "110"]),
        table6: await must("ip", ["-n", ns.name, "-6", "route", "show", "table", "110"]),
        main4: await must("ip", ["-n", ns.name, "-4", "route", "show", "default"]),
      });
      const r1 = await routing();
      assert.match(r1.rules4, /^1100:\s+from 10\.99\.0\.20 lookup 110\s*$/m);
      assert.match(r1.rules4, /^1101:\s+from all iif ens6 lookup 110\s*$/m);
      assert.match(r1.rules6, /^1100:\s+from 64:ff9b::\/96 lookup 110\s*$/m);
      assert.match(r1.table4, /^default via 10\.99\.0\.1 dev ens6\s*$/m);
      assert.match(r1.table4, /^10\.99\.0\.0\/27 dev ens6 scope link src 10\.99\.0\.20\s*$/m);
      assert.equal(r1.table4.trim().split("\n").length, 2, r1.table4);
      assert.match(r1.table6, /^default via fe80::1 dev ens6 /m);
      assert.equal(r1.table6.trim().split("\n").length, 1, r1.table6);
      assert.match(r1.main4, /^default via 10\.99\.0\.1 dev ens5/m);
      const get = async (...args: string[]) =>
        (await must("ip", ["-n", ns.name, ...args])).split("\n")[0];
      assert.match(
        await get("-4", "route", "get", "8.8.8.8", "from", POOL4),
        /via 10\.99\.0\.1 dev ens6 table 110/,
      );
      assert.match(
        await get("-4", "route", "get", "8.8.8.8", "from", "10.0.7.7", "iif", "ens6"),
        /via 10\.99\.0\.1 dev ens6 table 110/,
      );
      assert.match(
        await get("-6", "route", "get", "2600:1f18:4b2:aa07::7", "from", "64:ff9b::808:808"),
        /via fe80::1 dev ens6 table 110/,
      );
      assert.match(await get("-4", "route", "get", "8.8.8.8"), /via 10\.99\.0\.1 dev ens5 /);
      assert.equal(r1.rules4.match(/^110[01]:/gm)?.length, 2, r1.rules4);
      assert.equal(r1.rules6.match(/^1100:/gm)?.length, 1, r1.rules6);
      // Every boot (and every restart) rewrites the same state: nothing added twice, and what
      // an earlier run (or an operator) left at its priorities and in its table is replaced.
      const ipn = (...args: string[]) => must("ip", ["-n", ns.name, ...args]);
      await ipn("-4", "rule", "add", "priority", "1100", "from", "10.99.0.30", "lookup", "110");
      await ipn("-4", "route", "add", "192.0.2.0/24", "dev", "ens6", "table", "110");
      const natAgain = await natSh();
      assert.equal(natAgain.code, 0, natAgain.stderr);
      assert.deepEqual(await routing(), r1);
      // Without an IPv6 router on the stable ENI it waits, then fails, and changes nothing.
      await ipn("-6", "route", "del", "default", "via", "fe80::1", "dev", "ens6");
      const noRouter = await run("ip", [
        "netns",
        "exec",
        ns.name,
        "env",
        `PODMIN_ROOT=${root}`,
        "NAT64_ENI_WAIT_SECONDS=1",
        `PATH=${stubs}:${Deno.env.get("PATH") ?? "/usr/sbin:/usr/bin:/sbin:/bin"}`,
        `${root}/opt/podmin/bin/nat.sh`,
      ]);
      assert.notEqual(noRouter.code, 0);
      assert.match(
        noRouter.stderr,
        /the NAT64 interface ens6 has no address 10\.99\.0\.20 or no IPv6 router after 1s/,
      );
      assert.deepEqual(await routing(), r1);

      // configure.sh again: no apt-get, no restart, no change.
      const before = env;
      await Deno.writeTextFile(b.recorder.log, "");
      const again = await run(`${root}/opt/podmin/bin/configure.sh`, [], { env: b.env });
      assert.equal(again.code, 0, again.stderr);
      assert.match(again.stderr, /Jool: Debian's packages, already installed/);
      assert.equal((await Deno.readTextFile(b.apt.log)).trim().split("\n").length, 2);
      assert.ok(!(await Deno.readTextFile(b.recorder.log)).includes("restart"));
      assert.equal(await Deno.readTextFile(envFile), before);
      assert.equal(imds.attachCalls.length, 2);

      // A bootstrap run again (e.g. after a failure past the attach) finds the ENI attached.
      const detected = `${root}/opt/podmin/etc/detected.env`;
      await Deno.remove(detected);
      const rerun = await run(`${root}/opt/podmin/bin/configure.sh`, [], { env: b.env });
      assert.equal(rerun.code, 0, rerun.stderr);
      assert.match(rerun.stderr, new RegExp(`the NAT64 ENI ${STABLE_ENI} is already attached`));
      assert.equal(imds.attachCalls.length, 2);
      assert.equal(await Deno.readTextFile(detected), det);
      assert.deepEqual(imds.violations, []);
    } finally {
      await imds.close();
      await ns.close();
      await Deno.remove(dir, { recursive: true });
    }
  },
);

testWith(
  "vmconfig boot: NAT64 sources detect refuses a VPC without IPv6 blocks or with a malformed one",
  { root: true, tools: TOOLS },
  async () => {
    const dir = await Deno.makeTempDir({ prefix: "podmin-vmc-nat64-src-" });
    const ns = await netns(`podmin-vmc-src-${Deno.pid}`);
    try {
      await vethEni(ns.name, "ens5", { peerUp: false });
      await must("ip", ["-n", ns.name, "addr", "add", "10.99.0.10/27", "dev", "ens5"]);
      await must("ip", ["-n", ns.name, "route", "add", "default", "via", "10.99.0.1"]);
      const cases: Array<[string[], RegExp]> = [
        [[], /NAT64_SOURCE_IPV6_CIDRS=detect, but the VPC has no IPv6 CIDR block/],
        [["::/0"], /malformed VPC IPv6 CIDR block in the metadata: ::\/0/],
        [
          ["2600:1f18:4b2:aa00::/56", "2600:1f18:4b2:aa00::1/56"],
          /metadata: 2600:1f18:4b2:aa00::1\/56/,
        ],
        [
          ["2600:1f18:4b2:aa00::/56", "detect"],
          /malformed VPC IPv6 CIDR block in the metadata: detect/,
        ],
      ];
      for (const [blocks, want] of cases) {
        const root = `${dir}/root`;
        await Deno.remove(root, { recursive: true }).catch(() => {});
        await seedRoot(root);
        const imds = startImds({
          instanceId: "i-0aaaabbbbccccddd2",
          availabilityZone: "us-east-1b",
          enis: [{
            mac: "02:00:5e:00:01:0a",
            deviceNumber: 0,
            interfaceId: "eni-0cccccccccccccccc",
            ipv6s: [],
            vpcIpv6CidrBlocks: blocks,
          }],
        });
        try {
          const out = await run(
            new URL("../../vmconfig/bin/bootstrap.sh", import.meta.url).pathname,
            [
              "nat",
              "us-east-1",
            ],
            {
              env: {
                PODMIN_ROOT: root,
                PODMIN_IMDS_ENDPOINTS: imds.endpoint,
                PODMIN_IMDS_ATTEMPTS: "2",
                PODMIN_NETNS: ns.name,
                NAT64_SOURCE_IPV6_CIDRS: "detect",
                PATH: Deno.env.get("PATH") ?? "/usr/sbin:/usr/bin:/sbin:/bin",
              },
            },
          );
          assert.notEqual(out.code, 0, JSON.stringify(blocks));
          assert.match(out.stderr, want);
          await assert.rejects(Deno.lstat(`${root}/opt/podmin/etc/detected.env`));
        } finally {
          await imds.close();
        }
      }
    } finally {
      await ns.close();
      await Deno.remove(dir, { recursive: true });
    }
  },
);

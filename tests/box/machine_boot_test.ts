/**
 * Instances that boot (issue 31 item 2): one node machine of the machine harness
 * (tests/support/machine.ts: systemd-nspawn, Debian bookworm, systemd as PID 1) boots from the
 * user-data vmconfig renders for a NodeGroup. Its dependencies are what setup's own dependency
 * sync (cli/setup/dependency_sync.ts) uploads to the bucket (moto) from a catalogue pointing at a
 * local file server that holds the test-built kubelet, containerd, crictl, CoreDNS, Debian's runc
 * and CNI plugins, with their real digests, plus the agent as setup ships it here (the pinned Deno
 * runtime and the agent bundle); setup's CAs go to moto's Parameter Store and its empty indexes
 * to the bucket. The machine reaches the bucket and its IMDSv2 emulator through the VPC.
 *
 * It must reach: containerd, kubelet, CoreDNS and podmin-agent active under the machine's systemd,
 * kubelet healthy with its Pods in systemd's kubepods.slice, `crictl ps` working through the
 * generated /etc/crictl.yaml, the agent's node record in the bucket under the instance id, CoreDNS
 * answering the cluster zone on the node's address, and a Deployment applied with `podmin apply`
 * (its image pushed with `podmin push`, the sandbox image built and stored as podmin local does
 * offline) running as a static Pod whose address in the delegated /80 answers from the VPC; then
 * after a power-off and a second boot (cloud-init does not run the user-data again) the same. A failed step is named, with the machine's cloud-init output and the
 * journal of every unit that is not active. Afterwards nothing of the run is left.
 */

import assert from "node:assert/strict";
import * as path from "node:path";
import { GetObjectCommand, S3Client } from "@aws-sdk/client-s3";
import { SSMClient } from "@aws-sdk/client-ssm";
import { readHostFacts } from "../../cli/local/host_overrides.ts";
import { writeDemoImageLayout } from "../../cli/local/demo_image.ts";
import { ensureSandboxImage } from "../../cli/local/local_node.ts";
import { ensureClusterCas } from "../../cli/setup/cluster_cas.ts";
import { DEPLOYMENT_INDEX, dnsNodeKey, SERVICE_INDEX } from "../../core/bucket/bucket_layout.ts";
import {
  emptyDeploymentIndex,
  serializeDeploymentIndex,
} from "../../core/bucket/deployment_index.ts";
import { emptyServiceIndex, serializeServiceIndex } from "../../core/bucket/service_index.ts";
import { openStore } from "../../core/store/store_url.ts";
import {
  DEFAULT_SANDBOX_IMAGE,
  dependenciesForKind,
  renderUserData,
} from "../../vmconfig/render_user_data.ts";
import { REGISTRY_HOSTNAME } from "../../core/model/image_ref.ts";
import { podmin } from "../support/programs.ts";
import { openBoxRun } from "../support/box_run.ts";
import { nodeOverrides } from "../support/box_node_overrides.ts";
import { createVpc } from "../support/box_vpc.ts";
import { cgroupDirs } from "../support/box_cgroups.ts";
import {
  agentBundle,
  artifactVersions,
  publishAsSetup,
  vmconfigDependency,
} from "../support/box_setup.ts";
import { machineSteps, until } from "../support/box_steps.ts";
import { TUNABLES_UNIT } from "../support/box_overrides.ts";
import { mustRun, runCommand } from "../support/command.ts";
import { Machine } from "../support/machine.ts";
import { moto } from "../support/moto.ts";
import { nodePeerProgram } from "../support/node_peers.ts";
import { testWith } from "../support/requirements.ts";
import { HOST_ARCH, vendorArtifacts } from "../support/vendor_artifacts.ts";

const ROOT = new URL("../../", import.meta.url).pathname;
const BUILD_ROOTFS = path.join(ROOT, "tests/peers/build_machine_rootfs.sh");
const CLUSTER = "box";
const NODEGROUP = "workers";
/** The node services the user-data enables (vmconfig's configure.sh, node kind). */
const SERVICES = [
  "containerd.service",
  "kubelet.service",
  "podmin-coredns.service",
  "podmin-agent.service",
];
const UNITS = ["podmin-box-user-data.service", "podmin-pod-network.service", ...SERVICES];
/** Generous bounds for a slow, shared machine: they only stop a wait that would never end. */
const USER_DATA_MS = 15 * 60_000;
const SERVICES_MS = 5 * 60_000;
const POWER_OFF_MS = 4 * 60_000;

testWith(
  "machine: a node machine boots from its NodeGroup's user-data with setup's dependencies; containerd, kubelet, CoreDNS, the agent and a Deployment's Pod come up, and again after a reboot; nothing is left",
  {
    root: true,
    tools: [
      "systemd-nspawn",
      "mmdebstrap",
      "nsenter",
      "unshare",
      "ip",
      "nft",
      "tar",
      "runc",
      "dig",
    ],
    files: (["kubelet", "containerd", "crictl", "coredns"] as const).map((p) =>
      new URL(`file://${nodePeerProgram(p)}`)
    ),
  },
  async () => {
    const rootfs = (await mustRun("bash", [BUILD_ROOTFS])).trim();
    const run = await openBoxRun();
    const vpc = await createVpc(run);
    const work = path.join(run.dir, "work");
    await Deno.mkdir(work);
    let machine: Machine | undefined;
    const step = machineSteps(() => machine, UNITS);
    try {
      // What `podmin setup` uploads: the dependencies (its own sync, from the catalogue), the
      // cluster CAs and the empty indexes.
      const m = await moto();
      const bucket = await m.createBucket();
      const published = await step("setup uploads the dependencies", async () => {
        const artifacts = await vendorArtifacts(work);
        artifacts.set("deno", await Deno.readFile(Deno.execPath()));
        const store = openStore(`s3://${bucket}`);
        const entries = await publishAsSetup({
          store,
          work,
          artifacts,
          versions: await artifactVersions(),
          local: [vmconfigDependency(), await agentBundle(work)],
        });
        await ensureClusterCas({ ssm: new SSMClient({ region: "us-east-1" }), cluster: CLUSTER });
        await store.put(DEPLOYMENT_INDEX, serializeDeploymentIndex(emptyDeploymentIndex()));
        await store.put(SERVICE_INDEX, serializeServiceIndex(emptyServiceIndex()));
        // The sandbox image at its mirror path (built here, as podmin local does offline).
        await ensureSandboxImage({
          store,
          ref: DEFAULT_SANDBOX_IMAGE,
          log: () => {},
          offline: true,
        });
        return entries;
      });
      const s3 = vpc.expose(m.port);
      const userData = renderUserData({
        cluster: CLUSTER,
        bucket,
        region: "us-east-1",
        nodeGroup: NODEGROUP,
        architecture: HOST_ARCH,
        dependencies: dependenciesForKind("node", published),
        s3BaseUrl: `${s3.url}/${bucket}`,
      });
      const overrides = nodeOverrides({ host: await readHostFacts(), awsEndpointUrl: s3.url });
      for (const o of overrides) console.error(`machine override ${o.file}: ${o.reason}`);
      machine = await Machine.create({
        run,
        vpc,
        name: "m0",
        index: 0,
        rootfs,
        userData: userData.text,
        files: overrides,
        enable: [TUNABLES_UNIT],
      });
      const node = machine;

      /** Every node service up and doing its job. */
      const servicesUp = async (boot: string, firstBoot: boolean) => {
        for (const unit of SERVICES) {
          await step(`${boot}: ${unit} active`, () =>
            until(unit, SERVICES_MS, async () => {
              const state = await node.unitState(unit);
              return [state.startsWith("active/running"), state];
            }));
        }
        await step(`${boot}: crictl ps through /etc/crictl.yaml`, async () => {
          const yaml = await node.must(["cat", "/etc/crictl.yaml"]);
          assert.match(yaml, /^runtime-endpoint: unix:\/\/\/run\/containerd\/containerd\.sock$/m);
          const ps = await node.must(["crictl", "ps", "-a"]);
          assert.match(ps, /^CONTAINER\s+IMAGE\s+CREATED\s+STATE\s+NAME/m);
          const info = JSON.parse(await node.must(["crictl", "info"]));
          assert.equal(
            info.status.conditions.find((c: { type: string }) => c.type === "RuntimeReady")?.status,
            true,
          );
        });
        await step(
          `${boot}: CoreDNS answers the cluster zone on the node's address`,
          () =>
            until("dig SOA cluster.local", SERVICES_MS, async () => {
              const out = await runCommand("ip", [
                "netns",
                "exec",
                node.network.netns,
                "dig",
                "+time=2",
                "+tries=1",
                `@${node.network.node.ipv6}`,
                "SOA",
                "cluster.local",
              ]);
              return [
                /status: NOERROR/.test(out.stdout) && /IN\s+SOA/.test(out.stdout),
                out.stdout,
              ];
            }),
        );
        if (firstBoot) {
          await step(
            "the agent's node record in the bucket",
            () =>
              until("node record", SERVICES_MS, async () => {
                const s3c = new S3Client({ region: "us-east-1", forcePathStyle: true });
                try {
                  const got = await s3c.send(
                    new GetObjectCommand({
                      Bucket: bucket,
                      Key: dnsNodeKey(NODEGROUP, node.instanceId),
                    }),
                  );
                  const text = await got.Body!.transformToString();
                  return [text.includes(node.network.node.ipv6), text];
                } finally {
                  s3c.destroy();
                }
              }),
          );
        }
        await step(
          `${boot}: kubelet healthy`,
          () =>
            until("kubelet /healthz", SERVICES_MS, async () => {
              const out = await node.exec(["curl", "-fsS", "http://127.0.0.1:10248/healthz"]);
              return [out.stdout === "ok", out.stdout + out.stderr];
            }),
        );
        // kubelet runs with the generated cgroupDriver: systemd, through the machine's systemd.
        await step(`${boot}: kubelet's Pod cgroups are systemd's kubepods.slice`, async () => {
          assert.match(
            await node.must(["cat", "/etc/podmin/kubelet/config.yaml"]),
            /^cgroupDriver: systemd$/m,
          );
          assert.match(await node.unitState("kubepods.slice"), /^active\/active /);
        });
        await step(
          `${boot}: the Deployment's Pod runs and answers from the VPC`,
          () =>
            until("the Pod answering", SERVICES_MS, async () => {
              const ps = await node.exec([
                "crictl",
                "ps",
                "--name",
                "hello",
                "--state",
                "running",
                "-q",
              ]);
              const id = ps.stdout.trim().split("\n")[0];
              if (!id) {
                const pods = await node.exec(["crictl", "pods"]);
                const manifests = await node.exec(["ls", "-l", "/etc/podmin/manifests"]);
                return [
                  false,
                  `no running hello container; pods: ${pods.stdout}${pods.stderr}; manifests: ${manifests.stdout}${manifests.stderr}`,
                ];
              }
              const pod = JSON.parse(await node.must(["crictl", "inspect", id])).info?.sandboxID;
              const ip = JSON.parse(await node.must(["crictl", "inspectp", pod])).status?.network
                ?.ip;
              const out = await runCommand("ip", [
                "netns",
                "exec",
                vpc.netns,
                "curl",
                "-sS",
                "--max-time",
                "3",
                `http://[${ip}]:8080/`,
              ]);
              return [
                /hello from the machine/.test(out.stdout),
                `${ip}: ${out.stdout}${out.stderr}`,
              ];
            }),
          ["kubelet.service", "containerd.service", "podmin-agent.service"],
        );
      };

      await step("boot", () => node.boot());
      await step("user-data (cloud-init)", () => node.waitUserData(USER_DATA_MS));
      const firstOutput = await node.cloudInitOutput();
      assert.match(firstOutput, /podmin-user-data: verified \d+ dependency files/);
      assert.match(firstOutput, /podmin-user-data: boot complete \(node\)/);
      await step("push the demo image and apply a Deployment", async () => {
        const dir = await writeDemoImageLayout({
          dir: path.join(work, "demo-1.0"),
          version: "1.0",
          arches: [HOST_ARCH],
        });
        const bucketUrl = `s3://${bucket}`;
        const pushed = await podmin([
          "--bucket",
          bucketUrl,
          "push",
          `oci:${dir}:1.0`,
          "apps/demo:1.0",
        ]);
        assert.equal(pushed.code, 0, pushed.stderr);
        const file = path.join(work, "hello.yaml");
        await Deno.writeTextFile(
          file,
          `apiVersion: podmin.dev/v1
kind: Deployment
metadata: {name: hello}
spec:
  nodeGroup: ${NODEGROUP}
  template:
    metadata: {labels: {app: hello}}
    spec:
      terminationGracePeriodSeconds: 1
      containers:
        - name: hello
          image: ${REGISTRY_HOSTNAME}/apps/demo:1.0
          args: ["serve", "8080"]
          env: [{name: GREETING, value: "hello from the machine"}]
`,
        );
        const applied = await podmin(["--bucket", bucketUrl, "apply", "-f", file]);
        assert.equal(applied.code, 0, applied.stderr);
      });
      await servicesUp("first boot", true);
      // systemd stops the Pod's scope with SIGTERM (no graceful node shutdown in the kubelet
      // configuration): the demo server and the pause sandbox (PID 1 of the Pod's PID namespace)
      // end on it. Before the pause program had a handler, systemd waited its 90 s stop timeout.
      await step("power off", () => node.stop(POWER_OFF_MS));
      await step("boot again", () => node.boot());
      await servicesUp("second boot", false);
      await step("the user-data ran once", async () => {
        assert.equal(
          await node.unitState("podmin-box-user-data.service"),
          "inactive/dead (success)",
        );
        assert.equal(await node.cloudInitOutput(), firstOutput);
      });
    } finally {
      await machine?.destroy();
      await vpc.close();
      await run.close();
    }
    // Nothing of the run is left: directory, namespaces, links, cgroups.
    await assert.rejects(Deno.stat(run.dir));
    const netns = await mustRun("ip", ["netns", "list"]);
    assert.ok(!netns.includes(run.id), netns);
    const links = await mustRun("ip", ["-o", "link", "show"]);
    assert.ok(!links.includes(run.id), links);
    assert.deepEqual(await cgroupDirs(run.id), []);
  },
);

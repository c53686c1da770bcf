/**
 * The operator's path end to end (issue 31 item 3), in the cluster box: `podmin setup` of two
 * NodeGroups (`default` and `workers,size=3`) applied by real OpenTofu on moto (with its shims,
 * tests/support/real_tofu_cluster.ts); the four instances moto's Auto Scaling Groups launched
 * boot as machines of the machine harness from exactly the user-data EC2 hands them
 * (tests/support/box_fleet.ts), with the dependencies setup published (the test-built kubelet,
 * containerd, crictl, CoreDNS, Debian's runc and CNI plugins, this Deno and the agent bundle:
 * tests/support/box_sources.ts); their agents converge (`podmin get nodes`: four Converged).
 * Then `podmin push` and `apply` of a Deployment on `workers` with a Service, its value in
 * Parameter Store, and of a client Deployment on `default`: from the client Pod the Service's
 * name resolves through its node's CoreDNS and TCP and UDP requests reach every worker Pod
 * through the eBPF dataplane; each worker Pod answers with its Parameter Store value and holds a
 * certificate `openssl verify` accepts against the published workload CA certificates;
 * `crictl ps` works through the generated /etc/crictl.yaml on every machine.
 *
 * The rollouts (issue 32 item 5; tests/support/box_rollout.ts), each with a client loop in the
 * client Pod asking the Service by name (TCP) and VIP (UDP) without pause, the rollout object
 * (the budget, maxUnavailable 1) read throughout and the agents' own log of their transitions:
 * a new image version across the three workers (0 failed requests, every worker on it, at most
 * one node in transition in the object and in the nodes' account); an image whose container
 * exits at once (halted after the first wave with 0 failed requests, `rollout status` naming the
 * node and kubelet's reason, autoRevert returning every worker to the old spec); a version rolled
 * out while the mesh coordinator's agent is killed (SIGKILL; systemd restarts it) and a worker in
 * transition loses power and boots again (the budget held, the rollout completed, the rebooted
 * worker on the new spec, no failed request before the power cut).
 *
 * A changed pin and `podmin setup` again: tofu modifies the launch templates and ASGs and nothing
 * else, and starts each group's instance refresh, which the box performs as EC2 would (each
 * instance replaced by one booted from the new user-data, launched before the old one stops; the
 * groups concurrently, the workers one at a time; the Service answers after each worker).
 * `podmin teardown` and `destroy` leave nothing in moto; afterwards no machine, namespace, link,
 * cgroup or directory of the run is left. `deno task box` runs this file and prints each step;
 * PODMIN_BOX_HOLD=FILE keeps a failed box running until FILE is removed.
 */

import assert from "node:assert/strict";
import * as path from "node:path";
import {
  AutoScalingClient,
  DescribeInstanceRefreshesCommand,
  TerminateInstanceInAutoScalingGroupCommand,
} from "@aws-sdk/client-auto-scaling";
import { CreateBucketCommand, GetObjectCommand, HeadBucketCommand } from "@aws-sdk/client-s3";
import { PutParameterCommand, SSMClient } from "@aws-sdk/client-ssm";
import { writeDemoImageLayout } from "../../cli/local/demo_image.ts";
import { readHostFacts } from "../../cli/local/host_overrides.ts";
import { ensureSandboxImage } from "../../cli/local/local_node.ts";
import { WORKLOAD_CA_STATE } from "../../core/bucket/bucket_layout.ts";
import { REGISTRY_HOSTNAME } from "../../core/model/image_ref.ts";
import { S3Store } from "../../core/store/s3_store.ts";
import { DEFAULT_SANDBOX_IMAGE } from "../../vmconfig/render_user_data.ts";
import { cgroupDirs } from "../support/box_cgroups.ts";
import { type BoxInstance, clusterInstances, Fleet } from "../support/box_fleet.ts";
import { nodeOverrides } from "../support/box_node_overrides.ts";
import { boxEchoSource, CRASH_C } from "../support/box_rollout.ts";
import { containerId, helloDeployment, rolloutProof } from "../support/box_rollout_steps.ts";
import { openBoxRun } from "../support/box_run.ts";
import { boxSources } from "../support/box_sources.ts";
import { createVpc } from "../support/box_vpc.ts";
import { mustRun, runCommand } from "../support/command.ts";
import type { Machine } from "../support/machine.ts";
import { machineSteps, until } from "../support/box_steps.ts";
import { pushStaticProgram } from "../support/node_images.ts";
import { nodePeerProgram } from "../support/node_peers.ts";
import { podmin } from "../support/programs.ts";
import { REAL_TOFU } from "../support/real_tofu.ts";
import { withRealTofuCluster } from "../support/real_tofu_cluster.ts";
import { testWith } from "../support/requirements.ts";
import { applySummary, inventory, stateIds } from "../support/tofu_outcome.ts";
import { HOST_ARCH } from "../support/vendor_artifacts.ts";

const ROOT = new URL("../../", import.meta.url).pathname;
const BUILD_ROOTFS = path.join(ROOT, "tests/peers/build_machine_rootfs.sh");
const CLUSTER = "box";
const INSTANCE_TYPE = HOST_ARCH === "amd64" ? "t3.medium" : "t4g.medium";
const NODEGROUPS = [
  `default,instance-type=${INSTANCE_TYPE}`,
  `workers,size=3,instance-type=${INSTANCE_TYPE}`,
];
const SERVICES = [
  "containerd.service",
  "kubelet.service",
  "podmin-coredns.service",
  "podmin-agent.service",
];
const UNITS = ["podmin-box-user-data.service", "podmin-pod-network.service", ...SERVICES];
/** Generous bounds for a slow, shared machine: they only stop a wait that would never end. */
const USER_DATA_MS = 15 * 60_000;
const CONVERGE_MS = 5 * 60_000;
const GREETING = "hello from Parameter Store";
/** How many instances NodeGroup `workers` has: a rollout across at least three nodes. */
const WORKERS = 3;
/** The path of the network namespace of the Pod of container `id` on `m`. */
async function podNetns(m: Machine, id: string): Promise<string> {
  const pod = JSON.parse(await m.must(["crictl", "inspect", id])).info?.sandboxID;
  const spec = JSON.parse(await m.must(["crictl", "inspectp", pod])).info?.runtimeSpec;
  const ns = spec?.linux?.namespaces?.find((n: { type: string }) => n.type === "network")?.path;
  if (!ns) throw new Error(`no network namespace for Pod ${pod}`);
  return ns;
}

testWith(
  "cluster box: setup with real OpenTofu, four ASG instances boot from their user-data, a Service answers a client Pod over TCP and UDP from three workers with values and certificates, rollouts with 0 failed requests (a version, a crashing image halted and reverted, a coordinator kill and a power cut mid-rollout), a changed pin rolled by instance refresh, teardown and destroy; nothing is left",
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
      "gcc",
      "openssl",
      ...(REAL_TOFU.tools ?? []),
    ],
    files: [
      ...(REAL_TOFU.files ?? []),
      ...(["kubelet", "containerd", "crictl", "coredns"] as const).map((p) =>
        new URL(`file://${nodePeerProgram(p)}`)
      ),
    ],
  },
  async () => {
    const rootfs = (await mustRun("bash", [BUILD_ROOTFS])).trim();
    const run = await openBoxRun();
    const vpc = await createVpc(run);
    let fleet: Fleet | undefined;
    /** Runs one named step; on failure prints every running machine's report, names the step. */
    const step = machineSteps(() => fleet?.members.map((m) => m.machine), UNITS);
    try {
      await withRealTofuCluster("podmin-box-", async (c) => {
        const bucket = `podmin-box-${Date.now().toString(36)}`;
        const bucketUrl = `s3://${bucket}`;
        const cli = (args: string[]) => podmin(["--bucket", bucketUrl, ...args], c.env);
        const moto = vpc.expose(Number(new URL(c.endpoint).port));
        const work = path.join(c.tmp, "box");
        await Deno.mkdir(work);

        const before = await inventory(c.endpoint);
        const setupArgs = [
          "--vpc-cidr",
          "10.0.0.0/16",
          ...NODEGROUPS.flatMap((n) => ["--nodegroup", n]),
          "--workload-ca-publish",
          `${bucketUrl}/published/workload-ca.pem`,
        ];
        await step(
          `podmin setup of default and workers,size=${WORKERS} with real OpenTofu`,
          async () => {
            // The sandbox image is stored as podmin local stores it offline (no registry.k8s.io
            // here); setup finds it mirrored.
            await c.s3.send(new CreateBucketCommand({ Bucket: bucket }));
            await ensureSandboxImage({
              store: new S3Store({
                bucket,
                region: c.region,
                endpoint: c.endpoint,
                credentials: () =>
                  Promise.resolve({ accessKeyId: "test", secretAccessKey: "test" }),
              }),
              ref: DEFAULT_SANDBOX_IMAGE,
              log: () => {},
              offline: true,
            });
            const out = await c.setup({ bucket, cluster: CLUSTER, args: setupArgs });
            assert.equal(out.code, 0, `${out.stdout}\n${out.stderr}`);
            assert.match(
              out.stdout + out.stderr,
              new RegExp(`NodeGroup workers: ${WORKERS}/${WORKERS} healthy`),
            );
          },
        );

        const overrides = nodeOverrides({
          host: await readHostFacts(),
          awsEndpointUrl: moto.url,
          dataplane: true,
        });
        for (const o of overrides) console.error(`machine override ${o.file}: ${o.reason}`);
        fleet = new Fleet({
          run,
          vpc,
          rootfs,
          files: overrides,
          enable: ["podmin-box-kernel-tunables.service"],
          userDataEnvironment: { PODMIN_S3_BASE_URL: `${moto.url}/${bucket}` },
        });
        const machines = fleet;
        await step(
          `the ASGs' ${WORKERS + 1} instances boot from their launch templates' user-data`,
          async () => {
            const instances = await clusterInstances(c.ec2, CLUSTER);
            assert.deepEqual(
              instances.map((i) => i.nodeGroup).sort(),
              ["default", ...Array(WORKERS).fill("workers")],
            );
            await machines.reconcile(instances);
            await Promise.all(machines.members.map((m) => m.machine.waitUserData(USER_DATA_MS)));
            for (const m of machines.members) {
              assert.match(
                await m.machine.cloudInitOutput(),
                /podmin-user-data: boot complete \(node\)/,
              );
            }
          },
        );

        const converged = async (want: number) => {
          const got = await cli(["get", "nodes"]);
          const rows = got.stdout.split("\n").filter((l) => /\bConverged\b/.test(l));
          const ids = machines.members.map((m) => m.instance.instanceId);
          return [
            rows.length === want && ids.every((id) => got.stdout.includes(id)),
            got.stdout + got.stderr,
          ] as [boolean, string];
        };
        await step(
          `podmin get nodes: ${WORKERS + 1} Converged nodes`,
          () => until("every node Converged", CONVERGE_MS, () => converged(WORKERS + 1)),
          ["podmin-agent.service"],
        );

        await step("crictl ps through /etc/crictl.yaml on every machine", async () => {
          for (const m of machines.members) {
            const ps = await m.machine.must(["crictl", "ps", "-a"]);
            assert.match(ps, /^CONTAINER\s+IMAGE\s+CREATED\s+STATE\s+NAME/m);
          }
        });

        await step("push the images, a value in Parameter Store, apply", async () => {
          // boxecho 1.0, 2.0 and 3.0 (each answers with its version) and an image whose
          // container exits at once, for the rollouts.
          for (const tag of ["1.0", "2.0", "3.0"]) {
            await pushStaticProgram({
              work,
              bucket: bucketUrl,
              env: c.env,
              name: "boxecho",
              source: boxEchoSource(tag),
              tag,
            });
          }
          await pushStaticProgram({
            work,
            bucket: bucketUrl,
            env: c.env,
            name: "crash",
            source: CRASH_C,
          });
          const demo = await writeDemoImageLayout({
            dir: path.join(work, "demo-1.0"),
            version: "1.0",
            arches: [HOST_ARCH],
          });
          const pushed = await cli(["push", `oci:${demo}:1.0`, "apps/demo:1.0"]);
          assert.equal(pushed.code, 0, pushed.stderr);
          const ssm = new SSMClient({
            region: c.region,
            endpoint: c.endpoint,
            credentials: { accessKeyId: "test", secretAccessKey: "test" },
          });
          try {
            await ssm.send(
              new PutParameterCommand({
                Name: `/${CLUSTER}/default/hello/greeting`,
                Value: GREETING,
                Type: "SecureString",
              }),
            );
          } finally {
            ssm.destroy();
          }
          const file = path.join(work, "apps.yaml");
          await Deno.writeTextFile(
            file,
            `${helloDeployment("boxecho", "1.0")}---
apiVersion: podmin.dev/v1
kind: Service
metadata: {name: hello}
spec:
  selector: {app: hello}
  ports:
    - {name: http, port: 80, targetPort: 8080, protocol: TCP}
    - {name: udp, port: 53, targetPort: 8080, protocol: UDP}
---
apiVersion: podmin.dev/v1
kind: Deployment
metadata: {name: client}
spec:
  nodeGroup: default
  template:
    metadata: {labels: {app: client}}
    spec:
      terminationGracePeriodSeconds: 1
      containers:
        - name: client
          image: ${REGISTRY_HOSTNAME}/apps/demo:1.0
          args: ["sleep"]
`,
          );
          const applied = await cli(["apply", "-f", file]);
          assert.equal(applied.code, 0, applied.stderr);
        });

        /** The client's machine (the one `default` machine: it changes in the refresh). */
        const clientMachine = () => machines.of("default")[0].machine;
        const services = await cli(["get", "services", "-o", "json"]);
        const listed = JSON.parse(services.stdout);
        const vip: string = (listed.items ?? [listed]).find((s: { metadata: { name: string } }) =>
          s.metadata.name === "hello"
        )?.status?.vip;
        assert.ok(vip, services.stdout);

        /** Asks the Service from the client Pod until every worker Pod has answered. */
        const allAnswer = async (what: string) => {
          const tcp = new Set<string>();
          const udp = new Set<string>();
          await step(
            `${what}: from the client Pod, TCP by name and UDP to the VIP reach every worker Pod`,
            () =>
              until("answers from every worker", CONVERGE_MS, async () => {
                const client = clientMachine();
                const id = await containerId(client, "client");
                if (!id) return [false, "no running client container"];
                const got = await client.exec([
                  "crictl",
                  "exec",
                  id,
                  "/demo",
                  "get",
                  "hello",
                  "80",
                ]);
                if (got.code === 0) tcp.add(got.stdout.trim());
                const netns = await podNetns(client, id);
                const dgram = await client.exec([
                  "nsenter",
                  `--net=${netns}`,
                  "bash",
                  "-c",
                  // One read(2) of a datagram: bash's own `read` takes a byte and loses the rest.
                  `exec 3<>/dev/udp/${vip}/53; printf ping >&3; timeout 3 dd bs=1024 count=1 status=none <&3`,
                ]);
                if (dgram.stdout.trim()) udp.add(dgram.stdout.trim());
                return [
                  tcp.size >= WORKERS && udp.size >= WORKERS,
                  `tcp ${JSON.stringify([...tcp])} (last: ${got.stdout}${got.stderr}); udp ${
                    JSON.stringify([...udp])
                  } (last: ${dgram.stdout}${dgram.stderr})`,
                ];
              }),
            ["podmin-agent.service", "podmin-coredns.service", "kubelet.service"],
          );
          for (const answer of [...tcp, ...udp]) {
            assert.ok(answer.endsWith(` ${GREETING}`), `the Pod's value: ${answer}`);
          }
          assert.equal(tcp.size, WORKERS, [...tcp].join("; "));
          assert.deepEqual([...udp].sort(), [...tcp].sort());
        };
        await allAnswer("first boot");

        await step(
          "each worker Pod's certificate verifies against the published bundle",
          async () => {
            const state = JSON.parse(
              await (await c.s3.send(
                new GetObjectCommand({ Bucket: bucket, Key: WORKLOAD_CA_STATE }),
              ))
                .Body!.transformToString(),
            );
            const bundle = path.join(work, "workload-ca.pem");
            await Deno.writeTextFile(
              bundle,
              state.certificates.map((e: { pem: string }) => e.pem).join("\n"),
            );
            for (const w of machines.of("workers")) {
              const dirs = (await w.machine.must(["ls", "/run/podmin/tls"])).split("\n")
                .filter((d) => d.startsWith("default_hello"));
              assert.equal(dirs.length, 1, `TLS directories on ${w.instance.instanceId}: ${dirs}`);
              const leaf = path.join(work, `${w.instance.instanceId}.crt`);
              await Deno.writeTextFile(
                leaf,
                await w.machine.must(["cat", `/run/podmin/tls/${dirs[0]}/tls.crt`]),
              );
              const verified = await runCommand("openssl", ["verify", "-CAfile", bundle, leaf]);
              assert.equal(verified.code, 0, verified.stdout + verified.stderr);
            }
          },
        );

        await rolloutProof({
          step,
          s3: c.s3,
          bucket,
          cli,
          work,
          fleet: machines,
          vip,
          value: GREETING,
        });
        await allAnswer("after the rollouts");

        await step(
          "a changed pin: setup again changes the launch templates and ASGs, nothing else",
          async () => {
            // The catalogue names crictl with a new version (same file): the dependency list of
            // the user-data changes, so each NodeGroup gets a new launch template version.
            const catalogFile = c.sources.args[c.sources.args.indexOf("--dependency-catalog") + 1];
            const catalog = JSON.parse(await Deno.readTextFile(catalogFile));
            const crictl = catalog.dependencies.find((d: { name: string }) => d.name === "crictl");
            crictl.version = `${crictl.version}-box2`;
            await Deno.writeTextFile(catalogFile, JSON.stringify(catalog));
            const ids = await stateIds(c.s3, bucket);
            const out = await c.setup({ bucket, cluster: CLUSTER, args: setupArgs });
            assert.equal(out.code, 0, `${out.stdout}\n${out.stderr}`);
            const summary = applySummary(out.stderr);
            assert.equal(summary.added, 0, out.stderr);
            assert.equal(summary.destroyed, 0, out.stderr);
            const modified = [...out.stderr.matchAll(/^\s*(\S+): Modifying\.\.\./gm)]
              .map((m) => m[1]).sort();
            assert.deepEqual(modified, [
              "aws_autoscaling_group.ng_default",
              "aws_autoscaling_group.ng_workers",
              "aws_launch_template.ng_default",
              "aws_launch_template.ng_workers",
            ]);
            assert.deepEqual(await stateIds(c.s3, bucket), ids, "every resource kept its id");
            // Each group's rolling refresh was started (EC2 Auto Scaling would now replace them).
            const asg = new AutoScalingClient({
              region: c.region,
              endpoint: c.endpoint,
              credentials: { accessKeyId: "test", secretAccessKey: "test" },
            });
            try {
              for (const group of ["default", "workers"]) {
                const r = await asg.send(
                  new DescribeInstanceRefreshesCommand({
                    AutoScalingGroupName: `podmin-${CLUSTER}-ng-${group}`,
                  }),
                );
                assert.deepEqual(r.InstanceRefreshes?.map((x) => x.Status), ["Pending"], group);
              }
            } finally {
              asg.destroy();
            }
          },
        );

        await step(
          "the instance refresh: each instance replaced by one booted from the new user-data, launched before the old one goes; the Service answers after each",
          async () => {
            const asg = new AutoScalingClient({
              region: c.region,
              endpoint: c.endpoint,
              credentials: { accessKeyId: "test", secretAccessKey: "test" },
            });
            try {
              /** Replaces `old` as EC2 would; resolves once its replacement is Converged. */
              const replace = async (old: BoxInstance) => {
                // moto replaces a terminated ASG instance at once, from the ASG's launch
                // template version (the new one); the box boots it before the old one stops.
                const known = new Set(machines.members.map((m) => m.instance.instanceId));
                await asg.send(
                  new TerminateInstanceInAutoScalingGroupCommand({
                    InstanceId: old.instanceId,
                    ShouldDecrementDesiredCapacity: false,
                  }),
                );
                const fresh = (await clusterInstances(c.ec2, CLUSTER)).filter((i) =>
                  !known.has(i.instanceId) && i.nodeGroup === old.nodeGroup
                );
                assert.equal(fresh.length, 1, `replacements of ${old.instanceId}`);
                assert.notEqual(fresh[0].launchTemplateVersion, old.launchTemplateVersion);
                assert.match(fresh[0].userData, /^crictl \S+-box2 /m);
                const [member] = await machines.launch(fresh);
                await member.machine.waitUserData(USER_DATA_MS);
                await until(
                  `${member.instance.instanceId} Converged`,
                  CONVERGE_MS,
                  async () => {
                    const got = await cli(["get", "nodes"]);
                    const row = got.stdout.split("\n").find((l) =>
                      l.includes(member.instance.instanceId)
                    );
                    return [/\bConverged\b/.test(row ?? ""), got.stdout + got.stderr];
                  },
                );
                await machines.retire(old.instanceId);
              };
              // EC2 Auto Scaling refreshes each group on its own: the client's `default`
              // instance is replaced while the workers are, one worker at a time.
              const defaults = machines.of("default").map((m) => m.instance);
              const workers = machines.of("workers").map((m) => m.instance);
              await Promise.all([
                (async () => {
                  for (const old of defaults) await replace(old);
                })(),
                (async () => {
                  for (const old of workers) {
                    await replace(old);
                    await allAnswer(`workers ${old.instanceId} replaced`);
                  }
                })(),
              ]);
              await allAnswer("every instance replaced");
            } finally {
              asg.destroy();
            }
          },
        );

        await step("podmin teardown and destroy leave nothing in moto", async () => {
          const common = ["--cluster", CLUSTER, "--region", c.region, "--yes"];
          const down = await cli(["teardown", ...common]);
          assert.equal(down.code, 0, `${down.stdout}\n${down.stderr}`);
          await machines.reconcile(await clusterInstances(c.ec2, CLUSTER));
          assert.deepEqual(machines.members, []);
          assert.deepEqual(await inventory(c.endpoint), before);
          const gone = await cli(["destroy", ...common]);
          assert.equal(gone.code, 0, `${gone.stdout}\n${gone.stderr}`);
          await assert.rejects(c.s3.send(new HeadBucketCommand({ Bucket: bucket })));
        });
        await moto.close();
      }, { sources: boxSources });
    } finally {
      await fleet?.destroy();
      await vpc.close();
      await run.close();
    }
    await assert.rejects(Deno.stat(run.dir));
    const netns = await mustRun("ip", ["netns", "list"]);
    assert.ok(!netns.includes(run.id), netns);
    const links = await mustRun("ip", ["-o", "link", "show"]);
    assert.ok(!links.includes(run.id), links);
    assert.deepEqual(await cgroupDirs(run.id), []);
    const mounts = await Deno.readTextFile("/proc/self/mountinfo");
    assert.ok(!mounts.includes(run.id), "no mount of the run is left");
  },
);

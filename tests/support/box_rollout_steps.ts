/**
 * The cluster box's rollouts (issue 32 item 5; spec §10 "Machine harness"): the hello Deployment
 * of NodeGroup `workers` moves while a client loop in the client Pod (NodeGroup `default`) asks its
 * Service by name (TCP) and VIP (UDP) without pause, the rollout object is read throughout and
 * each worker's agent logs its own transitions (tests/support/box_rollout.ts):
 *
 * - boxecho 1.0 → 2.0 across every worker: 0 failed requests, every worker on 2.0 alone, at most
 *   one node in transition (maxUnavailable 1) in the object and in the nodes' account;
 * - an image whose container exits at once: halted after the first wave (one node admitted), 0
 *   failed requests, `rollout status` naming the node and kubelet's reason, autoRevert returning
 *   every worker to 2.0;
 * - boxecho 2.0 → 3.0 while the mesh coordinator's agent is killed (SIGKILL; systemd restarts
 *   it) in the first wave and the node surging in the second wave loses power and boots again:
 *   0 failed requests before the power cut, the budget held, a coordinator of a later term, every
 *   worker (the rebooted one too) on 3.0 alone.
 */

import assert from "node:assert/strict";
import * as path from "node:path";
import { GetObjectCommand, type S3Client } from "@aws-sdk/client-s3";
import { MESH_COORDINATOR } from "../../core/bucket/bucket_layout.ts";
import { REGISTRY_HOSTNAME } from "../../core/model/image_ref.ts";
import type { Fleet } from "./box_fleet.ts";
import {
  agentLog,
  type BudgetRecord,
  type BudgetRecorder,
  type BudgetSample,
  type ClientRequest,
  type ClientTally,
  manifestSpecs,
  maxOverlap,
  recordBudget,
  startClientLoop,
  type Transition,
  transitionsFromLog,
} from "./box_rollout.ts";
import { type Step, until } from "./box_steps.ts";
import type { Machine } from "./machine.ts";

/** Bound of each wait: it only stops a wait that would never end. */
const CONVERGE_MS = 5 * 60_000;

/**
 * spec.rollout of the hello Deployment's versions: one node in transition at a time (so three
 * waves), a short Ready streak, and a deadline a healthy Pod start meets with room to spare.
 */
export const ROLLOUT = "{maxUnavailable: 1, minReadySeconds: 1, progressDeadlineSeconds: 90}";

/** The hello Deployment: image `apps/<image>:<tag>` running `/<image>`, with `rollout`. */
export function helloDeployment(image: string, tag: string, rollout = ROLLOUT): string {
  return `apiVersion: podmin.dev/v1
kind: Deployment
metadata: {name: hello}
spec:
  nodeGroup: workers
  secrets: [{key: greeting, from: ssm}]
  rollout: ${rollout}
  template:
    metadata: {labels: {app: hello}}
    spec:
      terminationGracePeriodSeconds: 1
      containers:
        - name: hello
          image: ${REGISTRY_HOSTNAME}/apps/${image}:${tag}
          command: ["/${image}"]
          readinessProbe:
            tcpSocket: {port: 8080}
            periodSeconds: 1
`;
}

/** The id of the running container `name` on `m`, or "" when there is none. */
export async function containerId(m: Machine, name: string): Promise<string> {
  const ps = await m.exec(["crictl", "ps", "--name", `^${name}$`, "--state", "running", "-q"]);
  return ps.stdout.trim().split("\n")[0] ?? "";
}

/** A time of day (UTC, ms) for the log. */
const iso = (at = Date.now()) => new Date(at).toISOString().slice(11, 23);

/** A failed request, for a message: its time (UTC), protocol and output. */
function failure(r: ClientRequest): string {
  return `${iso(r.at)} ${r.proto} ${r.answer}`;
}

/** What the rollouts need of the box. */
export interface RolloutProofOptions {
  step: Step;
  s3: S3Client;
  bucket: string;
  /** `podmin --bucket <the box's bucket> ARGS`. */
  cli: (args: string[]) => Promise<{ code: number; stdout: string; stderr: string }>;
  /** A scratch directory. */
  work: string;
  fleet: Fleet;
  /** The hello Service's VIP. */
  vip: string;
  /** The workers' answers' value (their `greeting`). */
  value: string;
}

/**
 * Runs the three rollouts as steps; the hello Deployment runs boxecho 1.0 on every worker
 * (`helloDeployment`), images `apps/boxecho:2.0`, `:3.0` and `apps/crash:1.0` are pushed.
 */
export async function rolloutProof(o: RolloutProofOptions): Promise<void> {
  // The rollouts (issue 32 item 5): the client loop asks the Service by name (TCP) and VIP
  // (UDP) without pause while the hello Deployment moves; the rollout object is read
  // throughout, and each node's agent logs its own transitions.
  const workerMachines = () => o.fleet.of("workers");
  const workerSpecs = async () =>
    await Promise.all(
      workerMachines().map((w) => manifestSpecs(w.machine, "default", "hello")),
    );
  const applyHello = async (image: string, tag: string, rollout?: string) => {
    const file = path.join(o.work, `hello-${image}-${tag}.yaml`);
    await Deno.writeTextFile(file, helloDeployment(image, tag, rollout));
    const applied = await o.cli(["apply", "-f", file]);
    assert.equal(applied.code, 0, applied.stderr);
    return applied.stdout;
  };
  /** Runs `during` with the client loop and the budget recorder; returns what they saw. */
  const measured = async (during: (budget: BudgetRecorder) => Promise<void>) => {
    const client = o.fleet.of("default")[0].machine;
    const loop = await startClientLoop({
      machine: client,
      container: await containerId(client, "client"),
      name: "hello",
      vip: o.vip,
      value: o.value,
    });
    const budget = recordBudget({
      s3: o.s3,
      bucket: o.bucket,
      namespace: "default",
      name: "hello",
    });
    const since = Date.now();
    let tally: ClientTally | undefined;
    let record: BudgetRecord | undefined;
    try {
      await during(budget);
    } finally {
      tally = await loop.stop().catch((e) => {
        console.error(`client loop: ${e}`);
        return undefined;
      });
      record = await budget.stop();
    }
    const transitions: Transition[] = [];
    for (const w of workerMachines()) {
      transitions.push(
        ...transitionsFromLog(
          w.instance.instanceId,
          await agentLog(w.machine, true),
          "default/hello",
          since,
        ),
      );
    }
    const failed = tally!.failed;
    console.error(
      `rollout: ${tally!.requests.length} requests (${
        tally!.requests.filter((r) => r.proto === "udp").length
      } UDP), ${failed.length} failed${
        failed.length ? `: ${failed.slice(0, 10).map(failure).join(" | ")}` : ""
      } (${tally!.resetAfterAnswer} TCP answers followed by a reset); answers changed version ${
        tally!.versions.length - 1
      } time(s), ${tally!.versions[0]} first, ${
        tally!.versions.at(-1)
      } last; rollout object: most admitted ${
        JSON.stringify([...record.maxAdmitted])
      } in ${record.samples.length} reads; the agents' transitions: ${
        transitions.map((t) =>
          `${t.node} ${t.phases.join(",")} ${((t.end - t.start) / 1000).toFixed(1)} s`
        ).join("; ")
      } (at most ${maxOverlap(transitions)} at once)`,
    );
    return { tally: tally!, record, transitions };
  };
  /** Waits until every worker runs spec `want()` alone. */
  const allOn = (what: string, want: () => string) =>
    until(what, CONVERGE_MS, async () => {
      const specs = await workerSpecs();
      return [specs.every((s) => s.length === 1 && s[0] === want()), JSON.stringify(specs)];
    });
  const [v1Spec] = (await workerSpecs())[0];
  const workers = workerMachines().length;

  let v2Spec = "";
  await o.step(
    `a rollout of boxecho 2.0 across ${workers} workers: 0 failed requests, the budget held`,
    async () => {
      const { tally, record, transitions } = await measured(async (budget) => {
        assert.match(await applyHello("boxecho", "2.0"), /configured \(revision 2\)/);
        await until(
          "the rollout object names the new spec",
          CONVERGE_MS,
          () =>
            Promise.resolve([
              !!budget.last()?.spec && budget.last()!.spec !== v1Spec,
              JSON.stringify(budget.last()),
            ]),
        );
        v2Spec = budget.last()!.spec!;
        await allOn("every worker on 2.0 alone", () => v2Spec);
      });
      assert.equal(tally.failed.length, 0, tally.failed.map(failure).join("\n"));
      assert.ok(tally.requests.some((r) => r.proto === "udp" && r.version));
      assert.equal(tally.versions[0], "1.0");
      assert.equal(tally.versions.at(-1), "2.0", tally.versions.join());
      // The budget (maxUnavailable 1) held in the object and in the nodes' own account,
      // and every node took its turn.
      assert.equal(record.maxAdmitted.get(v2Spec), 1);
      assert.equal(record.everAdmitted.get(v2Spec)?.size, workers);
      assert.equal(transitions.length, workers, JSON.stringify(transitions));
      assert.ok(transitions.every((t) => t.phases.every((p) => p === "surging")));
      assert.equal(maxOverlap(transitions), 1, JSON.stringify(transitions));
      const st = await o.cli(["rollout", "status", "hello", "--wait", "--timeout", "180"]);
      assert.equal(st.code, 0, st.stdout + st.stderr);
      assert.match(st.stdout, new RegExp(`${workers} of ${workers} node\\(s\\) up to date`));
    },
    ["podmin-agent.service"],
  );

  await o.step(
    "a rollout of a crashing image halts after the first wave with 0 failed requests; autoRevert returns every worker to 2.0",
    async () => {
      let crashSpec = "";
      let halted: BudgetSample["halted"];
      const { tally, record, transitions } = await measured(async (budget) => {
        await applyHello(
          "crash",
          "1.0",
          "{maxUnavailable: 1, minReadySeconds: 1, progressDeadlineSeconds: 15, autoRevert: true}",
        );
        await until("the rollout halted", CONVERGE_MS, () => {
          const last = budget.last();
          if (last?.spec && last.spec !== v2Spec) crashSpec = last.spec;
          halted = crashSpec ? last?.halted : undefined;
          return Promise.resolve([!!halted, JSON.stringify(last)]);
        });
        await allOn("every worker back on 2.0 alone", () => v2Spec);
      });
      const failing = halted!.node;
      assert.match(halted!.reason, /CrashLoopBackOff|exit 1|Error/);
      assert.equal(tally.failed.length, 0, tally.failed.map(failure).join("\n"));
      assert.deepEqual(tally.versions, ["2.0"], "only the old Pods answered");
      // One wave: only the failing node was ever admitted, only it started the new spec.
      assert.deepEqual([...record.everAdmitted.get(crashSpec) ?? []], [failing]);
      assert.deepEqual([...new Set(transitions.map((t) => t.node))], [failing]);
      const st = await o.cli(["rollout", "status", "hello"]);
      assert.equal(st.code, 1, st.stdout + st.stderr);
      assert.match(
        st.stdout,
        new RegExp(`^halted on ${failing} at .*(CrashLoopBackOff|exit 1)`, "m"),
      );
      assert.match(st.stdout, /restored with autoRevert/);
    },
    ["podmin-agent.service", "kubelet.service"],
  );

  await o.step(
    "a rollout of boxecho 3.0 while the mesh coordinator's agent is killed and a worker in transition loses power: the budget held, every worker on 3.0",
    async () => {
      let v3Spec = "";
      let coordinator = "";
      let term = 0;
      let rebooted = "";
      let cutAt = Infinity;
      let bootedAt = Infinity;
      const { tally, record, transitions } = await measured(async (budget) => {
        await applyHello(
          "boxecho",
          "3.0",
          "{maxUnavailable: 1, minReadySeconds: 1, progressDeadlineSeconds: 300}",
        );
        /** The nodes admitted to 3.0 so far, in order, once there are `n`. */
        const admitted = async (n: number) => {
          let ever: string[] = [];
          await until(`${n} node(s) admitted to 3.0`, CONVERGE_MS, () => {
            const last = budget.last();
            if (last?.spec && last.spec !== v2Spec && !last.halted) v3Spec = last.spec;
            ever = [
              ...new Set(
                budget.samples().filter((x) => v3Spec && x.spec === v3Spec).flatMap((x) =>
                  x.admitted
                ),
              ),
            ];
            return Promise.resolve([ever.length >= n, JSON.stringify(last)]);
          });
          return ever;
        };
        // The first wave: kill the coordinator's agent (systemd restarts it).
        await admitted(1);
        const record = JSON.parse(
          await (await o.s3.send(
            new GetObjectCommand({ Bucket: o.bucket, Key: MESH_COORDINATOR }),
          )).Body!.transformToString(),
        );
        coordinator = record.nodeId;
        term = record.term;
        const m = o.fleet.members.find((x) => x.instance.instanceId === coordinator);
        assert.ok(m, `coordinator ${coordinator} is a machine of the box`);
        await m.machine.must([
          "systemctl",
          "kill",
          "--kill-who=main",
          "--signal=SIGKILL",
          "podmin-agent.service",
        ]);
        console.error(
          `${iso()} killed the agent of the coordinator ${coordinator} (term ${term})`,
        );
        // The second wave: cut the power of the node in transition once it surges.
        const second = (await admitted(2))[1];
        const w = workerMachines().find((x) => x.instance.instanceId === second);
        assert.ok(w, `${second} is a worker`);
        await until(`${second} surging`, CONVERGE_MS, async () => {
          const specs = await manifestSpecs(w.machine, "default", "hello");
          return [specs.length === 2 && specs.includes(v3Spec), JSON.stringify(specs)];
        });
        rebooted = second;
        cutAt = Date.now();
        await w.machine.powerCut();
        await w.machine.boot();
        bootedAt = Date.now();
        console.error(`${iso(cutAt)} ${second} lost power while surging; booted again`);
        await allOn("every worker on 3.0 alone", () => v3Spec);
      });
      const before = tally.failed.filter((f) => f.at < cutAt);
      const after = tally.failed.filter((f) => f.at >= cutAt);
      console.error(
        `failed requests: ${before.length} before the power cut (the coordinator's agent killed), ${after.length} from the cut of ${rebooted} (booted again ${
          ((bootedAt - cutAt) / 1000).toFixed(1)
        } s later)`,
      );
      assert.equal(before.length, 0, before.map(failure).join("\n"));
      assert.equal(tally.versions.at(-1), "3.0", tally.versions.join());
      assert.equal(record.maxAdmitted.get(v3Spec), 1);
      assert.equal(record.everAdmitted.get(v3Spec)?.size, workers);
      assert.equal(maxOverlap(transitions), 1, JSON.stringify(transitions));
      // A coordinator of a later term took over (or the restarted agent won again).
      const now = JSON.parse(
        await (await o.s3.send(
          new GetObjectCommand({ Bucket: o.bucket, Key: MESH_COORDINATOR }),
        )).Body!.transformToString(),
      );
      assert.ok(now.term > term, `coordinator term ${now.term} after ${term}`);
      const st = await o.cli(["rollout", "status", "hello", "--wait", "--timeout", "180"]);
      assert.equal(st.code, 0, st.stdout + st.stderr);
    },
    ["podmin-agent.service", "kubelet.service"],
  );
}

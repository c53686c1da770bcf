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
import type { AgentStatus } from "../../agent/deployments/status.ts";
import { waitFor } from "../support/programs.ts";
import { testWith } from "../support/requirements.ts";
import {
  type ClientResult,
  ROLLOUT_TOPOLOGY_TOOLS,
  RolloutTopology,
} from "../support/rollout_topology.ts";

testWith(
  "rollout e2e [kubelet + containerd + eBPF + moto]: a new image surges with 0 failed requests; a crashing image halts with the old Pod serving; undo goes back",
  { root: true, tools: ROLLOUT_TOPOLOGY_TOOLS },
  async (t) => {
    const topo = await RolloutTopology.create();
    const { stateDir } = topo;
    let ok = false;
    let v2File = "";

    /** A step whose failure ends the test (with the node's logs), not only the step. */
    const step = async (name: string, fn: () => Promise<void>) => {
      if (!(await t.step(name, fn))) throw new Error(`step failed: ${name}`);
    };
    const apply = (image: string, rollout: string, cpu?: string) =>
      topo.apply(image, rollout, { cpu });
    const status = () => topo.status();
    const rollout = (args: string[]) => topo.rollout(args);
    const clientDuring = (until: () => Promise<void>) => topo.clientDuring(until);

    try {
      await step(
        "images: echo v1 and v2, a crashing one, a pause image",
        () => topo.pushImages(),
      );
      await step(
        "the network: node B and a client Pod, linked to node A",
        () => topo.linkNetwork(),
      );
      await step(
        "node A: podmin local up in the mesh; node B's agent joins it",
        () => topo.startNodes(),
      );

      await step("v1: the client reaches it through the VIP over TCP and UDP", async () => {
        const out = await apply("echo:1.0", "{minReadySeconds: 2}");
        assert.match(out, /deployment default\/echo created \(revision 1\)/);
        await topo.awaitService();
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
            const nodes = await topo.podmin(["get", "nodes", "-o", "json"]);
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
      await topo.dumpLogs();
      throw err;
    } finally {
      await topo.destroy(!ok);
    }
  },
);

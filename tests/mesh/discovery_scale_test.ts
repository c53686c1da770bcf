/**
 * Scale acceptance of discovery and the endpoint mesh (issue 14) on moto: 50 agents, each the
 * product's `DiscoveryMesh` fed by its own simulated kubelet Pods API and reading the Services that
 * `podmin apply`'s code wrote to `services/index.json`. One of them is a real `podmin-agent run
 * --mesh-listen` process (started first, so it is the coordinator); the other 49 run in this
 * process. They converge to one snapshot version; a Pod turning Ready on one node reaches all 50
 * with one snapshot message per agent (counted and printed); the coordinator process is killed
 * with SIGKILL and another agent takes over when its lease runs out. Timings are printed, never
 * asserted.
 */

import assert from "node:assert/strict";
import * as path from "node:path";
import { readCoordinatorRecord } from "../../agent/mesh/coordinator_record.ts";
import type { MeshStatus } from "../../agent/mesh/discovery_mesh.ts";
import type { ClusterSnapshot } from "../../core/model/endpoint_snapshot.ts";
import { openStore } from "../../core/store/store_url.ts";
import { moto } from "../support/moto.ts";
import { PodsApiServer } from "../support/pods_api_server.ts";
import { meshAgentArgs, nodeAgentArgs } from "../support/programs.ts";
import {
  applyServices,
  type ClusterAgent,
  DiscoveryCluster,
  NAMESPACE,
  nodeId,
  podAddress,
  servicePod,
  testClusterCa,
} from "./discovery_cluster.ts";

const N = 50;
/** The coordinator lease of `MeshNode` (DiscoveryMesh uses the default). */
const LEASE_MS = 15_000;
const WEB = `${NAMESPACE}/web`;
const API = `${NAMESPACE}/api`;

/** Polls `f` (for state only a file shows: the child agent's mesh.json). */
async function poll<T>(what: string, f: () => Promise<T | undefined>, timeoutMs = 60_000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await f();
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

/** Collects a child's stderr (the agent's log) so its pipe never fills; the tail explains failures. */
function drain(stream: ReadableStream<Uint8Array>): { tail(): string; done: Promise<void> } {
  let text = "";
  const decoder = new TextDecoder();
  const done = (async () => {
    for await (const chunk of stream) {
      text = (text + decoder.decode(chunk, { stream: true })).slice(-8_000);
    }
  })().catch(() => {});
  return { tail: () => text, done };
}

Deno.test("discovery scale [moto]: 50 agents on simulated Pods APIs converge; a Pod Ready reaches all; the killed coordinator is replaced", async () => {
  const m = await moto();
  const bucket = await m.createBucket();
  const store = openStore(`s3://${bucket}`);
  const { ca, pem } = await testClusterCa();
  await applyServices(store, ["web", "api"]);
  const dir = await Deno.makeTempDir({ prefix: "podmin-scale-" });
  // The cluster CA key only on tmpfs, for the child agent's --cluster-ca file:.
  const secrets = await Deno.makeTempDir({ dir: "/dev/shm", prefix: "podmin-scale-ca-" });
  const caFile = path.join(secrets, "cluster-ca.pem");
  await Deno.writeTextFile(caFile, pem, { mode: 0o600 });

  // Agent 0: a real podmin-agent process on its own simulated Pods API.
  const childPods = await PodsApiServer.start(path.join(dir, "pods-0.sock"));
  childPods.set(servicePod({ app: "web", node: 0, n: 0, ready: true }));
  const childBase = path.join(dir, "node-00");
  const child = new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "--allow-all",
      new URL("../../agent/main.ts", import.meta.url).pathname,
      ...nodeAgentArgs({ bucket: `s3://${bucket}`, nodeGroup: "workers", base: childBase }),
      "--registry-listen",
      "off",
      ...meshAgentArgs({ nodeId: nodeId(0), caFile, podsSocket: childPods.socket }),
    ],
    stdin: "null",
    stdout: "null",
    stderr: "piped",
  }).spawn();
  const childLog = drain(child.stderr);
  let childAlive = true;
  const childSnapshot = async (): Promise<ClusterSnapshot | undefined> => {
    try {
      const status: MeshStatus = JSON.parse(
        await Deno.readTextFile(path.join(childBase, "state", "mesh.json")),
      );
      return status.snapshot as ClusterSnapshot | undefined;
    } catch {
      return undefined; // not written yet, or being replaced
    }
  };

  let cluster: DiscoveryCluster | undefined;
  try {
    const record = await poll("the real agent to be coordinator", async () => {
      const r = await readCoordinatorRecord(store);
      return r?.nodeId === nodeId(0) ? r : undefined;
    }).catch((err) => {
      throw new Error(`${err.message}\nagent log:\n${childLog.tail()}`);
    });
    await childPods.whenWatched();

    // Agents 1..49 in this process; each has one Ready web Pod and one api Pod not Ready yet.
    const t0 = performance.now();
    cluster = await DiscoveryCluster.start({
      store,
      ca,
      indices: Array.from({ length: N - 1 }, (_, i) => i + 1),
      dir,
      servicesIntervalMs: 2_000,
      initialPods: (i) => [
        servicePod({ app: "web", node: i, n: 0, ready: true }),
        servicePod({ app: "api", node: i, n: 0, ready: false }),
      ],
    });
    const agents = cluster.agents;
    const allWeb = Array.from({ length: N }, (_, i) => podAddress(i, 0)).sort();
    await cluster.until(
      "every in-process agent with all 50 web endpoints",
      () => agents.every((a) => sameList(a.snapshot?.endpoints[WEB], allWeb)),
    );
    const converged = await poll(
      "the real agent with all 50 web endpoints",
      async () => {
        const s = await childSnapshot();
        return sameList(s?.endpoints[WEB], allWeb) ? s : undefined;
      },
    );
    console.log(
      `discovery scale: ${N} agents converged in ${(performance.now() - t0).toFixed(0)} ms`,
    );
    // One snapshot version everywhere, from the coordinator's term, no api endpoint yet.
    const versions = new Set(agents.map((a) => `${a.snapshot!.term}/${a.snapshot!.version}`));
    versions.add(`${converged.term}/${converged.version}`);
    assert.deepEqual([...versions], [`${record.term}/${converged.version}`]);
    assert.equal(converged.nodes, N);
    assert.equal(converged.endpoints[API], undefined, "a Pod not Ready is no endpoint");

    // A Pod turns Ready on node 17: one Pods API event there, one snapshot to every agent.
    const k = agents.find((a) => a.index === 17)!;
    const before = snapshotCounts(agents);
    const eventsBefore = k.pods.counters.eventsSent;
    const version = converged.version;
    const t1 = performance.now();
    k.pods.set(servicePod({ app: "api", node: 17, n: 0, ready: true }));
    const api = [podAddress(17, 0)];
    await cluster.until(
      "the Ready Pod in every in-process agent's snapshot",
      () => agents.every((a) => sameList(a.snapshot?.endpoints[API], api)),
    );
    const inProcessMs = Math.max(...agents.map((a) => a.arrivedAt! - t1));
    const childHas = await poll("the Ready Pod in the real agent's snapshot", async () => {
      const s = await childSnapshot();
      return sameList(s?.endpoints[API], api) ? s : undefined;
    });
    const delivered = snapshotCounts(agents) - before;
    const events = k.pods.counters.eventsSent - eventsBefore;
    console.log(
      `discovery scale: one Pod Ready on ${k.id} → ${events} Pods API event, ` +
        `snapshot v${version}→v${childHas.version}: ${delivered} snapshot messages received by the ` +
        `${agents.length} in-process agents + 1 by the real agent (mesh.json) = ${
          delivered + 1
        } for ${N} agents; ` +
        `every in-process agent had it ${inProcessMs.toFixed(0)} ms after the event`,
    );
    assert.equal(events, 1);
    assert.equal(childHas.version, version + 1, "one broadcast");
    assert.equal(delivered, agents.length, "one snapshot per agent, not N²");
    for (const a of agents) assert.equal(a.snapshot!.version, version + 1);

    // The coordinator process is killed: no lease release, no goodbye.
    const t2 = performance.now();
    child.kill("SIGKILL");
    await child.status;
    childAlive = false;
    const recordMs = poll("a new coordinator record", async () => {
      const r = await readCoordinatorRecord(store);
      return r && r.term > record.term ? performance.now() - t2 : undefined;
    }, 4 * LEASE_MS);
    const survivorsWeb = allWeb.filter((ip) => ip !== podAddress(0, 0));
    await cluster.until(
      "a new coordinator's complete snapshot in every survivor",
      () =>
        agents.every((a) =>
          a.snapshot!.term > record.term && sameList(a.snapshot!.endpoints[WEB], survivorsWeb) &&
          sameList(a.snapshot!.endpoints[API], api)
        ),
      4 * LEASE_MS,
    );
    const takeoverMs = Math.max(...agents.map((a) => a.arrivedAt! - t2));
    const next = (await readCoordinatorRecord(store))!;
    console.log(
      `discovery scale: coordinator ${record.nodeId} (term ${record.term}) killed → ${next.nodeId} ` +
        `(term ${next.term}) recorded after ${
          (await recordMs).toFixed(0)
        } ms; all ${agents.length} ` +
        `survivors on its complete snapshot after ${
          takeoverMs.toFixed(0)
        } ms (lease ${LEASE_MS} ms, ` +
        `stepped every ${LEASE_MS / 3} ms by members whose stream ended)`,
    );
    assert.ok(next.term > record.term);
    assert.ok(agents.some((a) => a.id === next.nodeId), "a survivor is coordinator");
    const final = new Set(agents.map((a) => `${a.snapshot!.term}/${a.snapshot!.version}`));
    assert.equal(final.size, 1, "one snapshot version among the survivors");
    assert.equal(agents[0].snapshot!.nodes, N - 1);
  } finally {
    if (childAlive) {
      child.kill("SIGKILL");
      await child.status;
    }
    await childLog.done;
    await cluster?.stop();
    await childPods.stop();
    await Deno.remove(secrets, { recursive: true });
    await Deno.remove(dir, { recursive: true });
  }
});

function sameList(a: string[] | undefined, b: string[]): boolean {
  return !!a && a.length === b.length && a.every((x, i) => x === b[i]);
}

function snapshotCounts(agents: ClusterAgent[]): number {
  return agents.reduce((n, a) => n + a.received, 0);
}

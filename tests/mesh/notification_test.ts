/**
 * Change notification over the mesh (issue 18, item 1) on moto: with a coordinator, the cluster's
 * idle reads of deployments/index.json and services/index.json are the coordinator's alone and an
 * apply still reaches every agent; the CA state's ETag is announced too; with the coordinator
 * gone, every agent falls back to slower direct polling and keeps converging; with a new
 * coordinator, notifications resume.
 */

import { workerDeployment } from "../support/fixtures.ts";
import assert from "node:assert/strict";
import * as path from "node:path";
import { Loop } from "../../agent/loop.ts";
import { IndexNotifier } from "../../agent/index_notifier.ts";
import { etagPoller, indexPoller } from "../../agent/mesh/index_poller.ts";
import { ServicesView } from "../../agent/services/services_view.ts";
import { MeshNode } from "../../agent/mesh/mesh_node.ts";
import { parseClusterCa } from "../../agent/mesh/node_tls.ts";
import { applyResources } from "../../cli/desired_state.ts";
import { newCaPem } from "../../cli/setup/cluster_cas.ts";
import {
  DEPLOYMENT_INDEX,
  DEPLOYMENT_SPEC_PREFIX,
  MESH_COORDINATOR_LEASE,
  SERVICE_INDEX,
  WORKLOAD_CA_STATE,
} from "../../core/bucket/bucket_layout.ts";
import { LIMITS } from "../../core/kit/limits.ts";
import type { Service } from "../../core/model/resources.ts";
import { silentLogger } from "../../core/kit/log.ts";
import { openStore } from "../../core/store/store_url.ts";
import { countingStore } from "../support/counting_store.ts";
import { memberDeploymentsPass } from "../support/member_deployments.ts";
import { moto } from "../support/moto.ts";

const N = 12;
const POLL_MS = 200;

const deployment = (name: string) => workerDeployment(name);
const service = (name: string): Service => ({
  apiVersion: "podmin.dev/v1",
  kind: "Service",
  metadata: { name, namespace: "default" },
  spec: { selector: { app: name }, ports: [{ port: 80, targetPort: 8080, protocol: "TCP" }] },
});

async function until(what: string, f: () => Promise<boolean> | boolean, timeoutMs = 30_000) {
  const deadline = Date.now() + timeoutMs;
  while (!(await f())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

Deno.test("notification [moto]: idle index reads are the coordinator's alone; applies still arrive; fallback polling when it dies", async () => {
  const m = await moto();
  const bucket = await m.createBucket();
  const shared = openStore(`s3://${bucket}`);
  const { certPem, keyPem } = await newCaPem("podmin cluster CA test");
  const ca = await parseClusterCa(certPem + keyPem);
  const tmp = await Deno.makeTempDir({ prefix: "podmin-notify-" });
  const agents = Array.from({ length: N }, (_, i) => {
    const counting = countingStore(shared);
    // deno-lint-ignore prefer-const
    let mesh: MeshNode;
    const notifier = new IndexNotifier({
      connected: () => mesh.member.connected(),
      fallbackMs: 1_000,
    });
    const servicesNotifier = new IndexNotifier({
      object: "services",
      connected: () => mesh.member.connected(),
      fallbackMs: 1_000,
    });
    const services = new ServicesView({
      store: counting.store,
      intervalMs: POLL_MS,
      gate: (held) => servicesNotifier.shouldRead(held),
    });
    const base = path.join(tmp, `node-${i}`);
    const deployments = memberDeploymentsPass({ store: counting.store, base, notifier });
    const loop = new Loop({
      name: `deployments-${i}`,
      intervalMs: POLL_MS,
      pass: async () => {
        await services.refresh(Date.now()); // as the agent's DNS loop and Pod certificates do
        return { backOff: (await deployments.pass()).unavailable };
      },
    });
    const coordinatorStore = countingStore(shared);
    mesh = new MeshNode({
      store: counting.store,
      cluster: "test",
      nodeGroup: "workers",
      nodeId: `node-${i}`,
      ca,
      listen: "127.0.0.1:0",
      advertiseHost: "127.0.0.1",
      leaseMs: 3_000,
      heartbeatMs: 500,
      graceMs: 1_000,
      announce: {
        index: { poll: indexPoller(coordinatorStore.store) },
        services: {
          poll: etagPoller(coordinatorStore.store, {
            key: SERVICE_INDEX,
            maxBytes: LIMITS.indexBytes,
          }),
        },
        caState: {
          poll: etagPoller(coordinatorStore.store, { key: WORKLOAD_CA_STATE, maxBytes: 65_536 }),
          everyMs: 2 * POLL_MS,
        },
      },
      pollMs: POLL_MS,
      onSnapshot: (s) => {
        deployments.offer(s);
        if (notifier.onSnapshot(s, deployments.indexEtag)) loop.hint();
        if (servicesNotifier.onSnapshot(s, services.etag)) void services.refresh(Date.now());
      },
      log: silentLogger,
    });
    const manifest = (name: string) =>
      Deno.stat(path.join(base, "manifests", `podmin_default_${name}.json`)).then(
        () => true,
        () => false,
      );
    const knows = (name: string) => services.services().some((s) => s.entry.name === name);
    return {
      counting,
      coordinatorStore,
      notifier,
      servicesNotifier,
      deployments,
      loop,
      mesh,
      manifest,
      knows,
    };
  });
  const memberReads = () =>
    agents.reduce((n, a) => n + a.counting.count("get", DEPLOYMENT_INDEX), 0);
  const memberServiceReads = () =>
    agents.reduce((n, a) => n + a.counting.count("get", SERVICE_INDEX), 0);
  const coordinatorReads = () =>
    agents.reduce((n, a) => n + a.coordinatorStore.count("get", DEPLOYMENT_INDEX), 0);
  const resetCounts = () => agents.forEach((a) => (a.counting.reset(), a.coordinatorStore.reset()));
  try {
    await applyResources({ store: shared, resources: [deployment("first"), service("first")] });
    await Promise.all(agents.map((a) => a.mesh.start()));
    agents.forEach((a) => a.loop.start());
    await until("every agent on notifications with the first Deployment", async () => {
      for (const a of agents) {
        if (!a.notifier.fresh() || !a.servicesNotifier.fresh()) return false;
        if (!await a.manifest("first") || !a.knows("first")) return false;
      }
      return true;
    });

    // Idle: the agents read nothing; the coordinator alone polls.
    resetCounts();
    const idleMs = 3_000;
    await new Promise((r) => setTimeout(r, idleMs));
    const idle = { members: memberReads(), coordinator: coordinatorReads() };
    const leaseReads = agents.filter((a) => !a.mesh.coordinator).reduce(
      (n, a) => n + a.counting.count("get", MESH_COORDINATOR_LEASE),
      0,
    );
    assert.equal(leaseReads, 0, "connected members do not contend for the lease");
    console.log(
      `notification: ${N} agents idle ${idleMs} ms → ${idle.members} agent reads, ` +
        `${idle.coordinator} coordinator reads of the index (poll ${POLL_MS} ms)`,
    );
    assert.equal(idle.members, 0, "agents on notifications read nothing while idle");
    assert.equal(memberServiceReads(), 0, "nor the services index");
    assert.ok(idle.coordinator >= 3 && idle.coordinator <= idleMs / POLL_MS + 2);

    // An apply reaches every agent through the announcement, which carries the change and the
    // new spec (§7.9, changes over the mesh): no agent reads the index or the spec.
    resetCounts();
    const applied0 = agents.reduce((n, a) => n + a.deployments.meshChanges.applied, 0);
    let t0 = performance.now();
    await applyResources({ store: shared, resources: [deployment("second")] });
    await until("every agent wrote the second Deployment", async () => {
      for (const a of agents) if (!await a.manifest("second")) return false;
      return true;
    });
    const specReads = agents.reduce(
      (n, a) => n + a.counting.countPrefix("get", DEPLOYMENT_SPEC_PREFIX),
      0,
    );
    const coordinatorSpecReads = agents.reduce(
      (n, a) => n + a.coordinatorStore.countPrefix("get", DEPLOYMENT_SPEC_PREFIX),
      0,
    );
    const applied = agents.reduce((n, a) => n + a.deployments.meshChanges.applied, 0) - applied0;
    console.log(
      `notification: apply → all ${N} manifests in ${(performance.now() - t0).toFixed(0)} ms, ` +
        `${memberReads()} agent reads of the index, ${specReads} of the spec; the coordinator ` +
        `read the spec ${coordinatorSpecReads} time(s); ${applied} changes applied from the mesh`,
    );
    assert.equal(memberReads(), 0, "no agent read the index: the change came with the snapshot");
    assert.equal(specReads, 0, "no agent read the spec: it came inline, verified");
    assert.equal(coordinatorSpecReads, 1, "the coordinator read the new spec once");
    assert.equal(applied, N, "every agent applied the change");

    // A Service applied: every agent's view has it, by one read each.
    resetCounts();
    t0 = performance.now();
    await applyResources({ store: shared, resources: [service("second")] });
    await until(
      "every agent knows the second Service",
      () => agents.every((a) => a.knows("second")),
    );
    console.log(
      `notification: Service apply → all ${N} views in ${
        (performance.now() - t0).toFixed(0)
      } ms, ` +
        `${memberServiceReads()} agent reads of the services index`,
    );
    assert.ok(memberServiceReads() <= 2 * N, `${memberServiceReads()} reads for one change`);

    // The CA state's ETag is announced (members read it only when it changes).
    const { etag } = await shared.put(WORKLOAD_CA_STATE, new TextEncoder().encode("{}"));
    await until(
      "the CA state announced",
      () => agents.every((a) => a.mesh.member.snapshot?.caState?.etag === etag),
    );

    // The coordinator dies: the agents fall back to direct polling and still converge.
    const leader = agents.find((a) => a.mesh.coordinator)!;
    leader.mesh.crash();
    leader.loop.stop();
    const others = agents.filter((a) => a !== leader);
    await until("every survivor off notifications", () => others.every((a) => !a.notifier.fresh()));
    const fallbackBefore = others.reduce((n, a) => n + a.notifier.counts.fallback, 0);
    t0 = performance.now();
    await applyResources({ store: shared, resources: [deployment("third")] });
    await until("every survivor wrote the third Deployment", async () => {
      for (const a of others) if (!await a.manifest("third")) return false;
      return true;
    });
    const fallbackReads = others.reduce((n, a) => n + a.notifier.counts.fallback, 0) -
      fallbackBefore;
    console.log(
      `notification: coordinator dead → apply reached ${N - 1} agents in ` +
        `${(performance.now() - t0).toFixed(0)} ms by ${fallbackReads} fallback polls`,
    );
    assert.ok(fallbackReads > 0, "the survivors polled directly");

    // A new coordinator: notifications resume and idle reads return to the coordinator alone.
    await until("notifications again", () => others.every((a) => a.notifier.fresh()), 30_000);
    await new Promise((r) => setTimeout(r, 1_500)); // one more fallback poll may be in flight
    resetCounts();
    await new Promise((r) => setTimeout(r, 2_000));
    assert.equal(memberReads(), 0, "back on notifications");
  } finally {
    // Members leave first, so no client session is open when the servers close (GOAWAY).
    for (const a of agents) {
      await a.loop.stop();
      a.mesh.member.stop();
    }
    for (const a of agents) await a.mesh.stop().catch(() => {});
    await Deno.remove(tmp, { recursive: true });
  }
});

/**
 * The endpoint mesh on loopback against moto (issue 14, item 3): agents elect one coordinator
 * through the bucket, converge to one complete snapshot, a change costs O(N) messages (counted and
 * printed), a killed coordinator is replaced within its lease, and a peer with a foreign CA, an
 * expired certificate or TLS 1.2 is refused.
 */

import assert from "node:assert/strict";
import { Buffer } from "node:buffer";
import * as tls from "node:tls";
import { MeshNode } from "../../agent/mesh/mesh_node.ts";
import { readCoordinatorRecord } from "../../agent/mesh/coordinator_record.ts";
import { MeshMember } from "../../agent/mesh/member.ts";
import { type ClusterCa, issueNodeTls, parseClusterCa } from "../../agent/mesh/node_tls.ts";
import { newCaPem } from "../../cli/setup/cluster_cas.ts";
import type { ClusterSnapshot } from "../../core/endpoint_snapshot.ts";
import { silentLogger } from "../../core/log.ts";
import type { ObjectStore } from "../../core/object_store.ts";
import { openStore } from "../../core/store_url.ts";
import { MESH_COORDINATOR, MESH_COORDINATOR_LEASE } from "../../core/bucket_layout.ts";
import { countingStore } from "../support/counting_store.ts";
import { moto } from "../support/moto.ts";

async function clusterCa(name: string): Promise<ClusterCa> {
  const { certPem, keyPem } = await newCaPem(name);
  return await parseClusterCa(`${certPem}\n${keyPem}`);
}

function node(o: { store: ObjectStore; ca: ClusterCa; id: string; leaseMs: number }) {
  const seen: ClusterSnapshot[] = [];
  const mesh = new MeshNode({
    store: o.store,
    cluster: "test",
    nodeGroup: "workers",
    nodeId: o.id,
    ca: o.ca,
    listen: "127.0.0.1:0",
    advertiseHost: "127.0.0.1",
    leaseMs: o.leaseMs,
    heartbeatMs: 1_000,
    graceMs: 1_500,
    onSnapshot: (s) => seen.push(s),
    log: silentLogger,
  });
  return { mesh, seen, id: o.id };
}

async function until(what: string, f: () => boolean, timeoutMs = 30_000) {
  const deadline = Date.now() + timeoutMs;
  while (!f()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

const ip = (i: number) => `fd00:706d:6e:${(i + 1).toString(16)}::a`;

Deno.test("mesh [moto]: 50 agents converge to one snapshot; O(N) messages per change; a killed coordinator is replaced", async () => {
  const m = await moto();
  const bucket = await m.createBucket();
  const counting = countingStore(openStore(`s3://${bucket}`));
  const store = counting.store;
  const ca = await clusterCa("podmin cluster CA test");
  const N = 50;
  const leaseMs = 3_000;
  const nodes = Array.from({ length: N }, (_, i) => node({ store, ca, id: `node-${i}`, leaseMs }));
  try {
    await Promise.all(nodes.map((n) => n.mesh.start()));
    nodes.forEach((n, i) => n.mesh.member.setEndpoints({ "default/web": [ip(i)] }));
    const complete = (s?: ClusterSnapshot) => s?.endpoints["default/web"]?.length === N;
    let t0 = performance.now();
    await until(
      "every agent has the complete snapshot",
      () => nodes.every((n) => complete(n.mesh.member.snapshot)),
    );
    console.log(`mesh: ${N} agents converged in ${(performance.now() - t0).toFixed(0)} ms`);
    const coordinators = nodes.filter((n) => n.mesh.coordinator);
    assert.equal(coordinators.length, 1, "exactly one coordinator");
    const leader = coordinators[0];
    const first = leader.mesh.coordinator!.snapshot;
    for (const n of nodes) {
      assert.deepEqual(
        [n.mesh.member.snapshot!.term, n.mesh.member.snapshot!.version],
        [first.term, first.version],
      );
    }

    // One change: one report in, one snapshot out per member.
    await new Promise((r) => setTimeout(r, 300)); // let heartbeats and joins settle
    const c = leader.mesh.coordinator!.counters;
    const before = { ...c };
    const reportsBefore = nodes.reduce((n, x) => n + x.mesh.member.reportsOut, 0);
    t0 = performance.now();
    nodes[7].mesh.member.setEndpoints({ "default/web": [ip(7)], "default/api": [ip(7)] });
    await until(
      "the change everywhere",
      () => nodes.every((n) => n.mesh.member.snapshot?.endpoints["default/api"]?.length === 1),
    );
    const changeMs = performance.now() - t0;
    const snapshotsOut = c.snapshotsOut - before.snapshotsOut;
    const broadcasts = c.broadcasts - before.broadcasts;
    const reports = nodes.reduce((n, x) => n + x.mesh.member.reportsOut, 0) - reportsBefore;
    console.log(
      `mesh: one change → ${broadcasts} broadcast, ${snapshotsOut} snapshot messages out, ` +
        `${reports} reports in that window (heartbeats included), ${changeMs.toFixed(0)} ms`,
    );
    assert.equal(broadcasts, 1);
    assert.equal(snapshotsOut, N, "one snapshot per member, not N²");

    // The coordinator dies without a word: another takes over within the lease and the
    // survivors converge to the new term without the dead node's endpoint.
    const deadIndex = nodes.indexOf(leader);
    counting.reset();
    leader.mesh.crash();
    t0 = performance.now();
    // Lease reads over the first lease duration after the crash (nobody can take over sooner).
    const early = new Promise<{ reads: number; seconds: number }>((resolve) =>
      setTimeout(() =>
        resolve({
          reads: counting.count("get", MESH_COORDINATOR_LEASE),
          seconds: (performance.now() - t0) / 1000,
        }), leaseMs)
    );
    const survivors = nodes.filter((n) => n !== leader);
    await until("a new coordinator's complete snapshot", () =>
      survivors.every((n) => {
        const s = n.mesh.member.snapshot;
        return !!s && s.term > first.term && s.endpoints["default/web"]?.length === N - 1 &&
          !s.endpoints["default/web"].includes(ip(deadIndex));
      }), 60_000);
    console.log(
      `mesh: coordinator killed → new term everywhere in ${
        (performance.now() - t0).toFixed(0)
      } ms ` +
        `(lease ${leaseMs} ms)`,
    );
    // What the failover cost the bucket: every survivor stepping the lease each step and reading
    // the record at each reconnect attempt (≤ 2 s backoff) would be hundreds of reads; a few
    // contenders per step (ContentionGate) and one record read per loss, per lease, per step
    // after it are far fewer.
    const failoverS = (performance.now() - t0) / 1000;
    const stepS = leaseMs / 3 / 1000;
    const { reads: earlyReads, seconds: earlyS } = await early;
    const everyStep = (N - 1) * earlyS / stepS;
    const recordReads = counting.count("get", MESH_COORDINATOR);
    console.log(
      `mesh: failover reads: lease ${earlyReads} in the first ${earlyS.toFixed(1)} s (every ` +
        `survivor every step: ${everyStep.toFixed(0)}), ${
          counting.count("get", MESH_COORDINATOR_LEASE)
        } in all; coordinator record ${recordReads} (${
          (recordReads / (N - 1)).toFixed(1)
        } per survivor)`,
    );
    assert.ok(earlyReads < everyStep / 2, `lease reads ${earlyReads}`);
    assert.ok(
      recordReads <= (N - 1) * (2 + failoverS / stepS) / 2,
      `record reads ${recordReads} in ${failoverS.toFixed(1)} s`,
    );
    const now = survivors.filter((n) => n.mesh.coordinator);
    assert.equal(now.length, 1);
    assert.equal((await readCoordinatorRecord(store))!.nodeId, now[0].id);
  } finally {
    // Members leave first, so no client session is open when the servers close (GOAWAY).
    for (const n of nodes) n.mesh.member.stop();
    await Promise.all(nodes.map((n) => n.mesh.stop().catch(() => {})));
  }
});

Deno.test("mesh [moto]: a foreign CA, an expired certificate and TLS 1.2 are refused", async () => {
  const m = await moto();
  const bucket = await m.createBucket();
  const store = openStore(`s3://${bucket}`);
  const ca = await clusterCa("podmin cluster CA test");
  const a = node({ store, ca, id: "node-a", leaseMs: 3_000 });
  const intruders: MeshMember[] = [];
  try {
    await a.mesh.start();
    a.mesh.member.setEndpoints({ "default/web": [ip(0)] });
    await until("the coordinator's own snapshot", () => !!a.mesh.member.snapshot);

    const member = (tlsOf: () => Promise<Awaited<ReturnType<typeof issueNodeTls>>>) => {
      const seen: ClusterSnapshot[] = [];
      return tlsOf().then((t) => {
        const mm = new MeshMember({
          nodeId: "node-x",
          nodeGroup: "workers",
          tls: () => t,
          coordinator: () => readCoordinatorRecord(store),
          onSnapshot: (s) => seen.push(s),
          heartbeatMs: 500,
          log: silentLogger,
        });
        intruders.push(mm);
        mm.start();
        mm.setEndpoints({ "default/evil": [ip(9)] });
        return { mm, seen };
      });
    };
    const foreignCa = await clusterCa("podmin cluster CA test");
    const foreign = await member(() =>
      issueNodeTls({ ca: foreignCa, cluster: "test", nodeGroup: "workers", nodeId: "node-x" })
    );
    const expired = await member(() =>
      issueNodeTls({
        ca,
        cluster: "test",
        nodeGroup: "workers",
        nodeId: "node-x",
        now: new Date(Date.now() - 3 * 3600_000),
        lifetimeMs: 3600_000,
      })
    );
    await new Promise((r) => setTimeout(r, 3_000));
    assert.deepEqual(foreign.seen, [], "a foreign CA's node got a snapshot");
    assert.deepEqual(expired.seen, [], "an expired certificate got a snapshot");
    assert.ok(foreign.mm.state.lastError, "the foreign member says why");
    assert.equal(a.mesh.coordinator!.snapshot.endpoints["default/evil"], undefined);

    // TLS 1.2 with a valid client certificate: refused at the handshake (TLS 1.3 connects).
    const valid = await issueNodeTls({
      ca,
      cluster: "test",
      nodeGroup: "workers",
      nodeId: "node-y",
    });
    const handshake = (maxVersion: "TLSv1.2" | "TLSv1.3") =>
      new Promise<string>((resolve) => {
        const socket = tls.connect({
          host: "127.0.0.1",
          port: a.mesh.port,
          ca: Buffer.from(valid.caPem),
          cert: Buffer.from(valid.certPem),
          key: Buffer.from(valid.keyPem),
          maxVersion,
          servername: "node-a.nodes.test.podmin",
          ALPNProtocols: ["h2"],
        });
        socket.on("secureConnect", () => {
          resolve(`connected with ${socket.getProtocol()}`);
          socket.destroy();
        });
        socket.on("error", (err) => resolve(`refused: ${err.message}`));
      });
    assert.equal(await handshake("TLSv1.3"), "connected with TLSv1.3");
    const old = await handshake("TLSv1.2");
    assert.match(old, /^refused/, old);
  } finally {
    for (const mm of intruders) mm.stop();
    a.mesh.member.stop();
    await a.mesh.stop();
  }
});

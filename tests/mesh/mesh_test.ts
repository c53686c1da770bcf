/**
 * The endpoint mesh on loopback against moto (issue 14, item 3): agents elect one coordinator
 * through the bucket, converge to one complete snapshot, a change costs O(N) messages (counted and
 * printed), a killed coordinator is replaced within its lease, and the coordinator refuses a member
 * whose client certificate is of a foreign CA, absent or expired, one reporting under another
 * node's id, and TLS 1.2.
 */

import assert from "node:assert/strict";
import { Buffer } from "node:buffer";
import * as tls from "node:tls";
import * as grpc from "@grpc/grpc-js";
import { MeshNode } from "../../agent/mesh/mesh_node.ts";
import {
  type CoordinatorRecord,
  readCoordinatorRecord,
} from "../../agent/mesh/coordinator_record.ts";
import {
  type MemberStream,
  MESH_CHANNEL_OPTIONS,
  MeshClient,
} from "../../agent/mesh/mesh_service.ts";
import {
  clientCredentials,
  type ClusterCa,
  issueNodeTls,
  type NodeTls,
  parseClusterCa,
} from "../../agent/mesh/node_tls.ts";
import { newCaPem } from "../../cli/setup/cluster_cas.ts";
import type { ClusterSnapshot, NodeReport } from "../../core/model/endpoint_snapshot.ts";
import { silentLogger } from "../../core/kit/log.ts";
import type { ObjectStore } from "../../core/store/object_store.ts";
import { openStore } from "../../core/store/store_url.ts";
import { MESH_COORDINATOR, MESH_COORDINATOR_LEASE } from "../../core/bucket/bucket_layout.ts";
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

/**
 * What the coordinator does with one member stream opened over `credentials` that sends `report`:
 * "snapshot" when it answers with one, else "refused: <status details>". Waits for that event
 * (a stream that sees neither within `ms` is a failure of its own, never a refusal).
 */
function exchange(o: {
  record: CoordinatorRecord;
  credentials: grpc.ChannelCredentials;
  report: NodeReport;
  ms?: number;
}): Promise<string> {
  const client = new MeshClient(o.record.endpoint, o.credentials, {
    ...MESH_CHANNEL_OPTIONS,
    "grpc.ssl_target_name_override": o.record.serverName,
    "grpc.default_authority": o.record.serverName,
  });
  const stream = (client as unknown as { exchange(): MemberStream }).exchange();
  return new Promise<string>((resolve) => {
    const timer = setTimeout(
      () => resolve(`no answer within ${o.ms ?? 20_000} ms`),
      o.ms ?? 20_000,
    );
    const done = (outcome: string) => {
      clearTimeout(timer);
      resolve(outcome);
    };
    stream.on("data", () => done("snapshot"));
    stream.on("error", (err: grpc.ServiceError) => done(`refused: ${err.details}`));
    stream.on("end", () => done("refused: the coordinator ended the stream"));
    stream.write(o.report);
  }).finally(() => {
    stream.cancel();
    client.close();
  });
}

Deno.test("mesh [moto]: the coordinator refuses client certificates of a foreign CA, none, an expired one, a report under another node's id, and TLS 1.2", async () => {
  const m = await moto();
  const bucket = await m.createBucket();
  const store = openStore(`s3://${bucket}`);
  const ca = await clusterCa("podmin cluster CA test");
  const a = node({ store, ca, id: "node-a", leaseMs: 3_000 });
  try {
    await a.mesh.start();
    a.mesh.member.setEndpoints({ "default/web": [ip(0)] });
    await until("the coordinator's own snapshot", () => !!a.mesh.member.snapshot);
    const record = (await readCoordinatorRecord(store))!;
    const coordinator = a.mesh.coordinator!;
    const report = (nodeId: string, service: string): NodeReport => ({
      nodeId,
      nodeGroup: "workers",
      seq: 1,
      endpoints: { [service]: [ip(9)] },
    });
    const issue = (o: { ca: ClusterCa; nodeId: string; now?: Date; lifetimeMs?: number }) =>
      issueNodeTls({ ...o, cluster: "test", nodeGroup: "workers" });
    /** Every client below trusts the cluster CA: the server's certificate always passes. */
    const presenting = (client: NodeTls) => clientCredentials({ ...client, caPem: ca.pem });

    // The control: a node certificate of the cluster CA, reporting under its own id, is served
    // by this very harness (so a refusal below is the coordinator's, not the client's).
    const valid = await issue({ ca, nodeId: "node-v" });
    assert.equal(
      await exchange({
        record,
        credentials: presenting(valid),
        report: report("node-v", "default/ok"),
      }),
      "snapshot",
    );
    await until(
      "the control's endpoints in the snapshot",
      () => coordinator.snapshot.endpoints["default/ok"]?.length === 1,
    );

    const reportsBefore = coordinator.counters.reportsIn;
    // Refused at the TLS handshake (spec §7.9: a client certificate of the cluster CA required):
    // the call never reaches the service, whose own check would say "no cluster node certificate".
    const atHandshake = /^refused: No connection established\./;
    // A client certificate of another CA (same CA name, same node URI and DNS name).
    const foreignCa = await clusterCa("podmin cluster CA test");
    const foreign = await exchange({
      record,
      credentials: presenting(await issue({ ca: foreignCa, nodeId: "node-x" })),
      report: report("node-x", "default/evil"),
    });
    assert.match(foreign, atHandshake, `a foreign CA's client certificate: ${foreign}`);

    // No client certificate at all.
    const anonymous = await exchange({
      record,
      credentials: grpc.credentials.createSsl(Buffer.from(ca.pem)),
      report: report("node-x", "default/evil"),
    });
    assert.match(anonymous, atHandshake, `no client certificate: ${anonymous}`);

    // A certificate of the cluster CA, issued already expired (it ended two hours ago).
    const expired = await exchange({
      record,
      credentials: presenting(
        await issue({
          ca,
          nodeId: "node-x",
          now: new Date(Date.now() - 3 * 3600_000),
          lifetimeMs: 3600_000,
        }),
      ),
      report: report("node-x", "default/evil"),
    });
    assert.match(expired, atHandshake, `an expired client certificate: ${expired}`);
    console.log(`mesh: foreign CA → ${foreign}; none → ${anonymous}; expired → ${expired}`);
    assert.equal(
      coordinator.counters.reportsIn,
      reportsBefore,
      "the coordinator took a report over a refused certificate",
    );

    // A valid node certificate (node-y) carrying a report under another node's id (node-a, the
    // coordinator's own): refused by the coordinator, which says why.
    const y = await issue({ ca, nodeId: "node-y" });
    const impostor = await exchange({
      record,
      credentials: presenting(y),
      report: { ...report("node-a", "default/evil"), endpoints: { "default/web": [ip(9)] } },
    });
    assert.equal(impostor, "refused: report for node-a on node-y's connection");

    // Nothing of the intruders reached the snapshot; node-a's endpoints are its own. Checked once
    // a later change of the control's is in it (any report taken before would be too).
    assert.equal(
      await exchange({
        record,
        credentials: presenting(valid),
        report: { ...report("node-v", "default/later"), seq: 2 },
      }),
      "snapshot",
    );
    await until(
      "the control's later change in the snapshot",
      () => coordinator.snapshot.endpoints["default/later"]?.length === 1,
    );
    assert.equal(coordinator.snapshot.endpoints["default/evil"], undefined);
    assert.deepEqual(coordinator.snapshot.endpoints["default/web"], [ip(0)]);

    // TLS 1.2 with a valid client certificate: refused at the handshake (TLS 1.3 connects).
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
    a.mesh.member.stop();
    await a.mesh.stop();
  }
});

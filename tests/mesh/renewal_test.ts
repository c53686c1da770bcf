/**
 * Node certificates of the endpoint mesh renew while the agents run (issue 30, item 5), on moto:
 * with a 4 s node certificate lifetime, a mesh of agents — two in this process (the product's
 * `DiscoveryMesh`, tests/mesh/discovery_cluster.ts) and one real `podmin-agent run
 * --node-cert-lifetime 4s` process — runs through more than three lifetimes. Renewals drop no
 * member stream; after the first certificates expired, a new handshake to the coordinator gets a
 * certificate valid now, the coordinator is stopped and a new one takes over (every handshake
 * anew, the new coordinator's server bound with a certificate long expired), a new member joins,
 * and every agent keeps converging to the same endpoints. The real agent's mesh.json says when its
 * node certificate expires.
 */

import assert from "node:assert/strict";
import { Buffer } from "node:buffer";
import * as path from "node:path";
import * as tls from "node:tls";
import { readCoordinatorRecord } from "../../agent/mesh/coordinator_record.ts";
import type { MeshStatus } from "../../agent/mesh/discovery_mesh.ts";
import { issueNodeTls } from "../../agent/mesh/node_tls.ts";
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

const LIFETIME = "4s";
const LIFETIME_MS = 4_000;
const LEASE_MS = 3_000;
const WEB = `${NAMESPACE}/web`;

/** Polls `f` until it gives a value (state only a file or the clock shows). */
async function poll<T>(
  what: string,
  f: () => Promise<T | undefined> | T | undefined,
  timeoutMs = 60_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await f();
    if (v !== undefined) return v;
    if (Date.now() > deadline) {
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    }
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

function sameList(a: string[] | undefined, b: string[]): boolean {
  const x = [...(a ?? [])].sort();
  const y = [...b].sort();
  return !!a && x.length === y.length && x.every((v, i) => v === y[i]);
}

Deno.test("mesh renewal [moto]: 4 s node certificates over three lifetimes; a coordinator change and a new member after the first expired; every agent converges", async () => {
  const m = await moto();
  const bucket = await m.createBucket();
  const store = openStore(`s3://${bucket}`);
  const { ca, pem } = await testClusterCa();
  await applyServices(store, ["web"]);
  const dir = await Deno.makeTempDir({ prefix: "podmin-renewal-" });
  const secrets = await Deno.makeTempDir({ dir: "/dev/shm", prefix: "podmin-renewal-ca-" });
  const caFile = path.join(secrets, "cluster-ca.pem");
  await Deno.writeTextFile(caFile, pem, { mode: 0o600 });

  // Agents 1 and 2 in this process (one of them the coordinator), agent 0 a real podmin-agent
  // that joins them; one Ready web Pod each.
  const t0 = Date.now();
  const cluster = await DiscoveryCluster.start({
    store,
    ca,
    indices: [1, 2],
    dir,
    servicesIntervalMs: 500,
    initialPods: (i) => [servicePod({ app: "web", node: i, n: 0, ready: true })],
    nodeCertLifetimeMs: LIFETIME_MS,
    leaseMs: LEASE_MS,
  });
  // The in-process agents' first certificates (renewal comes at about half their life).
  const firstNotAfter = cluster.agents.map((a) => Date.parse(a.mesh.nodeCertificate()!.notAfter));
  const tick = setInterval(() => cluster.wake(), 50);
  await cluster.until(
    "an in-process coordinator",
    () => cluster.agents.some((a) => a.mesh.coordinator()),
  );
  const childPods = await PodsApiServer.start(path.join(dir, "pods-0.sock"));
  childPods.set(servicePod({ app: "web", node: 0, n: 0, ready: true }));
  const childBase = path.join(dir, nodeId(0));
  const child = new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "--allow-all",
      new URL("../../agent/main.ts", import.meta.url).pathname,
      ...nodeAgentArgs({ bucket: `s3://${bucket}`, nodeGroup: "workers", base: childBase }),
      "--registry-listen",
      "off",
      ...meshAgentArgs({ nodeId: nodeId(0), caFile, podsSocket: childPods.socket }),
      "--node-cert-lifetime",
      LIFETIME,
    ],
    stdin: "null",
    stdout: "null",
    stderr: "piped",
  }).spawn();
  const childLog = drain(child.stderr);
  const childStatus = async (): Promise<MeshStatus | undefined> => {
    try {
      return JSON.parse(await Deno.readTextFile(path.join(childBase, "state", "mesh.json")));
    } catch {
      return undefined; // not written yet, or being replaced
    }
  };
  const withLog = (err: Error) => {
    throw new Error(`${err.message}\nreal agent's log:\n${childLog.tail()}`);
  };
  /** Every live agent (the real one through its mesh.json) has exactly these web endpoints. */
  const converged = async (
    what: string,
    agents: ClusterAgent[],
    web: string[],
    also: (s: ClusterSnapshot) => boolean = () => true,
  ): Promise<MeshStatus> => {
    await cluster.until(
      `${what}: the in-process agents`,
      () =>
        agents.every((a) =>
          !!a.snapshot && sameList(a.snapshot.endpoints[WEB], web) && also(a.snapshot)
        ),
    ).catch(withLog);
    return await poll(`${what}: the real agent`, async () => {
      const s = await childStatus();
      const snap = s?.snapshot as ClusterSnapshot | undefined;
      return snap && sameList(snap.endpoints[WEB], web) && also(snap) ? s : undefined;
    }).catch(withLog);
  };

  try {
    const first = await converged("every agent with the three web endpoints", cluster.agents, [
      podAddress(0, 0),
      podAddress(1, 0),
      podAddress(2, 0),
    ]);
    const record = (await readCoordinatorRecord(store))!;
    // When every first certificate has expired (the real agent's first mesh.json names its first
    // certificate or a later one).
    assert.ok(first.nodeCertificate, "the real agent's mesh.json has its node certificate");
    const firstExpiry = Math.max(Date.parse(first.nodeCertificate.notAfter), ...firstNotAfter);
    const streams = cluster.agents.map((a) => a.mesh.streamsOpened());
    const issued = cluster.agents.map((a) => a.mesh.nodeCertificate()!.issued);

    // Past the expiry of every first certificate (a second more: verifiers count whole seconds).
    await poll(
      "the first certificates' expiry",
      () => Date.now() > firstExpiry + 1_000 || undefined,
    );
    const renewedWithoutDrops = cluster.agents.map((a, i) => ({
      id: a.id,
      renewals: a.mesh.nodeCertificate()!.issued - issued[i],
      reconnects: a.mesh.streamsOpened() - streams[i],
    }));

    // A new handshake to the coordinator (its server bound with the first certificate) now.
    const [host, port] = [
      record.endpoint.replace(/:\d+$/, ""),
      Number(/:(\d+)$/.exec(record.endpoint)![1]),
    ];
    const visitor = await issueNodeTls({ ca, cluster: "test", nodeGroup: "w", nodeId: "visitor" });
    const served = await new Promise<string>((resolve) => {
      const socket = tls.connect({
        host,
        port,
        ca: Buffer.from(visitor.caPem),
        cert: Buffer.from(visitor.certPem),
        key: Buffer.from(visitor.keyPem),
        servername: record.serverName,
        ALPNProtocols: ["h2"],
      });
      socket.on("secureConnect", () => {
        resolve(`valid to ${socket.getPeerCertificate().valid_to}`);
        socket.destroy();
      });
      socket.on("error", (err) => resolve(`refused: ${err.message}`));
    });

    // The coordinator stops (its lease released): every survivor's stream ends, every
    // handshake is new, and the new coordinator's server was bound with an expired certificate.
    const leader = cluster.agents.find((a) => a.id === record.nodeId);
    assert.ok(leader, `the coordinator ${record.nodeId} is in this process`);
    assert.ok(leader.mesh.coordinator());
    await leader.mesh.stop();
    const live = cluster.agents.filter((a) => a !== leader);
    const survivorsWeb = [0, 1, 2].filter((i) => i !== leader.index).map((i) => podAddress(i, 0));
    await converged(
      `a new coordinator (after ${record.nodeId}, term ${record.term}) with the survivors' endpoints`,
      live,
      survivorsWeb,
      (s) => s.term > record.term,
    );

    // A new member joins, its first handshakes long after the first certificates expired.
    const joined = await cluster.join(3);
    live.push(joined);
    await converged("the new member's endpoint everywhere", live, [
      ...survivorsWeb,
      podAddress(3, 0),
    ]);

    // Through a third lifetime and past the new member's first: a change still reaches everyone.
    const until = Math.max(
      t0 + 3 * LIFETIME_MS,
      Date.parse(joined.mesh.nodeCertificate()!.notAfter),
    ) + 1_000;
    await poll("three lifetimes and the new member's first", () => Date.now() > until || undefined);
    joined.pods.set(servicePod({ app: "web", node: 3, n: 1, ready: true }));
    const last = await converged("a new Ready Pod everywhere", live, [
      ...survivorsWeb,
      podAddress(3, 0),
      podAddress(3, 1),
    ]);

    console.log(
      `mesh renewal: lifetime ${LIFETIME}; before the first expiry ${
        JSON.stringify(renewedWithoutDrops)
      }; coordinator ${record.nodeId} stopped, new term everywhere; ${joined.id} joined; ` +
        `certificates issued: ${
          live.map((a) => `${a.id} ${a.mesh.nodeCertificate()!.issued}`).join(", ")
        }, ${nodeId(0)} (mesh.json) ${last.nodeCertificate!.issued}`,
    );
    for (const r of renewedWithoutDrops) {
      assert.ok(r.renewals >= 1, `${r.id} renewed before its first certificate expired`);
      assert.equal(r.reconnects, 0, `${r.id}: renewals dropped no stream`);
    }
    assert.match(served, /^valid to /, `a new handshake to the coordinator: ${served}`);
    const served_to = Date.parse(served.replace(/^valid to /, ""));
    assert.ok(served_to > firstExpiry, `served a certificate valid to ${served}`);
    for (const a of live) {
      const c = a.mesh.nodeCertificate()!;
      assert.ok(c.issued >= 2, `${a.id} issued ${c.issued}`);
      assert.equal(c.failures, 0);
    }
    // The real agent's status: issued well past three lifetimes' worth, its expiry ahead.
    const status = (await childStatus())!;
    const cert = status.nodeCertificate!;
    assert.ok(cert.issued >= 4, `the real agent issued ${cert.issued}`);
    assert.equal(cert.failures, 0);
    assert.equal(cert.expired, false);
    assert.ok(Date.parse(cert.notAfter) > firstExpiry + 2 * LIFETIME_MS, cert.notAfter);
  } finally {
    clearInterval(tick);
    child.kill("SIGKILL");
    await child.status;
    await childLog.done;
    await cluster.stop();
    await childPods.stop();
    await Deno.remove(secrets, { recursive: true });
    await Deno.remove(dir, { recursive: true });
  }
});

/**
 * The mesh node certificate's renewal against a real grpc-js server on loopback: due by the
 * injected clock, swapped for new handshakes while an established connection keeps its session
 * (TLS 1.3 still enforced after the swap); a failed renewal keeps the current certificate serving
 * until it expires, says so in the status and is retried with backoff; the lifetime flag's bounds.
 */

import assert from "node:assert/strict";
import { Buffer } from "node:buffer";
import * as tls from "node:tls";
import * as grpc from "@grpc/grpc-js";
import { newCaPem } from "../../cli/setup/cluster_cas.ts";
import { UsageError } from "../../core/kit/errors.ts";
import { silentLogger } from "../../core/kit/log.ts";
import {
  NODE_CERT_LIFETIME,
  type NodeCertificateStatus,
  NodeIdentity,
  parseNodeCertLifetime,
} from "./node_identity.ts";
import {
  type ClusterCa,
  issueNodeTls,
  type IssueNodeTlsOptions,
  nodeServerName,
  type NodeTls,
  parseClusterCa,
} from "./node_tls.ts";

async function clusterCa(): Promise<ClusterCa> {
  const { certPem, keyPem } = await newCaPem("podmin cluster CA test");
  return await parseClusterCa(`${certPem}\n${keyPem}`);
}

async function serve(identity: NodeIdentity): Promise<{ port: number; server: grpc.Server }> {
  const server = new grpc.Server();
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync("127.0.0.1:0", identity.serverCredentials, (err, p) => {
      if (err) reject(err);
      else resolve(p);
    })
  );
  return { port, server };
}

/** A TLS handshake as a mesh client (`client`'s certificate): the server's serial, or why not. */
function handshake(
  port: number,
  client: NodeTls,
  o: { maxVersion?: "TLSv1.2" | "TLSv1.3"; keep?: tls.TLSSocket[] } = {},
): Promise<string> {
  return new Promise((resolve) => {
    const socket = tls.connect({
      host: "127.0.0.1",
      port,
      ca: Buffer.from(client.caPem),
      cert: Buffer.from(client.certPem),
      key: Buffer.from(client.keyPem),
      servername: nodeServerName("test", "node-a"),
      ALPNProtocols: ["h2"],
      maxVersion: o.maxVersion ?? "TLSv1.3",
    });
    socket.on("secureConnect", () => {
      resolve(serial(socket.getPeerCertificate().serialNumber));
      if (o.keep) o.keep.push(socket);
      else socket.destroy();
    });
    socket.on("error", (err) => resolve(`refused: ${err.message}`));
  });
}

async function until(what: string, f: () => boolean, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!f()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** Serials as node:tls prints them: uppercase hex, no leading zeros. */
const serial = (hex: string) => `serial ${hex.toUpperCase().replace(/^0+/, "")}`;
const serialOf = (t: NodeTls) => serial(t.serial);

Deno.test("node identity: renewal is due by the injected clock; new handshakes get the new certificate, an open connection keeps its own, TLS 1.3 still required", async () => {
  const ca = await clusterCa();
  let offsetMs = 0;
  const lifetimeMs = 8 * 60_000;
  const identity = new NodeIdentity({
    ca,
    cluster: "test",
    nodeGroup: "workers",
    nodeId: "node-a",
    lifetimeMs,
    now: () => new Date(Date.now() + offsetMs),
    log: silentLogger,
  });
  await identity.start();
  const { port, server } = await serve(identity);
  const open: tls.TLSSocket[] = [];
  try {
    const first = identity.current;
    const client = await issueNodeTls({ ca, cluster: "test", nodeGroup: "w", nodeId: "node-b" });
    assert.equal(await handshake(port, client, { keep: open }), serialOf(first));
    assert.ok(first.renewAt > Date.now() + 0.4 * lifetimeMs, "due at about half its life");

    identity.check();
    await new Promise((r) => setTimeout(r, 100));
    assert.equal(identity.status()!.issued, 1, "not due yet: no new certificate");

    // Past the due time by the injected clock (within the 5-minute backdate, so the new
    // certificate is valid now by the system clock too).
    offsetMs = first.renewAt - Date.now() + 10_000;
    identity.check();
    await until("the renewal", () => identity.status()!.issued === 2);
    const second = identity.current;
    assert.notEqual(second.serial, first.serial);
    assert.notEqual(second.keyPem, first.keyPem, "a new key");
    assert.ok(second.notAfter > first.notAfter);
    assert.equal(await handshake(port, client), serialOf(second), "a new handshake");
    const [old] = open;
    assert.equal(old.destroyed, false, "the connection opened before the renewal is open");
    assert.equal(serial(old.getPeerCertificate().serialNumber), serialOf(first));
    const tls12 = await handshake(port, client, { maxVersion: "TLSv1.2" });
    assert.match(tls12, /^refused/, `TLS 1.2 after the swap: ${tls12}`);
  } finally {
    for (const s of open) s.destroy();
    await identity.stop();
    server.forceShutdown();
  }
});

Deno.test("node identity: a failed renewal keeps the current certificate until it expires, the status says so, retries back off, the next good one is served", async () => {
  const ca = await clusterCa();
  let failing = false;
  const attempts: number[] = [];
  const issue = (o: IssueNodeTlsOptions) => {
    attempts.push(performance.now());
    if (failing) return Promise.reject(new Error("cluster CA unreadable (test)"));
    return issueNodeTls(o);
  };
  const changes: NodeCertificateStatus[] = [];
  const lifetimeMs = 10_000;
  const identity = new NodeIdentity({
    ca,
    cluster: "test",
    nodeGroup: "workers",
    nodeId: "node-a",
    lifetimeMs,
    issue,
    random: () => 0.999_999,
    onChange: (s) => changes.push(s),
    log: silentLogger,
  });
  failing = false;
  await identity.start();
  failing = true;
  const { port, server } = await serve(identity);
  try {
    const first = identity.current;
    const client = await issueNodeTls({ ca, cluster: "test", nodeGroup: "w", nodeId: "node-b" });
    await until("three failed renewals", () => identity.status()!.failures >= 3);
    const s = identity.status()!;
    assert.equal(s.serial, first.serial, "the current certificate is kept");
    assert.equal(s.notAfter, first.notAfter.toISOString(), "the status says when it expires");
    assert.equal(s.expired, false);
    assert.equal(s.lastError, "cluster CA unreadable (test)");
    assert.ok(s.lastFailureAt);
    assert.equal(await handshake(port, client), serialOf(first), "it still serves");
    assert.ok(changes.some((c) => c.failures >= 1 && c.lastError), "failures are reported");

    // Backoff: the wait after n failures doubles from the check interval (1/40 of the lifetime)
    // to its cap (1/10), not the check interval each time.
    const checkMs = lifetimeMs / 40;
    const f = s.failures;
    const jittered = Math.floor(0.999_999 * Math.min(lifetimeMs / 10, checkMs * 2 ** f));
    assert.equal(identity.nextCheckMs(), Math.max(checkMs, jittered));
    assert.ok(identity.nextCheckMs() >= 2 * checkMs);
    const failedAttempts = attempts.length - 1;
    assert.ok(failedAttempts >= 3, `${failedAttempts} attempts`);

    // Expired: no handshake succeeds with it, and the status says so (verifiers compare whole
    // seconds: a handshake in the second of notAfter still passes).
    await until("the first certificate's expiry", () => Date.now() > first.notAfter.getTime());
    assert.equal(identity.status()!.expired, true);
    await until("a second past it", () => Date.now() > first.notAfter.getTime() + 1_000);
    assert.equal(identity.status()!.expired, true);
    const late = await handshake(port, client);
    // (Deno's node:tls says "unable to verify the first certificate"; the same client connects
    // again below once a new certificate is served.)
    assert.match(late, /^refused/, late);

    // The CA is back: the next attempt renews and new handshakes succeed again.
    failing = false;
    await until("the renewal after the failures", () => identity.status()!.issued === 2);
    const after = identity.status()!;
    assert.equal(after.failures, 0);
    assert.equal(after.lastError, undefined);
    assert.equal(after.expired, false);
    assert.equal(await handshake(port, client), serialOf(identity.current));
    assert.equal(identity.nextCheckMs(), checkMs, "back to the check interval");
  } finally {
    await identity.stop();
    server.forceShutdown();
  }
});

Deno.test("node identity: --node-cert-lifetime is a duration within 2s..720h", () => {
  assert.equal(parseNodeCertLifetime(NODE_CERT_LIFETIME.default), 24 * 3_600_000);
  assert.equal(parseNodeCertLifetime("4s"), 4_000);
  assert.equal(parseNodeCertLifetime("720h"), 720 * 3_600_000);
  for (const bad of ["1s", "1999ms", "721h"]) {
    assert.throws(
      () => parseNodeCertLifetime(bad),
      (err: unknown) =>
        err instanceof UsageError &&
        /--node-cert-lifetime .* is outside 2s\.\.720h/.test(err.message),
      bad,
    );
  }
  assert.throws(() => parseNodeCertLifetime("soon"), /invalid --node-cert-lifetime "soon"/);
});

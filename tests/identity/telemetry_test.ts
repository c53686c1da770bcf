/**
 * The telemetry identity: a real TLS server that requires client certificates accepts the Fluent
 * Bit identity and refuses an expired or foreign one; the validate / repair / renew / restart
 * cycle; the OTel CA bundle refreshed from S3 (moto) with the last good one kept.
 */

import assert from "node:assert/strict";
import * as path from "node:path";
import { fileCaKey } from "../../agent/identity/ca_key.ts";
import { CaView } from "../../agent/identity/ca_view.ts";
import { TLS_FILES } from "../../agent/identity/pod_certificates.ts";
import { TelemetryIdentity } from "../../agent/identity/telemetry_identity.ts";
import {
  certificatesPem,
  generateKeyPair,
  issueLeaf,
  LIFETIMES,
  parseCertificatesPem,
  privateKeyPem,
} from "../../core/crypto/certificates.ts";
import { createFsBucket, FsStore } from "../../core/store/fs_store.ts";
import { silentLogger } from "../../core/kit/log.ts";
import { openStore } from "../../core/store/store_url.ts";
import { moto } from "../support/moto.ts";
import { mutualTls } from "../support/openssl_tls.ts";
import { testWith } from "../support/requirements.ts";
import { caEntry, writeCaState } from "../support/workload_ca.ts";

const HOUR = 3600_000;

async function setup() {
  const disk = await Deno.makeTempDir({ prefix: "podmin-telemetry-" });
  const shm = await Deno.makeTempDir({ dir: "/dev/shm", prefix: "podmin-telemetry-" });
  await createFsBucket(path.join(disk, "bucket"));
  const store = new FsStore({ root: path.join(disk, "bucket") });
  const keys = await generateKeyPair();
  const keyFile = path.join(shm, "ca.key");
  await Deno.writeTextFile(keyFile, await privateKeyPem(keys.privateKey));
  const from = new Date(Date.now() - HOUR);
  const active = await caEntry({ keys, role: "active", name: "workload ca 1", from });
  await writeCaState(store, [active]);
  const restarts: string[] = [];
  let restartFails = false;
  const telemetry = (extra: Partial<ConstructorParameters<typeof TelemetryIdentity>[0]> = {}) =>
    new TelemetryIdentity({
      cluster: "test",
      nodeGroup: "workers",
      nodeId: "i-0123456789abcdef0",
      dir: path.join(shm, "telemetry"),
      ca: new CaView({ store, caKey: fileCaKey(keyFile), refreshMs: 0 }),
      restartFluentBit: () => {
        if (restartFails) return Promise.reject(new Error("Unit podmin-fluent-bit.service failed"));
        restarts.push(new Date().toISOString());
        return Promise.resolve();
      },
      log: silentLogger,
      ...extra,
    });
  return {
    disk,
    shm,
    store,
    keys,
    active,
    restarts,
    failRestarts(v: boolean) {
      restartFails = v;
    },
    telemetry,
    client: path.join(shm, "telemetry", "client"),
    async [Symbol.asyncDispose]() {
      await Deno.remove(disk, { recursive: true });
      await Deno.remove(shm, { recursive: true });
    },
  };
}

testWith(
  "Fluent Bit identity [openssl]: a server requiring client certificates accepts it and refuses an expired or foreign one",
  { tools: ["openssl", "ss"] },
  async () => {
    await using s = await setup();
    const status = await s.telemetry().pass();
    assert.deepEqual(status.errors, []);
    assert.match(status.client!.action, /renewed: no complete identity/);

    // The collector: a server certificate from the same workload CA, trusting the bundle.
    const [caCert] = parseCertificatesPem(s.active.pem);
    const serverKeys = await generateKeyPair();
    const serverCert = await issueLeaf({
      ca: { certificate: caCert, privateKey: s.keys.privateKey },
      identity: { profile: "pod", cluster: "test", namespace: "observability", name: "otel" },
      publicKey: serverKeys.publicKey,
    });
    const server = {
      cert: path.join(s.shm, "server.crt"),
      key: path.join(s.shm, "server.key"),
      ca: path.join(s.client, TLS_FILES.ca),
    };
    await Deno.writeTextFile(server.cert, certificatesPem([serverCert]));
    await Deno.writeTextFile(server.key, await privateKeyPem(serverKeys.privateKey));
    const client = {
      cert: path.join(s.client, TLS_FILES.cert),
      key: path.join(s.client, TLS_FILES.key),
      ca: path.join(s.client, TLS_FILES.ca),
    };
    const good = await mutualTls(server, client);
    assert.ok(good.ok, good.text);

    // Expired: the same identity, issued long ago.
    const oldKeys = await generateKeyPair();
    const expired = await issueLeaf({
      ca: { certificate: caCert, privateKey: s.keys.privateKey },
      identity: { profile: "fluent-bit", cluster: "test", nodeGroup: "workers", node: "i-0ab" },
      publicKey: oldKeys.publicKey,
      now: new Date(caCert.notBefore.getTime() + 5 * 60_000),
      lifetimeMs: 10 * 60_000,
    });
    assert.ok(expired.notAfter < new Date());
    await Deno.writeTextFile(path.join(s.shm, "old.crt"), certificatesPem([expired]));
    await Deno.writeTextFile(path.join(s.shm, "old.key"), await privateKeyPem(oldKeys.privateKey));
    const old = await mutualTls(server, {
      ...client,
      cert: path.join(s.shm, "old.crt"),
      key: path.join(s.shm, "old.key"),
    });
    assert.ok(!old.ok, `an expired client certificate was accepted:\n${old.text}`);

    // Foreign: a valid-looking identity from another CA key.
    const foreignKeys = await generateKeyPair();
    const [foreignCa] = parseCertificatesPem(
      (await caEntry({
        keys: foreignKeys,
        role: "active",
        name: "workload ca 1",
        from: new Date(),
      }))
        .pem,
    );
    const fKeys = await generateKeyPair();
    const foreign = await issueLeaf({
      ca: { certificate: foreignCa, privateKey: foreignKeys.privateKey },
      identity: { profile: "fluent-bit", cluster: "test", nodeGroup: "workers", node: "i-0ab" },
      publicKey: fKeys.publicKey,
    });
    await Deno.writeTextFile(path.join(s.shm, "f.crt"), certificatesPem([foreign]));
    await Deno.writeTextFile(path.join(s.shm, "f.key"), await privateKeyPem(fKeys.privateKey));
    const bad = await mutualTls(server, {
      ...client,
      cert: path.join(s.shm, "f.crt"),
      key: path.join(s.shm, "f.key"),
    });
    assert.ok(!bad.ok, `a foreign client certificate was accepted:\n${bad.text}`);
  },
);

Deno.test("Fluent Bit identity: validated every pass; repaired, renewed and Fluent Bit restarted only on a swap", async () => {
  await using s = await setup();
  const t = s.telemetry();
  const now = Date.now();
  let status = await t.pass(new Date(now));
  assert.equal(s.restarts.length, 1);
  const serial = async () =>
    parseCertificatesPem(await Deno.readTextFile(path.join(s.client, TLS_FILES.cert)))[0]
      .serialNumber;
  const first = await serial();

  // Nothing wrong: no new generation, no restart.
  status = await t.pass(new Date(now + HOUR));
  assert.equal(status.client!.action, "valid");
  assert.equal(s.restarts.length, 1);

  // A broken layout (the key link removed): repaired by a new generation and a restart.
  await Deno.remove(path.join(s.client, TLS_FILES.key));
  status = await t.pass(new Date(now + HOUR));
  assert.match(status.client!.action, /renewed: layout repaired/);
  assert.equal(s.restarts.length, 2);

  // A key that no longer matches the certificate (written over): renewed.
  const data = path.join(s.client, "..data", TLS_FILES.key);
  await Deno.chmod(data, 0o644);
  await Deno.writeTextFile(data, await privateKeyPem((await generateKeyPair()).privateKey));
  status = await t.pass(new Date(now + HOUR));
  assert.match(status.client!.action, /does not certify the private key/);
  assert.equal(s.restarts.length, 3);

  // Half-life: renewed; a failed restart is retried on the next pass.
  s.failRestarts(true);
  status = await t.pass(new Date(now + 0.6 * LIFETIMES.leafMs));
  assert.match(status.client!.action, /half-life reached/);
  assert.ok(status.restartPending);
  assert.match(
    status.errors.join("\n"),
    /restarting Fluent Bit: Unit podmin-fluent-bit.service failed/,
  );
  assert.notEqual(await serial(), first);
  s.failRestarts(false);
  status = await t.pass(new Date(now + 0.6 * LIFETIMES.leafMs));
  assert.equal(status.client!.action, "valid");
  assert.ok(!status.restartPending);
  assert.equal(s.restarts.length, 4);

  // The client certificate is client-only and names the node.
  const [cert] = parseCertificatesPem(await Deno.readTextFile(path.join(s.client, TLS_FILES.cert)));
  assert.equal(cert.subject, "CN=fluent-bit i-0123456789abcdef0");
  assert.equal((await Deno.stat(path.join(s.shm, "telemetry"))).mode! & 0o777, 0o700);
});

Deno.test("OTel CA bundle [moto]: validated and swapped atomically; a corrupt, expired or missing bundle keeps the last good one", async () => {
  await using s = await setup();
  const m = await moto();
  const bucket = await m.createBucket();
  const external = openStore(`s3://${bucket}`);
  const t = s.telemetry({
    ca: undefined, // only the bundle
    otelCa: { store: external, key: "otel/ca.pem", refreshMs: 0 },
  });
  const bundleFile = path.join(s.shm, "telemetry", "otel-ca", TLS_FILES.ca);
  const caPem = async (name: string, from = new Date(Date.now() - HOUR), days = 30) =>
    (await caEntry({ keys: await generateKeyPair(), role: "active", name, from, days })).pem;

  let status = await t.pass();
  assert.match(status.errors.join("\n"), /does not exist/);
  assert.equal(s.restarts.length, 0);

  const v1 = await caPem("otel collector ca 1");
  await external.put("otel/ca.pem", new TextEncoder().encode(v1));
  status = await t.pass();
  assert.deepEqual(status.errors, []);
  assert.equal(await Deno.readTextFile(bundleFile), v1);
  assert.equal(s.restarts.length, 1);

  for (
    const [what, bytes, error] of [
      ["corrupt", "-----BEGIN CERTIFICATE-----\nnot base64\n", /OTel CA bundle|not PEM|parse/],
      ["expired", await caPem("old", new Date(Date.now() - 40 * 24 * HOUR), 1), /expired/],
      ["a private key", await privateKeyPem((await generateKeyPair()).privateKey), /PRIVATE KEY/],
    ] as const
  ) {
    await external.put("otel/ca.pem", new TextEncoder().encode(bytes));
    status = await t.pass();
    assert.match(status.errors.join("\n"), error, what);
    assert.equal(await Deno.readTextFile(bundleFile), v1, `${what}: last good kept`);
  }
  await external.delete("otel/ca.pem");
  status = await t.pass();
  assert.match(status.errors.join("\n"), /does not exist/);
  assert.equal(await Deno.readTextFile(bundleFile), v1);
  assert.equal(s.restarts.length, 1);

  const v2 = v1 + await caPem("otel collector ca 2");
  await external.put("otel/ca.pem", new TextEncoder().encode(v2));
  status = await t.pass();
  assert.deepEqual(status.errors, []);
  assert.equal(status.otelCa!.certificates, 2);
  assert.equal(await Deno.readTextFile(bundleFile), v2);
  assert.equal(s.restarts.length, 2);

  // The bucket unreachable: the last good bundle stays.
  const gone = s.telemetry({
    ca: undefined,
    otelCa: { store: openStore("s3://podmin-no-such-bucket"), key: "otel/ca.pem", refreshMs: 0 },
  });
  status = await gone.pass();
  assert.ok(status.errors.length > 0);
  assert.equal(await Deno.readTextFile(bundleFile), v2);
});

/**
 * Pod certificates end to end against real peers: openssl verifies what the agent issues and
 * completes mutual TLS between two Pods' identities; renewal, trust-bundle updates, outages and a
 * tampered CA state are driven with a controllable clock; the agent process leaves no private key
 * outside tmpfs.
 */

import { workerDeployment } from "../support/fixtures.ts";
import assert from "node:assert/strict";
import * as path from "node:path";
import { DeploymentsLoop } from "../../agent/deployments/deployments_loop.ts";
import { type CaKeySource, fileCaKey } from "../../agent/identity/ca_key.ts";
import { PodCertificates, TLS_FILES } from "../../agent/identity/pod_certificates.ts";
import { SecretsSync } from "../../agent/secrets/secrets_sync.ts";
import type { ValueProvider } from "../../agent/secrets/value_provider.ts";
import { applyResources } from "../../cli/desired_state.ts";
import {
  certificatesPem,
  generateKeyPair,
  issueLeaf,
  LIFETIMES,
  parseCertificatesPem,
  privateKeyPem,
} from "../../core/certificates.ts";
import { createFsBucket, FsStore } from "../../core/fs_store.ts";
import { silentLogger } from "../../core/log.ts";
import { type Deployment, parseResource, type Service } from "../../core/resources.ts";
import { agent } from "../support/programs.ts";
import { mutualTls, run } from "../support/openssl_tls.ts";
import { testWith } from "../support/requirements.ts";
import { caEntry, writeCaState } from "../support/workload_ca.ts";

/** The three files of a certificate generation directory. */
function tlsFiles(dir: string) {
  return {
    cert: path.join(dir, TLS_FILES.cert),
    key: path.join(dir, TLS_FILES.key),
    ca: path.join(dir, TLS_FILES.ca),
  };
}

const T0 = new Date("2026-12-01T00:00:00Z");
const HOUR = 3600_000;

function deployment(name: string, labels: Record<string, string> = {}): Deployment {
  return workerDeployment(name, { labels: { app: name, ...labels } });
}

const service = parseResource({
  apiVersion: "podmin.dev/v1",
  kind: "Service",
  metadata: { name: "web" },
  spec: { selector: { app: "web" }, ports: [{ port: 443, targetPort: 8443 }] },
}) as Service;

/** A node's directories: certificates and the key on tmpfs (/dev/shm), the rest on disk. */
async function node() {
  const disk = await Deno.makeTempDir({ prefix: "podmin-identity-" });
  const shm = await Deno.makeTempDir({ dir: "/dev/shm", prefix: "podmin-identity-" });
  await createFsBucket(path.join(disk, "bucket"));
  const store = new FsStore({ root: path.join(disk, "bucket") });
  const keys = await generateKeyPair();
  const keyFile = path.join(shm, "workload-ca-key.pem");
  await Deno.writeTextFile(keyFile, await privateKeyPem(keys.privateKey), { mode: 0o600 });
  return {
    disk,
    shm,
    store,
    keys,
    keyFile,
    tlsDir: path.join(shm, "tls"),
    async [Symbol.asyncDispose]() {
      await Deno.remove(disk, { recursive: true });
      await Deno.remove(shm, { recursive: true });
    },
  };
}

function certificates(n: { store: FsStore; tlsDir: string }, caKey: CaKeySource) {
  return new PodCertificates({
    cluster: "test",
    tlsDir: n.tlsDir,
    store: n.store,
    caKey,
    refreshMs: 0,
    log: silentLogger,
  });
}

function loopWith(
  n: { store: FsStore; disk: string; shm: string },
  identity: PodCertificates,
): DeploymentsLoop {
  const noValues: ValueProvider = { fetch: () => Promise.reject(new Error("no values here")) };
  return new DeploymentsLoop({
    store: n.store,
    nodeGroup: "workers",
    manifestDir: path.join(n.disk, "manifests"),
    secretsDir: path.join(n.shm, "secrets"),
    tlsDir: path.join(n.shm, "tls"),
    secrets: new SecretsSync({
      cluster: "test",
      secretsDir: path.join(n.shm, "secrets"),
      provider: noValues,
      refreshMs: 60_000,
      log: silentLogger,
    }),
    identity,
    log: silentLogger,
  });
}

testWith(
  "Pod certificates [openssl]: openssl verifies them; two Pods complete mutual TLS; a foreign CA is refused",
  { tools: ["openssl", "ss"] },
  async () => {
    await using n = await node();
    await writeCaState(n.store, [
      await caEntry({ keys: n.keys, role: "active", name: "podmin workload CA test 1", from: T0 }),
    ]);
    await applyResources({
      store: n.store,
      resources: [deployment("web"), deployment("api"), service],
    });
    const { status } = await loopWith(n, certificates(n, fileCaKey(n.keyFile))).pass();
    assert.ok(status.converged, JSON.stringify(status));
    assert.deepEqual(status.certificates?.map((c) => c.deployment), ["default/api", "default/web"]);

    const web = path.join(n.tlsDir, "default_web");
    const api = path.join(n.tlsDir, "default_api");
    const verify = await run("openssl", [
      "verify",
      "-CAfile",
      path.join(web, TLS_FILES.ca),
      path.join(web, TLS_FILES.cert),
    ]);
    assert.equal(verify.code, 0, verify.text);
    const san = await run("openssl", [
      "x509",
      "-noout",
      "-ext",
      "subjectAltName,extendedKeyUsage",
      "-in",
      path.join(web, TLS_FILES.cert),
    ]);
    assert.match(san.text, /URI:spiffe:\/\/test\.podmin\/ns\/default\/deployment\/web/);
    assert.match(san.text, /DNS:web\.default\.svc\.cluster\.local/);
    assert.match(san.text, /TLS Web Server Authentication, TLS Web Client Authentication/);
    // api is selected by no Service: its certificate names only its URI.
    const apiSan = await run("openssl", [
      "x509",
      "-noout",
      "-ext",
      "subjectAltName",
      "-in",
      path.join(api, TLS_FILES.cert),
    ]);
    assert.doesNotMatch(apiSan.text, /DNS:/);

    // The generation is mounted read-only: files 0444 in an immutable directory.
    assert.equal((await Deno.stat(path.join(web, TLS_FILES.key))).mode! & 0o777, 0o444);
    assert.equal((await Deno.stat(n.tlsDir)).mode! & 0o777, 0o700);

    const apiIdentity = {
      cert: path.join(api, TLS_FILES.cert),
      key: path.join(api, TLS_FILES.key),
      ca: path.join(api, TLS_FILES.ca),
    };
    const good = await mutualTls(tlsFiles(web), apiIdentity);
    assert.ok(good.ok, good.text);

    // The same identity signed by another CA key (same CA name): refused by the server.
    const foreignKeys = await generateKeyPair();
    const foreignEntry = await caEntry({
      keys: foreignKeys,
      role: "active",
      name: "podmin workload CA test 1",
      from: T0,
    });
    const [foreignCa] = parseCertificatesPem(foreignEntry.pem);
    const leafKeys = await generateKeyPair();
    const foreignLeaf = await issueLeaf({
      ca: { certificate: foreignCa, privateKey: foreignKeys.privateKey },
      identity: { profile: "pod", cluster: "test", namespace: "default", name: "api" },
      publicKey: leafKeys.publicKey,
    });
    await Deno.writeTextFile(path.join(n.shm, "foreign.crt"), certificatesPem([foreignLeaf]));
    await Deno.writeTextFile(
      path.join(n.shm, "foreign.key"),
      await privateKeyPem(leafKeys.privateKey),
    );
    const bad = await mutualTls(tlsFiles(web), {
      ...apiIdentity,
      cert: path.join(n.shm, "foreign.crt"),
      key: path.join(n.shm, "foreign.key"),
    });
    assert.ok(!bad.ok, `a foreign CA's certificate was accepted:\n${bad.text}`);
    assert.match(bad.text, /alert|error|unknown ca|certificate/i);
  },
);

Deno.test("Pod certificates: renewal at half-life, bundle updates without reissue, rotation keeps every leaf verifiable", async () => {
  await using n = await node();
  const active = await caEntry({ keys: n.keys, role: "active", name: "ca 1", from: T0 });
  await writeCaState(n.store, [active]);
  const certs = certificates(n, fileCaKey(n.keyFile));
  const web = [deployment("web")];
  const serialOf = async () =>
    parseCertificatesPem(
      await Deno.readTextFile(path.join(n.tlsDir, "default_web", TLS_FILES.cert)),
    )[0].serialNumber;
  const bundleOf = async () =>
    parseCertificatesPem(await Deno.readTextFile(path.join(n.tlsDir, "default_web", TLS_FILES.ca)));

  let r = await certs.sync(web, new Date(T0.getTime() + HOUR));
  assert.deepEqual(r.rotated, ["default/web"]);
  const first = await serialOf();
  const L = LIFETIMES.leafMs;
  // Before 45 % of the lifetime: nothing to do.
  r = await certs.sync(web, new Date(T0.getTime() + HOUR + 0.44 * L));
  assert.deepEqual(r.rotated, []);
  assert.equal(await serialOf(), first);
  // After 55 %: renewed.
  r = await certs.sync(web, new Date(T0.getTime() + HOUR + 0.56 * L));
  assert.deepEqual(r.rotated, ["default/web"]);
  const second = await serialOf();
  assert.notEqual(second, first);

  // A `next` certificate joins the bundle: ca.crt changes, the leaf does not.
  const next = await caEntry({ keys: n.keys, role: "next", name: "ca 2", from: T0 });
  await writeCaState(n.store, [active, next], 2);
  const t2 = new Date(T0.getTime() + 2 * L);
  r = await certs.sync(web, t2);
  assert.equal((await bundleOf()).length, 2);
  const leafBeforePromotion = await serialOf();
  assert.ok(r.ready.has("default/web"));

  // Promotion: the leaf is reissued by the new active certificate; the retired one stays trusted.
  await writeCaState(n.store, [{ ...next, role: "active" }, { ...active, role: "retired" }], 3);
  r = await certs.sync(web, new Date(t2.getTime() + HOUR));
  assert.deepEqual(r.rotated, ["default/web"]);
  assert.notEqual(await serialOf(), leafBeforePromotion);
  const leaf = parseCertificatesPem(
    await Deno.readTextFile(path.join(n.tlsDir, "default_web", TLS_FILES.cert)),
  )[0];
  assert.equal(leaf.issuer, "CN=ca 2");
  assert.deepEqual((await bundleOf()).map((c) => c.subject), ["CN=ca 2", "CN=ca 1"]);
});

Deno.test("Pod certificates: a Pod waits for its first certificate; an unreadable key keeps the current one serving until it expires", async () => {
  await using n = await node();
  await writeCaState(n.store, [
    await caEntry({ keys: n.keys, role: "active", name: "ca 1", from: T0 }),
  ]);
  await applyResources({ store: n.store, resources: [deployment("web")] });
  let keyDown = true;
  const real = fileCaKey(n.keyFile);
  const flaky: CaKeySource = {
    description: "Parameter Store /test/_system/workload-ca-key",
    load: () => keyDown ? Promise.reject(new Error("ThrottlingException")) : real.load(),
    forget: () => real.forget(),
  };
  const identity = certificates(n, flaky);
  const loop = loopWith(n, identity);
  const manifest = path.join(n.disk, "manifests", "podmin_default_web.json");

  let { status } = await loop.pass();
  assert.deepEqual(status.pending, [{
    deployment: "default/web",
    reason: "no valid workload certificate yet",
  }]);
  assert.match(status.errors.join("\n"), /cannot read the workload CA key.*ThrottlingException/);
  await assert.rejects(Deno.stat(manifest), Deno.errors.NotFound);

  keyDown = false;
  ({ status } = await loop.pass());
  assert.ok(status.converged, JSON.stringify(status));
  const written = await Deno.readTextFile(manifest);

  // The key becomes unreadable and renewal falls due: the certificate keeps serving.
  keyDown = true;
  const due = new Date(Date.now() + 0.6 * LIFETIMES.leafMs);
  let r = await identity.sync([deployment("web")], due);
  assert.ok(r.ready.has("default/web"));
  assert.match(r.errors.join("\n"), /renewal due \(half-life reached\) but not possible/);
  // Past its expiry it is no longer ready; the running Pod's manifest is left as it is.
  const expired = new Date(Date.now() + 1.1 * LIFETIMES.leafMs);
  r = await identity.sync([deployment("web")], expired);
  assert.ok(!r.ready.has("default/web"));
  assert.match(r.errors.join("\n"), /expired/);
  ({ status } = await loop.pass());
  assert.equal(await Deno.readTextFile(manifest), written);
});

Deno.test("Pod certificates: a CA state with a certificate not made for the key is refused; the last good one stays", async () => {
  await using n = await node();
  const good = await caEntry({ keys: n.keys, role: "active", name: "ca 1", from: T0 });
  await writeCaState(n.store, [good]);
  const certs = certificates(n, fileCaKey(n.keyFile));
  let r = await certs.sync([deployment("web")], new Date(T0.getTime() + HOUR));
  assert.ok(r.ready.has("default/web"));

  const intruder = await caEntry({
    keys: await generateKeyPair(),
    role: "retired",
    name: "evil",
    from: T0,
  });
  await writeCaState(n.store, [good, intruder], 2);
  r = await certs.sync([deployment("web")], new Date(T0.getTime() + 2 * HOUR));
  assert.match(r.errors.join("\n"), /not made for the workload CA key/);
  const bundle = parseCertificatesPem(
    await Deno.readTextFile(path.join(n.tlsDir, "default_web", TLS_FILES.ca)),
  );
  assert.deepEqual(bundle.map((c) => c.subject), ["CN=ca 1"]);
  assert.ok(r.ready.has("default/web"));
});

/** True when `bytes` hold a PEM private key or a DER PKCS#8 / SEC1 P-256 private key. */
function holdsPrivateKey(bytes: Uint8Array): boolean {
  const text = new TextDecoder("latin1").decode(bytes);
  if (/PRIVATE KEY-----/.test(text)) return true;
  const hex = Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
  // PKCS#8 prefix of a P-256 key, and SEC1 ECPrivateKey version 1 + 32-byte key.
  return hex.includes("020100301306072a8648ce3d020106082a8648ce3d030107") ||
    hex.includes("020101042");
}

async function* files(dir: string): AsyncGenerator<string> {
  for await (const e of Deno.readDir(dir)) {
    const p = path.join(dir, e.name);
    if (e.isDirectory) yield* files(p);
    else if (e.isFile) yield p;
  }
}

Deno.test("no private key outside tmpfs: the agent process writes keys only under its tmpfs directories", async () => {
  await using n = await node();
  await writeCaState(n.store, [
    await caEntry({ keys: n.keys, role: "active", name: "ca 1", from: T0 }),
  ]);
  await applyResources({ store: n.store, resources: [deployment("web"), service] });
  const out = await agent([
    "run",
    "--once",
    "--bucket",
    `file://${path.join(n.disk, "bucket")}`,
    "--cluster",
    "test",
    "--nodegroup",
    "workers",
    "--workload-ca-key",
    `file:${n.keyFile}`,
    "--manifest-dir",
    path.join(n.disk, "manifests"),
    "--state-dir",
    path.join(n.disk, "state"),
    "--secrets-dir",
    path.join(n.shm, "secrets"),
    "--tls-dir",
    n.tlsDir,
  ]);
  assert.equal(out.code, 0, out.stderr);
  // The certificate directory does hold a key (the scan can find one)...
  assert.ok(
    holdsPrivateKey(await Deno.readFile(path.join(n.tlsDir, "default_web", TLS_FILES.key))),
  );
  // ...and nothing on disk does: manifests, status, the bucket (CA state included).
  let scanned = 0;
  for await (const f of files(n.disk)) {
    scanned++;
    assert.ok(!holdsPrivateKey(await Deno.readFile(f)), `${f} holds a private key`);
  }
  assert.ok(scanned >= 5, `scanned only ${scanned} files`);
});

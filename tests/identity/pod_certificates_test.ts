/**
 * Pod certificates end to end against real peers: openssl verifies what the agent issues and
 * completes mutual TLS between two Pods' identities; renewal, trust-bundle updates, outages and a
 * tampered CA state are driven with a controllable clock; the agent process (traced by strace,
 * with HOME, TMPDIR and its working directory in the scanned tree) leaves no private key outside
 * tmpfs.
 */

import { workerDeployment } from "../support/fixtures.ts";
import assert from "node:assert/strict";
import * as path from "node:path";
import { DeploymentsPass } from "../../agent/deployments/deployments_pass.ts";
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
} from "../../core/crypto/certificates.ts";
import { createFsBucket, FsStore } from "../../core/store/fs_store.ts";
import { silentLogger } from "../../core/kit/log.ts";
import { type Deployment, parseResource, type Service } from "../../core/model/resources.ts";
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

const HOUR = 3600_000;
/**
 * When the test CAs start: an hour ago. The agent process and the deployments loop issue on the
 * real clock, so the CA must be valid now (a fixed date would stop working once its year ran
 * out); the renewal tests drive their own clock from here.
 */
const T0 = new Date(Date.now() - HOUR);

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
): DeploymentsPass {
  const noValues: ValueProvider = { fetch: () => Promise.reject(new Error("no values here")) };
  return new DeploymentsPass({
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

/** Where `needle` first occurs in `bytes` at or after `from`, or -1. */
function indexOfBytes(bytes: Uint8Array, needle: number[], from = 0): number {
  outer: for (let i = bytes.indexOf(needle[0], from); i >= 0; i = bytes.indexOf(needle[0], i + 1)) {
    if (i + needle.length > bytes.length) return -1;
    for (let j = 1; j < needle.length; j++) if (bytes[i + j] !== needle[j]) continue outer;
    return i;
  }
  return -1;
}

/** DER prefix of a PKCS#8 P-256 private key: version 0, algorithm id-ecPublicKey + prime256v1. */
const PKCS8_P256 = [
  0x02,
  0x01,
  0x00,
  0x30,
  0x13,
  0x06,
  0x07,
  0x2a,
  0x86,
  0x48,
  0xce,
  0x3d,
  0x02,
  0x01,
  0x06,
  0x08,
  0x2a,
  0x86,
  0x48,
  0xce,
  0x3d,
  0x03,
  0x01,
  0x07,
];
/** DER of a SEC1 ECPrivateKey's start: version 1, then a 32-byte OCTET STRING (the key). */
const SEC1_P256 = [0x02, 0x01, 0x01, 0x04, 0x20];

/** True when `bytes` hold a PEM private key or a DER PKCS#8 / SEC1 P-256 private key. */
function holdsPrivateKey(bytes: Uint8Array): boolean {
  if (indexOfBytes(bytes, [...new TextEncoder().encode("PRIVATE KEY-----")]) >= 0) return true;
  return indexOfBytes(bytes, PKCS8_P256) >= 0 || indexOfBytes(bytes, SEC1_P256) >= 0;
}

async function* files(dir: string): AsyncGenerator<string> {
  for await (const e of Deno.readDir(dir)) {
    const p = path.join(dir, e.name);
    if (e.isDirectory) yield* files(p);
    else if (e.isFile) yield p;
  }
}

/** Deno's cache directory (compiled modules): the runtime's writes, not the agent's. */
async function denoDir(): Promise<string> {
  const out = await new Deno.Command(Deno.execPath(), { args: ["info", "--json"], stdout: "piped" })
    .output();
  return JSON.parse(new TextDecoder().decode(out.stdout)).denoDir;
}

/**
 * The paths a traced process opened for writing, created, renamed to or linked to, from an
 * `strace -ff -y` log of one process (paths resolved against the working directory `cwd`).
 */
function writtenPaths(trace: string, cwd: string): Set<string> {
  const out = new Set<string>();
  const resolve = (dirFd: string | undefined, p: string) =>
    path.isAbsolute(p)
      ? p
      : path.join(dirFd && dirFd !== "AT_FDCWD" ? /<(.*)>/.exec(dirFd)?.[1] ?? cwd : cwd, p);
  for (const line of trace.split("\n")) {
    if (/= -1 /.test(line)) continue;
    let m = /\b(?:open|creat)\("((?:[^"\\]|\\.)*)", ([^,)]*)/.exec(line);
    if (m && (/O_WRONLY|O_RDWR|O_CREAT|O_TRUNC/.test(m[2]) || line.includes("creat("))) {
      out.add(resolve(undefined, m[1]));
      continue;
    }
    m = /\bopenat2?\(([^,]+), "((?:[^"\\]|\\.)*)", ([^,)]*)/.exec(line);
    if (m && /O_WRONLY|O_RDWR|O_CREAT|O_TRUNC/.test(m[3])) {
      out.add(resolve(m[1], m[2]));
      continue;
    }
    m = /\b(?:rename|link|symlink)\("(?:[^"\\]|\\.)*", "((?:[^"\\]|\\.)*)"/.exec(line);
    if (m) {
      out.add(resolve(undefined, m[1]));
      continue;
    }
    m = /\b(?:renameat2?|linkat)\([^,]+, "(?:[^"\\]|\\.)*", ([^,]+), "((?:[^"\\]|\\.)*)"/.exec(
      line,
    );
    if (m) out.add(resolve(m[1], m[2]));
  }
  return out;
}

testWith(
  "no private key outside tmpfs: every file the agent process writes, wherever HOME, TMPDIR and its working directory point, is on tmpfs or holds no key",
  { tools: ["strace"] },
  async () => {
    await using n = await node();
    await writeCaState(n.store, [
      await caEntry({ keys: n.keys, role: "active", name: "ca 1", from: T0 }),
    ]);
    await applyResources({ store: n.store, resources: [deployment("web"), service] });
    // Whatever the agent would write to its home, its temporary directory or its working
    // directory lands in the scanned tree; strace records every file it writes anywhere.
    const home = path.join(n.disk, "home");
    const tmp = path.join(n.disk, "tmp");
    const cwd = path.join(n.disk, "cwd");
    for (const d of [home, tmp, cwd]) await Deno.mkdir(d);
    // One log per process (-ff): no call is split across lines by another's.
    const traces = await Deno.makeTempDir({ dir: n.shm, prefix: "strace-" });
    const root = new URL("../../", import.meta.url).pathname;
    const cache = await denoDir();
    // The runtime's own writes: Deno's module cache and the npm packages' lock files.
    const runtime = [cache, path.join(root, "node_modules")];
    const out = await new Deno.Command("strace", {
      args: [
        "-ff",
        "-qq",
        "-y",
        "-s",
        "4096",
        "-e",
        "trace=open,openat,openat2,creat,rename,renameat,renameat2,link,linkat,symlink",
        "-o",
        path.join(traces, "trace"),
        Deno.execPath(),
        "run",
        "--allow-all",
        "--config",
        path.join(root, "deno.json"),
        path.join(root, "agent/main.ts"),
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
      ],
      cwd,
      env: { HOME: home, TMPDIR: tmp, DENO_DIR: cache }, // the cache: no recompiling
      stdin: "null",
      stdout: "piped",
      stderr: "piped",
    }).output();
    const stderr = new TextDecoder().decode(out.stderr);
    assert.equal(out.code, 0, stderr);
    // The certificate directory does hold a key (the scan can find one)...
    assert.ok(
      holdsPrivateKey(await Deno.readFile(path.join(n.tlsDir, "default_web", TLS_FILES.key))),
    );

    // ...every file written is on tmpfs, in the scanned tree or the runtime's caches...
    const written = new Set<string>();
    for await (const log of files(traces)) {
      for (const p of writtenPaths(await Deno.readTextFile(log), cwd)) written.add(p);
    }
    const inside = (p: string, dir: string) => p === dir || p.startsWith(`${dir}/`);
    const tmpfs = [...written].filter((p) => inside(p, n.shm));
    assert.ok(
      tmpfs.some((p) => inside(p, n.tlsDir)),
      `the trace shows the certificate writes: ${[...written].join(", ")}`,
    );
    const elsewhere = [...written].filter((p) =>
      !inside(p, n.shm) && !inside(p, n.disk) && !inside(p, "/dev") &&
      !runtime.some((r) => inside(p, r))
    );
    assert.deepEqual(elsewhere, [], "files written outside tmpfs and the scanned tree");

    // ...and none of those outside tmpfs holds a key: the scanned tree (manifests, status, the
    // bucket with its CA state, HOME, TMPDIR, the working directory) and the runtime's files.
    // Not the bucket's `infra/` objects: the CLI's (this test's applies write the index signing
    // key there, spec §8.2), a prefix the agent never reads or writes.
    const operators = path.join(n.disk, "bucket", "objects", "infra.d");
    let scanned = 0;
    for await (const f of files(n.disk)) {
      if (inside(f, operators)) continue;
      scanned++;
      assert.ok(!holdsPrivateKey(await Deno.readFile(f)), `${f} holds a private key`);
    }
    assert.ok(scanned >= 5, `scanned only ${scanned} files`);
    for (const f of written) {
      if (!runtime.some((r) => inside(f, r))) continue;
      const bytes = await Deno.readFile(f).catch(() => undefined); // a temporary file renamed
      assert.ok(!bytes || !holdsPrivateKey(bytes), `${f} holds a private key`);
    }
  },
);

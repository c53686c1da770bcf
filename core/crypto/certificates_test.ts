import assert from "node:assert/strict";
import {
  CertificateError,
  certificatesPem,
  createCaCertificate,
  generateKeyPair,
  identityUri,
  importPrivateKeyPem,
  issueLeaf,
  parseCertificatesPem,
  privateKeyPem,
  samePublicKey,
  sanValues,
  validateLeaf,
} from "./certificates.ts";

const HOUR = 3600_000;
const T0 = new Date("2026-12-01T00:00:00Z");

async function newCa(name = "podmin workload CA test 1") {
  const keys = await generateKeyPair();
  const certificate = await createCaCertificate({
    keys,
    commonName: name,
    notBefore: T0,
    notAfter: new Date(T0.getTime() + 1000 * HOUR),
  });
  return { keys, ca: { certificate, privateKey: keys.privateKey } };
}

const POD = { profile: "pod", cluster: "prod", namespace: "shop", name: "web" } as const;

Deno.test("a Pod leaf validates against its CA and names its SPIFFE URI and Service DNS names", async () => {
  const { ca } = await newCa();
  const leafKeys = await generateKeyPair();
  const now = new Date(T0.getTime() + HOUR);
  const leaf = await issueLeaf({
    ca,
    identity: { ...POD, dnsNames: ["web.shop.svc.cluster.local"] },
    publicKey: leafKeys.publicKey,
    now,
  });
  assert.deepEqual(sanValues(leaf, "url"), ["spiffe://prod.podmin/ns/shop/deployment/web"]);
  assert.deepEqual(sanValues(leaf, "dns"), ["web.shop.svc.cluster.local"]);
  assert.equal(leaf.notAfter.getTime() - now.getTime(), 24 * HOUR);
  assert.deepEqual(
    await validateLeaf({
      certificate: leaf,
      trust: [ca.certificate],
      profile: "pod",
      now,
      privateKey: leafKeys.privateKey,
      uri: identityUri(POD),
    }),
    [],
  );
});

Deno.test("validation names an expired leaf, a foreign CA, a wrong key and a wrong URI", async () => {
  const { ca } = await newCa();
  const { ca: foreign } = await newCa("podmin workload CA test 1"); // same name, other key
  const leafKeys = await generateKeyPair();
  const leaf = await issueLeaf({ ca, identity: POD, publicKey: leafKeys.publicKey, now: T0 });
  const later = new Date(T0.getTime() + 25 * HOUR);
  const problems = await validateLeaf({
    certificate: leaf,
    trust: [foreign.certificate],
    profile: "pod",
    now: later,
    privateKey: (await generateKeyPair()).privateKey,
    uri: "spiffe://prod.podmin/ns/shop/deployment/other",
  });
  assert.equal(problems.length, 4, problems.join("\n"));
  assert.match(problems[0], /expired/);
  assert.match(problems[1], /not a CA of the trust bundle/);
  assert.match(problems.join("\n"), /URI SAN/);
  assert.match(problems.join("\n"), /private key/);
});

Deno.test("a Fluent Bit identity is client-only; a Pod profile check refuses it", async () => {
  const { ca } = await newCa();
  const keys = await generateKeyPair();
  const identity = {
    profile: "fluent-bit",
    cluster: "prod",
    nodeGroup: "workers",
    node: "i-0abc",
  } as const;
  const leaf = await issueLeaf({ ca, identity, publicKey: keys.publicKey, now: T0 });
  assert.deepEqual(
    await validateLeaf({
      certificate: leaf,
      trust: [ca.certificate],
      profile: "fluent-bit",
      now: T0,
    }),
    [],
  );
  assert.deepEqual(
    await validateLeaf({ certificate: leaf, trust: [ca.certificate], profile: "pod", now: T0 }),
    ["EKU lacks serverAuth"],
  );
  assert.deepEqual(sanValues(leaf, "url"), ["spiffe://prod.podmin/telemetry/workers/i-0abc"]);
});

Deno.test("a leaf never outlives its CA certificate; an expired CA refuses to issue", async () => {
  const { ca } = await newCa();
  const keys = await generateKeyPair();
  const nearEnd = new Date(ca.certificate.notAfter.getTime() - HOUR);
  const leaf = await issueLeaf({ ca, identity: POD, publicKey: keys.publicKey, now: nearEnd });
  assert.equal(leaf.notAfter.getTime(), ca.certificate.notAfter.getTime());
  await assert.rejects(
    issueLeaf({
      ca,
      identity: POD,
      publicKey: keys.publicKey,
      now: new Date(nearEnd.getTime() + 2 * HOUR),
    }),
    CertificateError,
  );
});

Deno.test("PEM I/O: keys round-trip, bundles parse, garbage is refused with a reason", async () => {
  const { ca, keys } = await newCa();
  const imported = await importPrivateKeyPem(await privateKeyPem(keys.privateKey));
  assert.ok(await samePublicKey(imported.publicKey, keys.publicKey));
  const two = parseCertificatesPem(certificatesPem([ca.certificate, ca.certificate]));
  assert.equal(two.length, 2);
  await assert.rejects(importPrivateKeyPem("not a key"), /not a PKCS#8 PEM private key/);
  assert.throws(() => parseCertificatesPem(""), /no PEM certificate/);
  const keyPem = await privateKeyPem(keys.privateKey);
  assert.throws(
    () => parseCertificatesPem(certificatesPem([ca.certificate]) + keyPem),
    /block 2 is PRIVATE KEY/,
  );
  assert.throws(() => identityUri({ ...POD, namespace: "../x" }));
});

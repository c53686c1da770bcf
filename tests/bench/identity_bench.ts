/**
 * Benchmark of workload certificate issuance, printed figures:
 *
 * - Podmin: Pod certificates issued AND atomically written (key pair, leaf, PEM, a generation
 *   swapped in on tmpfs) per second by one agent's `PodCertificates`, for N Pods in one pass.
 * - Peer: `openssl req -x509 -newkey ec … -CA … -CAkey …`, one process per certificate (key pair and
 *   a leaf with the same extensions signed by the same CA key), writing key and certificate to the
 *   same tmpfs, in the same run.
 *
 * Goal (issue #13): ≥ 500 certificates/s and ≥ 1× openssl's process-per-certificate rate.
 * Run: deno task bench:identity [--pods N]
 */

import * as path from "node:path";
import { parseArgs } from "node:util";
import { fileCaKey } from "../../agent/identity/ca_key.ts";
import { PodCertificates } from "../../agent/identity/pod_certificates.ts";
import { generateKeyPair, privateKeyPem } from "../../core/crypto/certificates.ts";
import { createFsBucket, FsStore } from "../../core/store/fs_store.ts";
import { silentLogger } from "../../core/kit/log.ts";
import { type Deployment, parseResource } from "../../core/model/resources.ts";
import { caEntry, writeCaState } from "../support/workload_ca.ts";
import { benchSmoke, recordFigures } from "./bench_output.ts";

const { values } = parseArgs({
  args: Deno.args,
  options: {
    pods: { type: "string", default: benchSmoke() ? "20" : "500" },
    rounds: { type: "string", default: benchSmoke() ? "1" : "3" },
  },
});
const PODS = Number(values.pods);
const ROUNDS = Number(values.rounds);
const OPENSSL_CERTS = Math.min(PODS, 200);

function deployment(i: number): Deployment {
  return parseResource({
    apiVersion: "podmin.dev/v1",
    kind: "Deployment",
    metadata: { name: `app-${i}` },
    spec: {
      nodeGroup: "workers",
      template: { spec: { containers: [{ name: "main", image: `r/apps/app:${i}` }] } },
    },
  }) as Deployment;
}

const disk = await Deno.makeTempDir({ prefix: "podmin-bench-identity-" });
const shm = await Deno.makeTempDir({ dir: "/dev/shm", prefix: "podmin-bench-identity-" });
try {
  await createFsBucket(path.join(disk, "bucket"));
  const store = new FsStore({ root: path.join(disk, "bucket") });
  const keys = await generateKeyPair();
  const keyFile = path.join(shm, "ca.key");
  await Deno.writeTextFile(keyFile, await privateKeyPem(keys.privateKey));
  const entry = await caEntry({ keys, role: "active", name: "bench ca", from: new Date() });
  await writeCaState(store, [entry]);
  await Deno.writeTextFile(path.join(shm, "ca.crt"), entry.pem);
  const deployments = Array.from({ length: PODS }, (_, i) => deployment(i));

  const podminRates: number[] = [];
  const opensslRates: number[] = [];
  // Round 0 warms the JIT and the caches and is not counted.
  for (let round = 0; round <= ROUNDS; round++) {
    // Podmin: one pass over PODS new Pods (a fresh directory, so every Pod needs a certificate).
    const tlsDir = path.join(shm, `tls-${round}`);
    const certs = new PodCertificates({
      cluster: "bench",
      tlsDir,
      store,
      caKey: fileCaKey(keyFile),
      log: silentLogger,
    });
    await certs.sync(deployments.slice(0, 1)); // key, CA state and Service index loaded
    let t0 = performance.now();
    const r = await certs.sync(deployments);
    const podminS = (performance.now() - t0) / 1000;
    if (r.rotated.length !== PODS - 1 || r.errors.length) {
      throw new Error(`podmin issued ${r.rotated.length}: ${r.errors.join("; ")}`);
    }
    if (round > 0) podminRates.push(r.rotated.length / podminS);

    // openssl: one process per certificate, same profile, same CA key, same tmpfs.
    const caKeyPem = path.join(shm, "ca.key");
    const out = path.join(shm, `openssl-${round}`);
    await Deno.mkdir(out);
    t0 = performance.now();
    for (let i = 0; i < OPENSSL_CERTS; i++) {
      const o = await new Deno.Command("openssl", {
        args: [
          "req",
          "-x509",
          "-newkey",
          "ec",
          "-pkeyopt",
          "ec_paramgen_curve:P-256",
          "-nodes",
          "-keyout",
          path.join(out, `${i}.key`),
          "-CA",
          path.join(shm, "ca.crt"),
          "-CAkey",
          caKeyPem,
          "-subj",
          `/CN=default\\/app-${i}`,
          "-days",
          "1",
          "-addext",
          "basicConstraints=critical,CA:FALSE",
          "-addext",
          "keyUsage=critical,digitalSignature",
          "-addext",
          "extendedKeyUsage=serverAuth,clientAuth",
          "-addext",
          `subjectAltName=URI:spiffe://bench.podmin/ns/default/deployment/app-${i}`,
          "-out",
          path.join(out, `${i}.crt`),
        ],
        stdout: "null",
        stderr: "piped",
      }).output();
      if (o.code !== 0) throw new Error(new TextDecoder().decode(o.stderr));
    }
    if (round > 0) opensslRates.push(OPENSSL_CERTS / ((performance.now() - t0) / 1000));
    await Deno.remove(tlsDir, { recursive: true });
    await Deno.remove(out, { recursive: true });
  }
  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
  const podmin = median(podminRates);
  const openssl = median(opensslRates);
  const fmt = (xs: number[]) => xs.map((x) => x.toFixed(0)).join(", ");
  console.log(`identity bench: ${PODS} Pods per pass, ${ROUNDS} rounds (tmpfs ${shm})`);
  console.log(`  podmin issue+write   ${podmin.toFixed(0)} certs/s  (rounds: ${fmt(podminRates)})`);
  console.log(
    `  openssl per process  ${openssl.toFixed(0)} certs/s  (rounds: ${fmt(opensslRates)})`,
  );
  console.log(`  ratio podmin/openssl ${(podmin / openssl).toFixed(2)}×`);
  await recordFigures({ identity_certs_per_s: podmin, identity_openssl_certs_per_s: openssl });
  console.log(
    `  goal ≥ 500/s: ${podmin >= 500 ? "met" : "NOT met"}; goal ≥ 1× openssl: ${
      podmin >= openssl ? "met" : "NOT met"
    }`,
  );
} finally {
  await Deno.remove(disk, { recursive: true });
  await Deno.remove(shm, { recursive: true });
}

/**
 * Benchmark of the agent's registry against its peers, same bytes, same client (curl), systems
 * interleaved within each round, medians over rounds:
 *
 * - S3 store (moto): a 100 MiB blob GET through the agent's registry, vs a raw GET of the same
 *   object from moto, vs the CNCF distribution registry's S3 driver on the same moto (redirects
 *   off). Server CPU seconds per GiB served and server RSS after the GETs, both registries.
 * - Filesystem store: the same blob through the agent's registry on an FsStore, vs a raw read of
 *   the same bytes from a file (curl file://), vs distribution's filesystem driver.
 * - Manifest by tag (S3 store): p50/p99 of sequential GETs, agent's registry vs distribution.
 * - The runtime's floor on both stores (`deno_passthrough.ts`): a Deno server streaming the same
 *   object untouched, and the same with the registry's SHA-256 verification, with their CPU.
 *
 * Run: deno run -A tests/bench/registry_bench.ts (part of `deno task bench`); figures go to
 * `$PODMIN_BENCH_JSON` (see bench_output.ts); `$PODMIN_BENCH_SMOKE=1` uses 1 MiB and few rounds.
 */

import * as path from "node:path";
import { SignatureV4 } from "@smithy/signature-v4";
import { imageBlobKey, imageManifestKey, imageTagKey } from "../../core/bucket/bucket_layout.ts";
import { sha256Hex } from "../../core/kit/digest.ts";
import { createFsBucket, FsStore } from "../../core/store/fs_store.ts";
import type { ObjectStore } from "../../core/store/object_store.ts";
import { S3Store } from "../../core/store/s3_store.ts";
import { freePort, moto } from "../support/moto.ts";
import { SmithySha256 } from "../support/smithy_sha256.ts";
import {
  benchSmoke,
  median,
  percentile,
  processCpuSeconds,
  recordFigures,
} from "./bench_output.ts";
import { serve, type Server } from "./registry_process.ts";
import { shippedAgent } from "./shipped_agent.ts";

const SMOKE = benchSmoke();
const BLOB_BYTES = (SMOKE ? 1 : 100) * 1024 * 1024;
const ROUNDS = SMOKE ? 1 : 5;
const MANIFEST_GETS = SMOKE ? 20 : 300;
const REPO = "apps/bench";
const TAG = "1.0";
const MANIFEST_TYPE = "application/vnd.oci.image.manifest.v1+json";
const CREDS = { AWS_ACCESS_KEY_ID: "testing", AWS_SECRET_ACCESS_KEY: "testing" };
const enc = new TextEncoder();

/** A server process of the benchmark, with its CPU time and RSS from /proc. */

async function rssMiB(pid: number): Promise<number> {
  const status = await Deno.readTextFile(`/proc/${pid}/status`);
  return Number(/VmRSS:\s+(\d+)/.exec(status)![1]) / 1024;
}

/** The agent's registry as nodes run it (the bundle with the runtime settings). */
async function podminRegistry(
  agent: { argv: string[]; env: Record<string, string> },
  bucketUrl: string,
  env: Record<string, string>,
): Promise<Server> {
  const address = `127.0.0.1:${await freePort()}`;
  return await serve({
    cmd: agent.argv[0],
    args: [
      ...agent.argv.slice(1),
      "registry",
      "--bucket",
      bucketUrl,
      "--listen",
      address,
      // The proxied path (redirected pulls: pull_bench.ts).
      "--redirect-min-bytes",
      "off",
    ],
    env: { ...env, ...agent.env },
    base: `http://${address}`,
  });
}

/** The runtime's floor: a bare Deno server streaming `source` (`plain`) or verifying it. */
async function denoFloor(mode: "plain" | "verify", source: string, digest: string) {
  const port = await freePort();
  return await serve({
    cmd: Deno.execPath(),
    args: [
      "run",
      "-A",
      path.join(import.meta.dirname!, "deno_passthrough.ts"),
      String(port),
      mode,
      source,
      digest,
    ],
    base: `http://127.0.0.1:${port}`,
  });
}

async function distribution(dir: string, storage: string): Promise<Server> {
  const port = await freePort();
  await Deno.mkdir(dir, { recursive: true });
  await Deno.writeTextFile(
    `${dir}/config.yml`,
    `version: 0.1\nlog: {level: error}\nstorage:\n${storage}\nhttp: {addr: 127.0.0.1:${port}}\n`,
  );
  return await serve({
    cmd: "distribution-registry",
    args: ["serve", `${dir}/config.yml`],
    base: `http://127.0.0.1:${port}`,
  });
}

/** curl's download speed in MiB/s for one GET of `url` (http:// or file://). */
async function curlMiBs(url: string): Promise<number> {
  const out = await new Deno.Command("curl", {
    args: ["-sS", "--fail", "-o", "/dev/null", "-w", "%{size_download} %{speed_download}", url],
    stdout: "piped",
    stderr: "piped",
  }).output();
  if (!out.success) throw new Error(`curl ${url}: ${new TextDecoder().decode(out.stderr)}`);
  const [size, speed] = new TextDecoder().decode(out.stdout).split(" ").map(Number);
  if (size !== BLOB_BYTES) throw new Error(`curl ${url}: ${size} bytes, expected ${BLOB_BYTES}`);
  return speed / (1024 * 1024);
}

/** A presigned GET URL of an object on an S3 endpoint (the raw peer: no registry in between). */
async function presignedGet(endpoint: string, bucket: string, key: string): Promise<string> {
  const url = new URL(`${endpoint}/${bucket}/${key}`);
  const signer = new SignatureV4({
    credentials: { accessKeyId: "testing", secretAccessKey: "testing" },
    region: "us-east-1",
    service: "s3",
    sha256: SmithySha256,
  });
  const signed = await signer.presign({
    method: "GET",
    protocol: url.protocol,
    hostname: url.hostname,
    port: Number(url.port),
    path: url.pathname,
    headers: { host: url.host },
    query: {},
  }, { expiresIn: 3600 });
  const query = new URLSearchParams(signed.query as Record<string, string>);
  return `${url.origin}${url.pathname}?${query}`;
}

/** The test image: one config, one random layer of BLOB_BYTES, one manifest. */
async function makeImage(dir: string) {
  const layer = new Uint8Array(BLOB_BYTES);
  for (let off = 0; off < layer.length; off += 65536) {
    crypto.getRandomValues(layer.subarray(off, off + 65536));
  }
  const layerFile = path.join(dir, "layer.bin");
  await Deno.writeFile(layerFile, layer);
  const config = enc.encode(JSON.stringify({ architecture: "amd64", os: "linux", rootfs: {} }));
  const desc = (bytes: Uint8Array, mediaType: string) => ({
    mediaType,
    digest: `sha256:${sha256Hex(bytes)}`,
    size: bytes.byteLength,
  });
  const layerDesc = desc(layer, "application/vnd.oci.image.layer.v1.tar+gzip");
  const configDesc = desc(config, "application/vnd.oci.image.config.v1+json");
  const manifest = enc.encode(JSON.stringify({
    schemaVersion: 2,
    mediaType: MANIFEST_TYPE,
    config: configDesc,
    layers: [layerDesc],
  }));
  return { layer, layerFile, layerDesc, config, configDesc, manifest };
}
type Image = Awaited<ReturnType<typeof makeImage>>;

/** Writes the image into a Podmin bucket under the keys the registry reads. */
async function putPodmin(store: ObjectStore, image: Image): Promise<void> {
  const repo = { root: "apps" as const, name: "bench" };
  for (
    const [bytes, d] of [[image.layer, image.layerDesc], [image.config, image.configDesc]] as const
  ) {
    await store.putStream(imageBlobKey("apps", d.digest.slice(7)), new Blob([bytes]).stream());
  }
  const hex = sha256Hex(image.manifest);
  await store.put(imageManifestKey(repo, hex), image.manifest, { contentType: MANIFEST_TYPE });
  await store.put(imageTagKey(repo, TAG), image.manifest, { contentType: MANIFEST_TYPE });
}

/** Pushes the image to a distribution registry through its HTTP API. */
async function pushDistribution(base: string, image: Image): Promise<void> {
  for (
    const [bytes, d] of [[image.layer, image.layerDesc], [image.config, image.configDesc]] as const
  ) {
    const start = await fetch(`${base}/v2/${REPO}/blobs/uploads/`, { method: "POST" });
    await start.body?.cancel();
    if (start.status !== 202) throw new Error(`distribution upload start: ${start.status}`);
    const location = new URL(start.headers.get("location")!, base);
    location.searchParams.set("digest", d.digest);
    const put = await fetch(location, { method: "PUT", body: bytes });
    await put.body?.cancel();
    if (put.status !== 201) throw new Error(`distribution blob PUT: ${put.status}`);
  }
  const res = await fetch(`${base}/v2/${REPO}/manifests/${TAG}`, {
    method: "PUT",
    headers: { "Content-Type": MANIFEST_TYPE },
    body: image.manifest,
  });
  await res.body?.cancel();
  if (res.status !== 201) throw new Error(`distribution manifest PUT: ${res.status}`);
}

/** Blob GET rates (MiB/s, median of rounds, systems interleaved) and server CPU per GiB. */
async function blobRates(systems: Record<string, { url: string; server?: Server }>) {
  const names = Object.keys(systems);
  const rates: Record<string, number[]> = Object.fromEntries(names.map((n) => [n, []]));
  const cpu: Record<string, number> = Object.fromEntries(names.map((n) => [n, 0]));
  for (const n of names) await curlMiBs(systems[n].url); // warm-up, not counted
  for (let r = 0; r < ROUNDS; r++) {
    for (let i = 0; i < names.length; i++) {
      const n = names[(i + r) % names.length];
      const server = systems[n].server;
      const c0 = server ? await processCpuSeconds(server.pid) : 0;
      rates[n].push(await curlMiBs(systems[n].url));
      if (server) cpu[n] += (await processCpuSeconds(server.pid)) - c0;
    }
  }
  const gib = (ROUNDS * BLOB_BYTES) / 1024 ** 3;
  return {
    mibs: Object.fromEntries(names.map((n) => [n, median(rates[n])])),
    cpuPerGiB: Object.fromEntries(names.map((n) => [n, cpu[n] / gib])),
    all: rates,
  };
}

async function manifestLatency(bases: Record<string, string>) {
  const names = Object.keys(bases);
  const ms: Record<string, number[]> = Object.fromEntries(names.map((n) => [n, []]));
  for (let i = 0; i < MANIFEST_GETS + 10; i++) {
    for (const n of names) {
      const t0 = performance.now();
      const res = await fetch(`${bases[n]}/v2/${REPO}/manifests/${TAG}`, {
        headers: { Accept: MANIFEST_TYPE },
      });
      await res.arrayBuffer();
      if (!res.ok) throw new Error(`${n} manifest GET: ${res.status}`);
      if (i >= 10) ms[n].push(performance.now() - t0); // the first 10 warm up
    }
  }
  return Object.fromEntries(names.map((n) => {
    const s = ms[n].sort((a, b) => a - b);
    return [n, { p50: percentile(s, 50), p99: percentile(s, 99) }];
  }));
}

const tmp = await Deno.makeTempDir({ prefix: "podmin-bench-registry-" });
const agent = await shippedAgent(tmp);
const servers: Server[] = [];
const m = await moto();
try {
  const image = await makeImage(tmp);
  const blobPath = `/v2/${REPO}/blobs/${image.layerDesc.digest}`;
  const mb = (x: number) => x.toFixed(0);

  // --- S3 store on moto ----------------------------------------------------------
  const bucket = await m.createBucket();
  const s3Env = { ...CREDS, AWS_REGION: "us-east-1", AWS_ENDPOINT_URL: m.endpoint };
  for (const [k, v] of Object.entries(s3Env)) Deno.env.set(k, v);
  const s3 = new S3Store({ bucket, region: "us-east-1", endpoint: m.endpoint });
  await putPodmin(s3, image);
  const rawKey = imageBlobKey("apps", image.layerDesc.digest.slice(7));
  const podS3 = await podminRegistry(agent, `s3://${bucket}`, s3Env);
  servers.push(podS3);
  const distBucket = await m.createBucket();
  const distS3 = await distribution(
    path.join(tmp, "dist-s3"),
    `  s3: {region: us-east-1, regionendpoint: "${m.endpoint}", bucket: ${distBucket}, ` +
      `accesskey: testing, secretkey: testing, forcepathstyle: true, secure: false}\n` +
      `  redirect: {disable: true}`,
  );
  servers.push(distS3);
  await pushDistribution(distS3.base, image);
  console.log(`registry bench: ${mb(BLOB_BYTES / 1048576)} MiB blob, ${ROUNDS} rounds (curl)`);
  const rawUrl = await presignedGet(m.endpoint, bucket, rawKey);
  const floorS3 = await denoFloor("plain", rawUrl, image.layerDesc.digest);
  const floorS3Verify = await denoFloor("verify", rawUrl, image.layerDesc.digest);
  servers.push(floorS3, floorS3Verify);
  const s3Rates = await blobRates({
    podmin: { url: `${podS3.base}${blobPath}`, server: podS3 },
    raw: { url: rawUrl },
    distribution: { url: `${distS3.base}${blobPath}`, server: distS3 },
    "deno plain": { url: `${floorS3.base}/blob`, server: floorS3 },
    "deno verify": { url: `${floorS3Verify.base}/blob`, server: floorS3Verify },
  });
  const podRss = await rssMiB(podS3.pid);
  const distRss = await rssMiB(distS3.pid);
  const manifests = await manifestLatency({ podmin: podS3.base, distribution: distS3.base });

  // --- filesystem store ----------------------------------------------------------
  const fsRoot = path.join(tmp, "fs-bucket");
  await createFsBucket(fsRoot);
  await putPodmin(new FsStore({ root: fsRoot, durable: false }), image);
  const podFs = await podminRegistry(agent, `file://${fsRoot}`, s3Env);
  servers.push(podFs);
  const distFs = await distribution(
    path.join(tmp, "dist-fs"),
    `  filesystem: {rootdirectory: ${path.join(tmp, "dist-fs", "storage")}}`,
  );
  servers.push(distFs);
  await pushDistribution(distFs.base, image);
  const floorFs = await denoFloor("plain", image.layerFile, image.layerDesc.digest);
  const floorFsVerify = await denoFloor("verify", image.layerFile, image.layerDesc.digest);
  servers.push(floorFs, floorFsVerify);
  const fsRates = await blobRates({
    podmin: { url: `${podFs.base}${blobPath}`, server: podFs },
    raw: { url: `file://${image.layerFile}` },
    distribution: { url: `${distFs.base}${blobPath}`, server: distFs },
    "deno plain": { url: `${floorFs.base}/blob`, server: floorFs },
    "deno verify": { url: `${floorFsVerify.base}/blob`, server: floorFsVerify },
  });

  const figures = {
    registry_s3_blob_mibs: s3Rates.mibs.podmin,
    registry_s3_raw_mibs: s3Rates.mibs.raw,
    registry_s3_distribution_mibs: s3Rates.mibs.distribution,
    registry_s3_cpu_s_per_gib: s3Rates.cpuPerGiB.podmin,
    registry_s3_distribution_cpu_s_per_gib: s3Rates.cpuPerGiB.distribution,
    registry_s3_rss_mib: podRss,
    registry_s3_distribution_rss_mib: distRss,
    registry_fs_blob_mibs: fsRates.mibs.podmin,
    registry_fs_raw_mibs: fsRates.mibs.raw,
    registry_fs_distribution_mibs: fsRates.mibs.distribution,
    registry_fs_cpu_s_per_gib: fsRates.cpuPerGiB.podmin,
    registry_fs_distribution_cpu_s_per_gib: fsRates.cpuPerGiB.distribution,
    registry_manifest_p50_ms: manifests.podmin.p50,
    registry_manifest_p99_ms: manifests.podmin.p99,
    registry_manifest_distribution_p50_ms: manifests.distribution.p50,
    registry_manifest_distribution_p99_ms: manifests.distribution.p99,
    registry_s3_deno_plain_mibs: s3Rates.mibs["deno plain"],
    registry_s3_deno_verify_mibs: s3Rates.mibs["deno verify"],
    registry_s3_deno_verify_cpu_s_per_gib: s3Rates.cpuPerGiB["deno verify"],
    registry_fs_deno_plain_mibs: fsRates.mibs["deno plain"],
    registry_fs_deno_verify_mibs: fsRates.mibs["deno verify"],
  };
  const list = (xs: number[]) => xs.map((x) => x.toFixed(0)).join(", ");
  for (const [store, r] of [["S3 (moto)", s3Rates], ["filesystem", fsRates]] as const) {
    console.log(`  ${store} blob GET MiB/s (median; rounds):`);
    for (const n of Object.keys(r.all)) {
      const cpu = n === "raw" ? "" : `, server CPU ${r.cpuPerGiB[n].toFixed(2)} s/GiB`;
      console.log(`    ${n.padEnd(13)} ${mb(r.mibs[n]).padStart(6)} (${list(r.all[n])})${cpu}`);
    }
  }
  console.log(
    `  server RSS after the S3 GETs: podmin ${mb(podRss)} MiB, distribution ${mb(distRss)} MiB`,
  );
  console.log(
    `  manifest by tag (S3), ${MANIFEST_GETS} GETs: podmin p50 ${
      manifests.podmin.p50.toFixed(1)
    } ms ` +
      `p99 ${manifests.podmin.p99.toFixed(1)} ms; distribution p50 ${
        manifests.distribution.p50.toFixed(1)
      } ms p99 ${manifests.distribution.p99.toFixed(1)} ms`,
  );
  await recordFigures(figures);
} finally {
  for (const s of servers) await s.stop().catch(() => {});
  await m.stop().catch(() => {});
  await Deno.remove(tmp, { recursive: true }).catch(() => {});
}
Deno.exit();

/**
 * End-to-end pull benchmark (issue 35): containerd 2.1.5 pulling a 200 MiB image over CRI
 * (`crictl pull`, registries from hosts.toml: what kubelet makes it do, unpacking included) from
 *
 * - the agent's registry (the shipped bundle) on an S3 bucket, redirect on (the layer is a 307 to
 *   a presigned URL) and off (proxied and verified by the registry);
 * - the CNCF distribution registry's S3 driver on the same S3 server, its redirect on (its
 *   default) and off (`storage.redirect.disable`);
 * - the agent's registry on a filesystem bucket, and distribution's filesystem driver;
 *
 * against a raw presigned GET of the same layer bytes (curl, to /dev/null). The S3 server is
 * versitygw on tmpfs: moto holds objects in Python memory and serves a 200 MiB object several
 * times slower than the registries read it. Systems interleaved within each round (the order
 * rotates), medians over rounds; each pull starts from an empty content store. Pull time, and the
 * registry process's CPU seconds per GiB pulled (from /proc schedstat, same pulls).
 *
 * Run: deno run -A tests/bench/pull_bench.ts (root; part of `deno task bench`); figures go to
 * `$PODMIN_BENCH_JSON`; `$PODMIN_BENCH_SMOKE=1` uses a 1 MiB layer and one round.
 */

import * as path from "node:path";
import { imageBlobKey, imageManifestKey, imageTagKey } from "../../core/bucket/bucket_layout.ts";
import { sha256Hex } from "../../core/kit/digest.ts";
import { createFsBucket, FsStore } from "../../core/store/fs_store.ts";
import type { ObjectStore } from "../../core/store/object_store.ts";
import { startCriContainerd } from "../support/cri_containerd.ts";
import { freePort } from "../support/moto.ts";
import { tarOf } from "../support/oci_image.ts";
import { startVersitygw, VERSITYGW_CREDENTIALS } from "../support/versitygw.ts";
import { benchSmoke, median, processCpuSeconds, recordFigures } from "./bench_output.ts";
import { serve, type Server } from "./registry_process.ts";
import { shippedAgent } from "./shipped_agent.ts";

const SMOKE = benchSmoke();
const LAYER_FILE_BYTES = (SMOKE ? 1 : 200) * 1024 * 1024;
const ROUNDS = SMOKE ? 1 : 5;
const REPO = "apps/bench";
const TAG = "1.0";
const MANIFEST_TYPE = "application/vnd.oci.image.manifest.v1+json";
/** An uncompressed layer: unpacking costs a copy, not a gunzip, so the fetch dominates. */
const LAYER_TYPE = "application/vnd.oci.image.layer.v1.tar";
const enc = new TextEncoder();

/** A registry process of the benchmark. */

/** The test image: a config, one uncompressed layer holding one random file, a manifest. */
function makeImage() {
  const file = new Uint8Array(LAYER_FILE_BYTES);
  for (let off = 0; off < file.length; off += 65536) {
    crypto.getRandomValues(file.subarray(off, Math.min(file.length, off + 65536)));
  }
  const layer = tarOf({ data: file });
  const layerDigest = `sha256:${sha256Hex(layer)}`;
  const config = enc.encode(JSON.stringify({
    architecture: "amd64",
    os: "linux",
    config: { Cmd: ["/data"] },
    rootfs: { type: "layers", diff_ids: [layerDigest] },
  }));
  const desc = (bytes: Uint8Array, mediaType: string) => ({
    mediaType,
    digest: `sha256:${sha256Hex(bytes)}`,
    size: bytes.byteLength,
  });
  const layerDesc = desc(layer, LAYER_TYPE);
  const configDesc = desc(config, "application/vnd.oci.image.config.v1+json");
  const manifest = enc.encode(JSON.stringify({
    schemaVersion: 2,
    mediaType: MANIFEST_TYPE,
    config: configDesc,
    layers: [layerDesc],
  }));
  return { layer, layerDesc, config, configDesc, manifest };
}
type Image = ReturnType<typeof makeImage>;

/** Writes the image into a Podmin bucket under the keys the registry reads. */
async function putPodmin(store: ObjectStore, image: Image): Promise<void> {
  const repo = { root: "apps" as const, name: "bench" };
  for (
    const [bytes, d] of [[image.layer, image.layerDesc], [image.config, image.configDesc]] as const
  ) {
    await store.putStream(
      imageBlobKey("apps", d.digest.slice(7)),
      new Blob([bytes as Uint8Array<ArrayBuffer>]).stream(),
    );
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
    const put = await fetch(location, { method: "PUT", body: bytes as Uint8Array<ArrayBuffer> });
    await put.body?.cancel();
    if (put.status !== 201) throw new Error(`distribution blob PUT: ${put.status}`);
  }
  const res = await fetch(`${base}/v2/${REPO}/manifests/${TAG}`, {
    method: "PUT",
    headers: { "Content-Type": MANIFEST_TYPE },
    body: image.manifest as Uint8Array<ArrayBuffer>,
  });
  await res.body?.cancel();
  if (res.status !== 201) throw new Error(`distribution manifest PUT: ${res.status}`);
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

/** One GET of the presigned URL with curl, bytes checked; its wall time in seconds. */
async function rawGet(url: URL, bytes: number): Promise<number> {
  const t0 = performance.now();
  const out = await new Deno.Command("curl", {
    args: ["-sS", "--fail", "-o", "/dev/null", "-w", "%{size_download}", url.href],
    stdout: "piped",
    stderr: "piped",
  }).output();
  const s = (performance.now() - t0) / 1000;
  if (!out.success) {
    throw new Error(`curl of the presigned URL: ${new TextDecoder().decode(out.stderr)}`);
  }
  const size = Number(new TextDecoder().decode(out.stdout));
  if (size !== bytes) throw new Error(`raw GET: ${size} bytes, expected ${bytes}`);
  return s;
}

const tmp = await Deno.makeTempDir({ prefix: "podmin-bench-pull-" });
const servers: Server[] = [];
const gw = await startVersitygw();
let containerd: Awaited<ReturnType<typeof startCriContainerd>> | undefined;
try {
  const agent = await shippedAgent(tmp);
  const image = makeImage();
  const layerKey = imageBlobKey("apps", image.layerDesc.digest.slice(7));
  const gib = image.layer.byteLength / 1024 ** 3;

  // --- stores and registries --------------------------------------------------------
  const bucket = await gw.createBucket();
  const s3 = gw.store(bucket);
  await putPodmin(s3, image);
  const fsRoot = path.join(tmp, "fs-bucket");
  await createFsBucket(fsRoot);
  await putPodmin(new FsStore({ root: fsRoot, durable: false }), image);
  const s3Env = {
    AWS_ACCESS_KEY_ID: VERSITYGW_CREDENTIALS.accessKeyId,
    AWS_SECRET_ACCESS_KEY: VERSITYGW_CREDENTIALS.secretAccessKey,
    AWS_REGION: "us-east-1",
    AWS_ENDPOINT_URL: gw.endpoint,
  };
  const podmin = async (bucketUrl: string, redirect: string) => {
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
        "--redirect-min-bytes",
        redirect,
      ],
      env: { ...s3Env, ...agent.env },
      base: `http://${address}`,
    });
  };
  const distBucket = await gw.createBucket();
  const distS3 = (redirect: boolean, dir: string) =>
    distribution(
      path.join(tmp, dir),
      `  s3: {region: us-east-1, regionendpoint: "${gw.endpoint}", bucket: ${distBucket}, ` +
        `accesskey: ${VERSITYGW_CREDENTIALS.accessKeyId}, ` +
        `secretkey: ${VERSITYGW_CREDENTIALS.secretAccessKey}, forcepathstyle: true, secure: false}` +
        (redirect ? "" : `\n  redirect: {disable: true}`),
    );
  const systems: Record<string, Server> = {
    "podmin redirect": await podmin(`s3://${bucket}`, "1MiB"),
    "podmin proxied": await podmin(`s3://${bucket}`, "off"),
    "podmin fs": await podmin(`file://${fsRoot}`, "1MiB"),
    "distribution redirect": await distS3(true, "dist-s3-redirect"),
    "distribution proxied": await distS3(false, "dist-s3-proxied"),
    "distribution fs": await distribution(
      path.join(tmp, "dist-fs"),
      `  filesystem: {rootdirectory: ${path.join(tmp, "dist-fs", "storage")}}`,
    ),
  };
  servers.push(...Object.values(systems));
  await pushDistribution(systems["distribution proxied"].base, image);
  await pushDistribution(systems["distribution fs"].base, image);

  containerd = await startCriContainerd(path.join(tmp, "containerd"));
  const hostOf = (n: string) => `${n.replace(/ /g, "-")}.bench.internal`;
  for (const [n, s] of Object.entries(systems)) await containerd.route(hostOf(n), s.base);
  const rawUrl = await s3.presignGet(layerKey, { expiresSeconds: 3600 });

  const names = [...Object.keys(systems), "raw"];
  const seconds: Record<string, number[]> = Object.fromEntries(names.map((n) => [n, []]));
  const cpu: Record<string, number> = Object.fromEntries(names.map((n) => [n, 0]));
  const pullOnce = async (n: string) => {
    if (n === "raw") return await rawGet(rawUrl, image.layer.byteLength);
    const ref = `${hostOf(n)}/${REPO}:${TAG}`;
    const t0 = performance.now();
    await containerd!.pull(ref);
    const s = (performance.now() - t0) / 1000;
    await containerd!.remove(ref);
    return s;
  };
  console.log(
    `pull bench: ${(image.layer.byteLength / 1048576).toFixed(0)} MiB layer, ${ROUNDS} rounds, ` +
      `containerd over CRI; S3 on versitygw (tmpfs)`,
  );
  for (const n of names) await pullOnce(n); // warm-up, not counted
  for (let r = 0; r < ROUNDS; r++) {
    for (let i = 0; i < names.length; i++) {
      const n = names[(i + r) % names.length];
      const pid = systems[n]?.pid;
      const c0 = pid ? await processCpuSeconds(pid) : 0;
      seconds[n].push(await pullOnce(n));
      if (pid) cpu[n] += (await processCpuSeconds(pid)) - c0;
    }
  }
  const med = Object.fromEntries(names.map((n) => [n, median(seconds[n])]));
  const cpuPerGiB = Object.fromEntries(names.map((n) => [n, cpu[n] / (ROUNDS * gib)]));
  for (const n of names) {
    const list = seconds[n].map((x) => x.toFixed(2)).join(", ");
    const c = n === "raw" ? "" : `, registry CPU ${cpuPerGiB[n].toFixed(3)} s/GiB`;
    console.log(`  ${n.padEnd(22)} ${med[n].toFixed(2)} s (${list})${c}`);
  }
  await recordFigures({
    pull_redirect_s: med["podmin redirect"],
    pull_proxied_s: med["podmin proxied"],
    pull_fs_s: med["podmin fs"],
    pull_distribution_redirect_s: med["distribution redirect"],
    pull_distribution_proxied_s: med["distribution proxied"],
    pull_distribution_fs_s: med["distribution fs"],
    pull_raw_s: med.raw,
    pull_registry_cpu_s_per_gib: cpuPerGiB["podmin redirect"],
    pull_registry_proxied_cpu_s_per_gib: cpuPerGiB["podmin proxied"],
    pull_distribution_redirect_cpu_s_per_gib: cpuPerGiB["distribution redirect"],
    pull_distribution_proxied_cpu_s_per_gib: cpuPerGiB["distribution proxied"],
  });
} finally {
  await containerd?.stop().catch(() => {});
  for (const s of servers) await s.stop().catch(() => {});
  await gw.stop().catch(() => {});
  await Deno.remove(tmp, { recursive: true }).catch(() => {});
}
Deno.exit();

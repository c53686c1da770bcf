/**
 * The runtime-plus-bundle distribution's runtime: the default catalogue's `deno` pins, fetched
 * from the npm registry through the same cache setup uses (archive integrity, then the extracted
 * binary's sha256). The amd64 runtime runs the stamped agent bundle here; the arm64 one is
 * checked by digest and ELF header. The failure paths run against a local download site.
 */

import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { gzipSync } from "node:zlib";
import { DEFAULT_CATALOG } from "../../cli/setup/default_catalog.ts";
import { DependencyCache } from "../../cli/setup/dependency_cache.ts";
import { DigestMismatchError } from "../../core/kit/errors.ts";
import { buildTar } from "../../vmconfig/archive.ts";
import { serveFiles } from "../support/file_server.ts";

const root = new URL("../../", import.meta.url).pathname;
/** Kept between runs: the two runtimes are ~40 MB downloads each. */
const cacheDir = `${Deno.env.get("HOME")}/.cache/podmin-test/runtime`;

function pin(arch: "amd64" | "arm64") {
  const e = DEFAULT_CATALOG.dependencies.find((d) => d.name === "deno" && d.arch === arch)!;
  assert.ok(e?.archive, `deno ${arch} is pinned with its archive`);
  return e as typeof e & { archive: { integrity: string; member: string } };
}

async function fetchRuntime(arch: "amd64" | "arm64") {
  const e = pin(arch);
  const cache = new DependencyCache({ dir: cacheDir });
  return await cache.ensureMember({
    sha256: e.sha256,
    url: e.url,
    integrity: e.archive.integrity,
    member: e.archive.member,
    label: `deno ${arch}`,
  });
}

async function elfMachine(file: string): Promise<number> {
  const f = await Deno.open(file);
  const head = new Uint8Array(20);
  await f.read(head);
  f.close();
  assert.deepEqual([...head.subarray(0, 4)], [0x7f, 0x45, 0x4c, 0x46], `${file} is ELF`);
  return new DataView(head.buffer).getUint16(18, true);
}

function sha256File(bytes: Uint8Array): string {
  return createHash("sha256").update(bytes).digest("hex");
}

Deno.test("runtime distribution: the pinned amd64 Deno from npm runs the stamped agent bundle", async () => {
  const got = await fetchRuntime("amd64");
  assert.equal(sha256File(await Deno.readFile(got.path)), pin("amd64").sha256);
  assert.equal(await elfMachine(got.path), 62);
  const tmp = await Deno.makeTempDir({ prefix: "podmin-rt-" });
  try {
    const built = await new Deno.Command("bash", {
      args: [`${root}cli/build.sh`, "bundle"],
      env: { PODMIN_DIST: tmp },
      stdout: "null",
      stderr: "piped",
    }).output();
    assert.ok(built.success, new TextDecoder().decode(built.stderr));
    await Deno.chmod(got.path, 0o755);
    const out = await new Deno.Command(got.path, {
      args: ["run", "--allow-all", "--no-config", `${tmp}/podmin-agent.js`, "--version"],
      cwd: tmp,
      env: { DENO_DIR: `${tmp}/deno`, DENO_NO_UPDATE_CHECK: "1" },
      stdout: "piped",
      stderr: "piped",
    }).output();
    assert.equal(out.code, 0, new TextDecoder().decode(out.stderr));
    assert.match(
      new TextDecoder().decode(out.stdout),
      /^podmin-agent 0\.1\.0 \(commit [0-9a-f]{12}(-dirty)?, deno 2\.9\.6, linux\/x86_64\)\n$/,
    );
  } finally {
    await Deno.remove(tmp, { recursive: true });
  }
});

Deno.test("runtime distribution: the pinned arm64 Deno from npm matches its digest and is AArch64 ELF", async () => {
  const got = await fetchRuntime("arm64");
  assert.equal(sha256File(await Deno.readFile(got.path)), pin("arm64").sha256);
  assert.equal(await elfMachine(got.path), 183);
});

Deno.test("runtime distribution: a wrong archive integrity or member digest caches nothing", async () => {
  const member = new TextEncoder().encode("#!/bin/sh\necho runtime\n");
  const archive = new Uint8Array(gzipSync(buildTar([["package/deno", 0o755, member]])));
  const integrity = `sha512-${createHash("sha512").update(archive).digest("base64")}`;
  const site = serveFiles(new Map([["rt.tgz", archive]]));
  const dir = await Deno.makeTempDir({ prefix: "podmin-rt-bad-" });
  try {
    const cache = new DependencyCache({ dir });
    const base = { url: site.url("rt.tgz"), member: "package/deno", label: "deno test" };
    const otherIntegrity = `sha512-${createHash("sha512").update("other").digest("base64")}`;
    await assert.rejects(
      cache.ensureMember({ ...base, sha256: sha256File(member), integrity: otherIntegrity }),
      (e) => e instanceof DigestMismatchError && /has integrity sha512-/.test(e.message),
    );
    await assert.rejects(
      cache.ensureMember({ ...base, sha256: "0".repeat(64), integrity }),
      (e) => e instanceof DigestMismatchError && /package\/deno of .* has sha256/.test(e.message),
    );
    await assert.rejects(
      cache.ensureMember({ ...base, member: "package/absent", sha256: "0".repeat(64), integrity }),
      (e) => e instanceof DigestMismatchError && /lacks package\/absent/.test(e.message),
    );
    assert.deepEqual([...Deno.readDirSync(`${dir}/sha256`)], [], "nothing cached, no leftovers");
    const ok = await cache.ensureMember({ ...base, sha256: sha256File(member), integrity });
    assert.equal(ok.outcome, "downloaded");
    assert.deepEqual(await Deno.readFile(ok.path), member);
    const again = await cache.ensureMember({ ...base, sha256: sha256File(member), integrity });
    assert.equal(again.outcome, "reused");
    assert.equal(site.hits.get("rt.tgz"), 4, "the cached member is reused without a download");
  } finally {
    await site.close();
    await Deno.remove(dir, { recursive: true });
  }
});

/**
 * Choosing a published release by version (`--kubernetes-version`, `--crictl-version`,
 * `--containerd-version`): setup reads each digest from the vendor's checksum file beside the
 * download, on a local site laid out like dl.k8s.io and GitHub releases (the mirror layout of
 * $PODMIN_RELEASE_MIRROR), verifies the download against it and records it in the dependency
 * manifest on S3 (moto); a later setup reuses the recorded digest without asking the vendor. A
 * checksum that is missing, malformed or disagrees with the download fails setup with the URLs
 * and both values, and nothing is published.
 */

import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import * as path from "node:path";
import { DependencyCache } from "../../cli/setup/dependency_cache.ts";
import {
  planDependencies,
  publishDependencies,
  wantedDependencies,
} from "../../cli/setup/dependency_sync.ts";
import { VendorChecksumError } from "../../cli/setup/vendor_checksum.ts";
import {
  parseReleaseMirror,
  releaseUrl,
  type ReleaseVersions,
  type VersionedProgram,
  withReleaseVersions,
} from "../../cli/setup/vendor_releases.ts";
import { DEPENDENCY_MANIFEST } from "../../core/bucket/bucket_layout.ts";
import {
  type Architecture,
  parseDependencyManifest,
} from "../../core/bucket/dependency_manifest.ts";
import { DigestMismatchError } from "../../core/kit/errors.ts";
import { getIfExists, type ObjectStore } from "../../core/store/object_store.ts";
import { S3Store } from "../../core/store/s3_store.ts";
import { type FileServer, serveFiles } from "../support/file_server.ts";
import { moto } from "../support/moto.ts";
import { podmin } from "../support/programs.ts";

const sha = (b: Uint8Array) => createHash("sha256").update(b).digest("hex");
const text = (s: string) => new TextEncoder().encode(s);
const ARCHES: Architecture[] = ["amd64", "arm64"];

/** A vendor site: each release file and its checksum file, at the mirror paths. */
class VendorSite {
  readonly files = new Map<string, Uint8Array>();
  readonly server: FileServer = serveFiles(this.files);
  readonly mirror = parseReleaseMirror(this.server.url(""))!;

  /** The site-relative name of a URL under the mirror. */
  name(url: string): string {
    return decodeURIComponent(url.slice(this.mirror.length + 1));
  }

  /**
   * Publishes `program` at `version` for both architectures with random bytes; the checksum
   * file holds what `checksum(hex, file)` returns (the vendor's format by default).
   */
  publish(
    program: VersionedProgram,
    version: string,
    checksum?: (hex: string, file: string) => string,
  ): Record<Architecture, { url: string; sha256Url: string; sha256: string }> {
    const out = {} as Record<Architecture, { url: string; sha256Url: string; sha256: string }>;
    for (const arch of ARCHES) {
      const { url, sha256Url } = releaseUrl({ program, version, arch, mirror: this.mirror });
      const bytes = crypto.getRandomValues(new Uint8Array(50_000));
      const file = url.slice(url.lastIndexOf("/") + 1);
      // dl.k8s.io publishes a bare digest, the GitHub releases `HEX  FILENAME`.
      const vendor = program === "kubelet" ? sha(bytes) : `${sha(bytes)}  ${file}\n`;
      this.files.set(this.name(url), bytes);
      this.files.set(this.name(sha256Url), text(checksum ? checksum(sha(bytes), file) : vendor));
      out[arch] = { url, sha256Url, sha256: sha(bytes) };
    }
    return out;
  }

  /** GETs so far of a URL. */
  hits(url: string): number {
    return this.server.hits.get(this.name(url)) ?? 0;
  }
}

/** One setup's dependency step: the catalogue with `versions`, planned and published. */
async function setupDependencies(
  o: { store: ObjectStore; site: VendorSite; versions: ReleaseVersions; cacheDir: string },
) {
  const catalog = withReleaseVersions({ dependencies: [] }, {
    versions: o.versions,
    mirror: o.site.mirror,
  });
  const local = ARCHES.map((arch) => ({
    name: "vmconfig",
    version: "0.1.0",
    arch,
    bytes: text(`vmconfig ${arch}`),
  }));
  const wanted = wantedDependencies({ catalog, local, architectures: ARCHES });
  const lines: string[] = [];
  const log = (l: string) => lines.push(l);
  const plan = await planDependencies(o.store, wanted, { log });
  const cache = new DependencyCache({ dir: o.cacheDir });
  return { lines, result: await publishDependencies({ store: o.store, cache, plan, local }) };
}

async function withCluster(
  fn: (o: { store: S3Store; site: VendorSite; tmp: string }) => Promise<void>,
): Promise<void> {
  const m = await moto();
  await m.reset();
  const store = new S3Store({ bucket: await m.createBucket(), region: "us-east-1" });
  const tmp = await Deno.makeTempDir({ prefix: "podmin-versions-" });
  const site = new VendorSite();
  try {
    await fn({ store, site, tmp });
  } finally {
    await site.server.close();
    await Deno.remove(tmp, { recursive: true });
  }
}

Deno.test("setup versions [moto]: digests come from the vendor's checksum files, are recorded in the manifest and reused by the next setup", async () => {
  await withCluster(async ({ store, site, tmp }) => {
    const kubelet = site.publish("kubelet", "1.37.2");
    const crictl = site.publish("crictl", "1.35.0");
    const containerd = site.publish("containerd", "2.2.1");
    const versions = { kubelet: "1.37.2", crictl: "1.35.0", containerd: "2.2.1" };
    const first = await setupDependencies({
      store,
      site,
      versions,
      cacheDir: path.join(tmp, "cache-1"),
    });
    assert.ok(first.result.manifestWritten);
    assert.equal(first.result.uploadedFiles, 8); // 3 programs + vmconfig, both architectures
    const manifest = parseDependencyManifest((await getIfExists(store, DEPENDENCY_MANIFEST))!.body);
    for (const arch of ARCHES) {
      const entry = (name: string) => manifest.architectures[arch]!.find((e) => e.name === name)!;
      assert.equal(entry("kubelet").version, "1.37.2");
      assert.equal(entry("kubelet").sha256, kubelet[arch].sha256, `kubelet ${arch}`);
      assert.equal(entry("crictl").sha256, crictl[arch].sha256, `crictl ${arch}`);
      assert.equal(entry("containerd").sha256, containerd[arch].sha256, `containerd ${arch}`);
      assert.equal(entry("kubelet").size, 50_000);
      assert.equal(site.hits(kubelet[arch].sha256Url), 1);
      assert.equal(site.hits(containerd[arch].sha256Url), 1);
    }
    assert.ok(
      first.lines.includes(
        `kubelet 1.37.2 amd64: sha256 ${kubelet.amd64.sha256} from ${kubelet.amd64.sha256Url}`,
      ),
      first.lines.join("\n"),
    );

    // The second setup (another machine: an empty cache) takes every digest from the manifest: it
    // asks the vendor for nothing, downloads and uploads nothing and leaves the manifest as it is.
    const hitsBefore = [...site.server.hits.values()].reduce((a, b) => a + b, 0);
    const second = await setupDependencies({
      store,
      site,
      versions,
      cacheDir: path.join(tmp, "cache-2"),
    });
    assert.equal(second.result.manifestWritten, false);
    assert.equal(second.result.uploadedFiles, 0);
    assert.equal(second.result.cacheDownloaded, 0);
    assert.equal([...site.server.hits.values()].reduce((a, b) => a + b, 0), hitsBefore);
    assert.ok(
      second.lines.includes(
        `kubelet 1.37.2 arm64: sha256 ${kubelet.arm64.sha256} as recorded in ${DEPENDENCY_MANIFEST}`,
      ),
      second.lines.join("\n"),
    );

    // A newer kubelet: only its checksums are read; the rest stays as recorded.
    const next = site.publish("kubelet", "1.37.3");
    const third = await setupDependencies({
      store,
      site,
      versions: { ...versions, kubelet: "1.37.3" },
      cacheDir: path.join(tmp, "cache-2"),
    });
    assert.equal(third.result.uploadedFiles, 2);
    assert.equal(site.hits(next.amd64.sha256Url), 1);
    assert.equal(site.hits(crictl.amd64.sha256Url), 1, "crictl's checksum not read again");
    const updated = parseDependencyManifest((await getIfExists(store, DEPENDENCY_MANIFEST))!.body);
    assert.equal(updated.generation, 2);
    assert.equal(
      updated.architectures.arm64!.find((e) => e.name === "kubelet")!.sha256,
      next.arm64.sha256,
    );
  });
});

Deno.test("setup versions [moto]: a missing vendor checksum (404) fails naming its URL; nothing is published", async () => {
  await withCluster(async ({ store, site, tmp }) => {
    const kubelet = site.publish("kubelet", "1.37.2");
    site.files.delete(site.name(kubelet.amd64.sha256Url));
    await assert.rejects(
      setupDependencies({ store, site, versions: { kubelet: "1.37.2" }, cacheDir: tmp }),
      (e: Error & { hint?: string }) => {
        assert.ok(e instanceof VendorChecksumError, String(e));
        assert.equal(
          e.message,
          `kubelet 1.37.2 amd64: the published checksum ${kubelet.amd64.sha256Url} answered 404 ` +
            `Not Found (expected the sha256 of ${kubelet.amd64.url})`,
        );
        assert.match(e.hint!, /published by the vendor/);
        return true;
      },
    );
    assert.equal(site.hits(kubelet.amd64.url), 0, "nothing downloaded without a digest");
    assert.equal(await getIfExists(store, DEPENDENCY_MANIFEST), undefined);
  });
});

Deno.test("setup versions [moto]: a malformed vendor checksum fails naming its URL, what it holds and what was expected", async () => {
  await withCluster(async ({ store, site, tmp }) => {
    const crictl = site.publish(
      "crictl",
      "1.35.0",
      (hex, file) => `${hex.slice(0, 40)}  ${file}\n`, // truncated digest
    );
    await assert.rejects(
      setupDependencies({ store, site, versions: { crictl: "1.35.0" }, cacheDir: tmp }),
      (e: Error) => {
        assert.ok(e instanceof VendorChecksumError, String(e));
        const held = new TextDecoder().decode(site.files.get(site.name(crictl.amd64.sha256Url)));
        assert.ok(
          e.message.startsWith(
            `crictl 1.35.0 amd64: the published checksum ${crictl.amd64.sha256Url} is malformed: `,
          ),
          e.message,
        );
        assert.ok(e.message.includes(`it holds ${JSON.stringify(held)}`), e.message);
        assert.ok(
          e.message.endsWith(
            "expected 64 hex digits, optionally followed by the file name crictl-v1.35.0-linux-amd64.tar.gz",
          ),
          e.message,
        );
        return true;
      },
    );
    assert.equal(await getIfExists(store, DEPENDENCY_MANIFEST), undefined);
  });
});

Deno.test("setup versions [moto]: a vendor checksum that disagrees with the download fails with both digests; nothing is cached or published", async () => {
  await withCluster(async ({ store, site, tmp }) => {
    const wrong = "e".repeat(64);
    const containerd = site.publish(
      "containerd",
      "2.2.1",
      (_hex, file) => `${wrong}  ${file}\n`,
    );
    const cacheDir = path.join(tmp, "cache");
    await assert.rejects(
      setupDependencies({ store, site, versions: { containerd: "2.2.1" }, cacheDir }),
      (e: Error) => {
        assert.ok(e instanceof DigestMismatchError, String(e));
        assert.equal(
          e.message,
          `containerd 2.2.1 amd64: ${containerd.amd64.url} has sha256 ${containerd.amd64.sha256} ` +
            `(50000 bytes), but its published checksum ${containerd.amd64.sha256Url} says ${wrong}`,
        );
        return true;
      },
    );
    assert.equal(site.hits(containerd.amd64.url), 1, "the download was made and refused");
    await assert.rejects(Deno.stat(path.join(cacheDir, "sha256", wrong)), Deno.errors.NotFound);
    assert.equal(await getIfExists(store, DEPENDENCY_MANIFEST), undefined);
    const blobs = [];
    for await (const o of store.list("dependencies/blobs/")) blobs.push(o.key);
    assert.deepEqual(blobs, [], "nothing uploaded");
  });
});

Deno.test("setup --kubernetes-version --dry-run: the plan and the user-data carry the vendor's digest; a bad version is refused", async () => {
  const tmp = await Deno.makeTempDir({ prefix: "podmin-version-plan-" });
  const site = new VendorSite();
  try {
    const kubelet = site.publish("kubelet", "1.37.2");
    const args = (version: string) => [
      "setup",
      "--cluster",
      "versions",
      "--region",
      "us-east-1",
      "--vpc-cidr",
      "10.0.0.0/16",
      "--nodegroup",
      "workers,instance-type=m7i.large", // amd64
      "--kubernetes-version",
      version,
      "--dry-run",
      "--out",
      `${tmp}/plan`,
    ];
    const env = { PODMIN_CACHE_DIR: `${tmp}/cache`, PODMIN_RELEASE_MIRROR: site.mirror };
    const r = await podmin(args("1.37.2"), env);
    assert.equal(r.code, 0, r.stderr);
    const plan = JSON.parse(await Deno.readTextFile(`${tmp}/plan/dependencies.json`));
    const planned = plan.dependencies.filter((d: { name: string }) => d.name === "kubelet");
    assert.deepEqual(planned.map((d: { arch: string }) => d.arch), ["amd64"]);
    assert.equal(planned[0].version, "1.37.2");
    assert.equal(planned[0].sha256, kubelet.amd64.sha256);
    assert.equal(planned[0].sha256Url, kubelet.amd64.sha256Url);
    assert.equal(planned[0].source, kubelet.amd64.url);
    const node = await Deno.readTextFile(`${tmp}/plan/user-data/workers.sh`);
    assert.match(node, new RegExp(`^kubelet 1\\.37\\.2 ${kubelet.amd64.sha256} `, "m"));

    const bad = await podmin(args("v1.37.2"), env);
    assert.notEqual(bad.code, 0);
    assert.match(
      bad.stderr,
      /--kubernetes-version: expected a release version MAJOR\.MINOR\.PATCH, got "v1\.37\.2"/,
    );
  } finally {
    await site.server.close();
    await Deno.remove(tmp, { recursive: true });
  }
});

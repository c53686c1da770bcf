import assert from "node:assert/strict";
import { parseCatalog } from "./dependency_catalog.ts";
import {
  checkReleaseVersion,
  parseReleaseMirror,
  releaseUrl,
  withReleaseVersions,
} from "./vendor_releases.ts";

Deno.test("vendor releases: each program's URL and checksum file follow the vendor's layout", () => {
  assert.deepEqual(releaseUrl({ program: "kubelet", version: "1.37.2", arch: "arm64" }), {
    url: "https://dl.k8s.io/release/v1.37.2/bin/linux/arm64/kubelet",
    sha256Url: "https://dl.k8s.io/release/v1.37.2/bin/linux/arm64/kubelet.sha256",
  });
  assert.deepEqual(releaseUrl({ program: "crictl", version: "1.35.0", arch: "amd64" }), {
    url:
      "https://github.com/kubernetes-sigs/cri-tools/releases/download/v1.35.0/crictl-v1.35.0-linux-amd64.tar.gz",
    sha256Url:
      "https://github.com/kubernetes-sigs/cri-tools/releases/download/v1.35.0/crictl-v1.35.0-linux-amd64.tar.gz.sha256",
  });
  assert.deepEqual(releaseUrl({ program: "containerd", version: "2.2.1", arch: "amd64" }), {
    url:
      "https://github.com/containerd/containerd/releases/download/v2.2.1/containerd-2.2.1-linux-amd64.tar.gz",
    sha256Url:
      "https://github.com/containerd/containerd/releases/download/v2.2.1/containerd-2.2.1-linux-amd64.tar.gz.sha256sum",
  });
  // A mirror serves the same paths under its base, host first.
  assert.equal(
    releaseUrl({
      program: "kubelet",
      version: "1.37.2",
      arch: "amd64",
      mirror: parseReleaseMirror("http://127.0.0.1:8080/m/"),
    }).sha256Url,
    "http://127.0.0.1:8080/m/dl.k8s.io/release/v1.37.2/bin/linux/amd64/kubelet.sha256",
  );
});

Deno.test("vendor releases: a chosen version replaces that program for both architectures only", () => {
  const pin = (name: string, arch: string) => ({
    name,
    version: "1.0.0",
    arch,
    url: `https://x/${name}-${arch}`,
    sha256: "a".repeat(64),
  });
  const catalog = parseCatalog({
    dependencies: [pin("kubelet", "amd64"), pin("kubelet", "arm64"), pin("runc", "amd64")],
  });
  const out = parseCatalog(withReleaseVersions(catalog, { versions: { kubelet: "1.37.2" } }));
  const ids = out.dependencies.map((d) => `${d.name}/${d.arch}/${d.version}`).sort();
  assert.deepEqual(ids, ["kubelet/amd64/1.37.2", "kubelet/arm64/1.37.2", "runc/amd64/1.0.0"]);
  for (const d of out.dependencies.filter((d) => d.name === "kubelet")) {
    assert.equal(d.sha256, undefined, "no literal digest: it comes from the vendor");
    assert.equal(d.sha256Url, `${d.url}.sha256`);
  }
  assert.equal(withReleaseVersions(catalog, { versions: {} }), catalog, "nothing chosen");
});

Deno.test("vendor releases: versions and mirrors are validated with clear errors", () => {
  assert.equal(checkReleaseVersion("1.37.2", "--kubernetes-version"), "1.37.2");
  for (const bad of ["v1.37.2", "1.37", "1.37.2-rc.0", "01.37.2", "1.37.2 ", "latest", ""]) {
    assert.throws(
      () => checkReleaseVersion(bad, "--kubernetes-version"),
      (e: Error) =>
        e.name === "UsageError" &&
        e.message ===
          `--kubernetes-version: expected a release version MAJOR.MINOR.PATCH, got ${
            JSON.stringify(bad)
          }`,
      bad,
    );
  }
  assert.equal(parseReleaseMirror(undefined), undefined);
  assert.equal(parseReleaseMirror(""), undefined);
  for (const bad of ["ftp://m", "mirror.example", "https://m/?x=1"]) {
    assert.throws(() => parseReleaseMirror(bad), /PODMIN_RELEASE_MIRROR: expected an http\(s\)/);
  }
});

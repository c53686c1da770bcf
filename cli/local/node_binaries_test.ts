import assert from "node:assert/strict";
import { gzipSync } from "node:zlib";
import { sha256Hex } from "../../core/kit/digest.ts";
import { serveFiles } from "../../tests/support/file_server.ts";
import { buildTar } from "../../vmconfig/archive.ts";
import type { Catalog } from "../setup/dependency_catalog.ts";
import { BinaryError, fetchPinnedBinaries, resolveBinaries } from "./node_binaries.ts";

const enc = new TextEncoder();
const ARCH = Deno.build.arch === "aarch64" ? "arm64" : "amd64";

/** A program that reports a version the way the real one does. */
const program = (versionLine: string, flag = "--version") =>
  enc.encode(`#!/bin/sh\n[ "$1" = ${flag} ] && echo "${versionLine}"\nexit 0\n`);
const tgz = (files: Array<[string, Uint8Array]>) =>
  new Uint8Array(gzipSync(buildTar(files.map(([n, d]) => [n, 0o755, d]))));

/** Release files laid out as upstream ships them (containerd under bin/, CNI flat). */
function releaseFiles(): Map<string, Uint8Array> {
  return new Map([
    [
      "containerd.tgz",
      tgz([
        ["bin/containerd", program("containerd github.com/containerd/containerd/v2 v2.1.5 abc")],
        ["bin/containerd-shim-runc-v2", program("shim")],
        ["bin/ctr", program("ctr")],
      ]),
    ],
    ["runc", program("runc version 1.3.3")],
    ["kubelet", program("Kubernetes v1.37.2")],
    ["crictl.tgz", tgz([["crictl", program("crictl version v1.34.0")]])],
    // CoreDNS's release tarball holds the one program; it prints its version on -version.
    [
      "coredns.tgz",
      tgz([["coredns", program("CoreDNS-1.12.1\nlinux/amd64, go1.24.1", "-version")]]),
    ],
    [
      "cni.tgz",
      tgz([["ptp", program("ptp")], ["host-local", program("hl")], [
        "loopback",
        program("lo"),
      ]]),
    ],
  ]);
}

function catalogOf(files: Map<string, Uint8Array>, url: (n: string) => string): Catalog {
  const entry = (name: string, file: string, version: string) => ({
    name,
    version,
    arch: ARCH as "amd64" | "arm64",
    url: url(file),
    sha256: sha256Hex(files.get(file)!),
  });
  return {
    dependencies: [
      entry("containerd", "containerd.tgz", "2.1.5"),
      entry("runc", "runc", "1.3.3"),
      entry("kubelet", "kubelet", "1.37.2"),
      entry("crictl", "crictl.tgz", "1.34.0"),
      entry("coredns", "coredns.tgz", "1.12.1"),
      entry("cni-plugins", "cni.tgz", "1.8.0"),
    ],
  };
}

Deno.test("node binaries: pinned downloads are verified, unpacked as released, reused from the cache", async () => {
  const files = releaseFiles();
  const server = serveFiles(files);
  const tmp = await Deno.makeTempDir();
  try {
    const catalog = catalogOf(files, server.url);
    const o = { dir: `${tmp}/bin`, cacheDir: `${tmp}/cache`, log: () => {}, catalog };
    const dir = await fetchPinnedBinaries(o);
    const b = await resolveBinaries({ binDirs: [dir], cniDir: `${dir}/cni` });
    assert.equal(b.containerdVersion, "2.1.5");
    assert.equal(b.kubeletVersion, "1.37.2");
    assert.equal(b.corednsVersion, "1.12.1");
    assert.equal(b.coredns, `${dir}/coredns`);
    assert.equal(b.runc, `${dir}/runc`);
    assert.equal(b.shim, `${dir}/containerd-shim-runc-v2`);
    const hits = [...server.hits.values()].reduce((a, n) => a + n, 0);
    assert.equal(hits, 6);
    // A second run downloads nothing: every file comes from the verified cache.
    await fetchPinnedBinaries(o);
    assert.equal([...server.hits.values()].reduce((a, n) => a + n, 0), hits);
  } finally {
    await server.close();
    await Deno.remove(tmp, { recursive: true });
  }
});

Deno.test("node binaries: a download that does not match its pin stops with the way out", async () => {
  const files = releaseFiles();
  const catalogFiles = new Map(files);
  files.set("kubelet", program("Kubernetes v1.37.2-tampered"));
  const server = serveFiles(files);
  const tmp = await Deno.makeTempDir();
  try {
    await assert.rejects(
      fetchPinnedBinaries({
        dir: `${tmp}/bin`,
        cacheDir: `${tmp}/cache`,
        log: () => {},
        catalog: catalogOf(catalogFiles, server.url),
      }),
      (err: BinaryError) => {
        assert.ok(err instanceof BinaryError);
        assert.match(err.message, /^cannot download kubelet 1\.37\.2: .*sha256/);
        assert.match(err.hint ?? "", /--bin-dir/);
        return true;
      },
    );
    await assert.rejects(Deno.stat(`${tmp}/bin/kubelet`));
  } finally {
    await server.close();
    await Deno.remove(tmp, { recursive: true });
  }
});

Deno.test("node binaries: a missing program names itself and the flag to give", async () => {
  const tmp = await Deno.makeTempDir();
  try {
    await assert.rejects(
      resolveBinaries({ binDirs: [tmp], cniDir: "/usr/lib/cni" }),
      /no executable containerd in /,
    );
  } finally {
    await Deno.remove(tmp, { recursive: true });
  }
});

/**
 * The OCI distribution-spec conformance suite (built from the Go module proxy
 * by tests/setup.sh) against the agent's registry, pull workflow, read-only
 * mode with preloaded content.
 */

import assert from "node:assert/strict";
import * as path from "node:path";
import { writeOciLayout } from "../support/oci_image.ts";
import { moto } from "../support/moto.ts";
import { podmin } from "../support/programs.ts";
import { startRegistry } from "../support/registry.ts";
import { testWith } from "../support/requirements.ts";

testWith("registry [moto]: OCI distribution-spec conformance, pull workflow (read-only)", {
  tools: ["oci-conformance"],
}, async () => {
  const m = await moto();
  await m.reset();
  const bucket = `s3://${await m.createBucket()}`;
  const tmp = await Deno.makeTempDir({ prefix: "podmin-conformance-" });
  let registry: Awaited<ReturnType<typeof startRegistry>> | undefined;
  try {
    const enc = new TextEncoder();
    const single = await writeOciLayout({
      dir: path.join(tmp, "single"),
      ref: "1.0",
      platforms: [{ arch: "amd64", files: { hello: enc.encode("conformance single") } }],
    });
    const multi = await writeOciLayout({
      dir: path.join(tmp, "multi"),
      ref: "2.0",
      platforms: [
        { arch: "amd64", files: { a: enc.encode("amd64 layer") } },
        { arch: "arm64", files: { b: enc.encode("arm64 layer") } },
      ],
    });
    for (const [src, tag] of [[`oci:${tmp}/single:1.0`, "1.0"], [`oci:${tmp}/multi:2.0`, "2.0"]]) {
      const r = await podmin(["--bucket", bucket, "push", src, `apps/conformance:${tag}`]);
      assert.equal(r.code, 0, r.stderr);
    }
    const blobs: string[] = [];
    for (
      const [dir, digests] of [["single", [single.digest]], [
        "multi",
        multi.manifestDigests,
      ]] as const
    ) {
      for (const d of digests) {
        const manifest = JSON.parse(
          await Deno.readTextFile(path.join(tmp, dir, "blobs/sha256", d.slice(7))),
        );
        blobs.push(
          manifest.config.digest,
          ...manifest.layers.map((l: { digest: string }) => l.digest),
        );
      }
    }
    registry = await startRegistry(bucket);
    const out = await new Deno.Command("oci-conformance", {
      cwd: tmp,
      env: {
        OCI_REGISTRY: registry.address,
        OCI_TLS: "disabled",
        OCI_REPO1: "apps/conformance",
        OCI_REPO2: "apps/conformance-two",
        OCI_API_PUSH: "false",
        OCI_API_BLOBS_DELETE: "false",
        OCI_API_MANIFESTS_DELETE: "false",
        OCI_API_TAGS_DELETE: "false",
        OCI_API_TAGS_LIST: "false",
        OCI_API_REFERRER: "false",
        OCI_RO_DATA_TAGS: "1.0 2.0",
        OCI_RO_DATA_MANIFESTS: [single.digest, multi.digest, ...multi.manifestDigests].join(" "),
        OCI_RO_DATA_BLOBS: blobs.join(" "),
        OCI_RESULTS_DIR: path.join(tmp, "results"),
      },
      stdout: "piped",
      stderr: "piped",
    }).output();
    // The suite's exit status does not carry the verdict (and its YAML report
    // writer crashes on read-only data), so the verdict is read from its report.
    const report = new TextDecoder().decode(out.stdout);
    assert.match(report, /^OCI Conformance Test: Pass$/m, report);
    assert.doesNotMatch(report, /: Fail/, report);
    for (
      const line of [
        "read-only/pull/manifest-by-tag: Pass",
        "read-only/pull/manifest-by-digest: Pass",
        "read-only/pull/blob-get: Pass",
        "read-only/head/manifest-head-by-tag: Pass",
        "read-only/head/blob-head: Pass",
        "missing-manifest/by-digest: Pass",
        "invalid-digest-format/manifest-get: Pass",
      ]
    ) assert.ok(report.includes(line), `${line} missing from:\n${report}`);
  } finally {
    await registry?.stop();
    await Deno.remove(tmp, { recursive: true });
  }
});

import assert from "node:assert/strict";
import { imageTagKey } from "../core/bucket/bucket_layout.ts";
import { FsStore } from "../core/store/fs_store.ts";
import { getIfExists } from "../core/store/object_store.ts";
import { writeOciLayout } from "../tests/support/oci_image.ts";
import { type ImageSource, openImageSource } from "./image_source.ts";
import { writeImage } from "./image_writer.ts";

/** Wraps a source so that the stream of one blob fails half-way (a dropped connection). */
function failingOnce(inner: ImageSource, digest: string): ImageSource {
  let failed = false;
  return {
    name: inner.name,
    root: () => inner.root(),
    manifest: (d) => inner.manifest(d),
    close: () => inner.close(),
    async blob(d) {
      const body = await inner.blob(d);
      if (d.digest !== digest || failed) return body;
      failed = true;
      let sent = 0;
      return body.pipeThrough(
        new TransformStream({
          transform(chunk, c) {
            sent += chunk.byteLength;
            if (sent > d.size / 2) throw new Error("connection reset");
            c.enqueue(chunk);
          },
        }),
      );
    },
  };
}

Deno.test("image writer: an interrupted push publishes no tag and a re-run uploads only what is missing", async () => {
  const tmp = await Deno.makeTempDir({ prefix: "podmin-writer-" });
  try {
    const big = crypto.getRandomValues(new Uint8Array(65536));
    const files: Record<string, Uint8Array> = {};
    for (let i = 0; i < 64; i++) files[`f${i}`] = big.map((b) => b ^ i); // ~4 MiB of noise
    await writeOciLayout({ dir: `${tmp}/img`, ref: "1", platforms: [{ arch: "amd64", files }] });
    const store = new FsStore({ root: `${tmp}/bucket`, durable: false });
    const repo = { root: "apps" as const, name: "big" };
    const source = await openImageSource(`oci:${tmp}/img:1`);
    const root = await source.root();
    const layer = JSON.parse(new TextDecoder().decode(root.bytes)).layers[0];

    await assert.rejects(
      writeImage({ store, source: failingOnce(source, layer.digest), repo, tag: "1" }),
      /connection reset/,
    );
    assert.equal(
      await getIfExists(store, imageTagKey(repo, "1")),
      undefined,
      "no tag after a failure",
    );

    const lines: string[] = [];
    const again = await writeImage({ store, source, repo, tag: "1", log: (l) => lines.push(l) });
    assert.equal(again.blobsUploaded, 1, "only the interrupted layer");
    assert.equal(again.blobsSkipped, 1, "the config was already stored");
    assert.ok(await getIfExists(store, imageTagKey(repo, "1")));
    assert.ok(lines.some((l) => / done$/.test(l)), "progress reported");
  } finally {
    await Deno.remove(tmp, { recursive: true });
  }
});

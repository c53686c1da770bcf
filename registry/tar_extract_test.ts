import assert from "node:assert/strict";
import { tarOf } from "../tests/support/oci_image.ts";
import { extractTar, safeJoin } from "./tar_extract.ts";

const stream = (b: Uint8Array) => new Blob([b as Uint8Array<ArrayBuffer>]).stream();

Deno.test("tar: extracts regular files; rejects traversal and absolute names", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const files = await extractTar(
      stream(tarOf({ "a/b.txt": new TextEncoder().encode("hello") })),
      dir,
    );
    assert.deepEqual(files, ["a/b.txt"]);
    assert.equal(await Deno.readTextFile(`${dir}/a/b.txt`), "hello");
    for (const bad of ["../evil", "a/../../evil", "/etc/evil"]) {
      await assert.rejects(
        extractTar(stream(tarOf({ [bad]: new Uint8Array(1) })), dir),
        /escapes the archive/,
      );
    }
    assert.throws(() => safeJoin(dir, ""), /escapes/);
    const corrupt = tarOf({ "x": new Uint8Array(10) });
    corrupt[0] ^= 0xff;
    await assert.rejects(extractTar(stream(corrupt), dir), /checksum/);
    await assert.rejects(
      extractTar(stream(tarOf({ "y": new Uint8Array(2000) }).subarray(0, 1000)), dir),
      /truncated/,
    );
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("tar: ./-prefixed names, . segments and a ./ directory entry are ordinary", () => {
  const dir = "/dest";
  assert.equal(safeJoin(dir, "./", { root: true }), dir);
  assert.equal(safeJoin(dir, ".", { root: true }), dir);
  assert.throws(() => safeJoin(dir, "./"), /names the archive root/);
  assert.equal(safeJoin(dir, "./blobs/./sha256/x"), "/dest/blobs/sha256/x");
  assert.equal(safeJoin(dir, "blobs/"), "/dest/blobs");
  for (const bad of ["/etc/x", "./../x", "a/../../x", "x\0y", ""]) {
    assert.throws(() => safeJoin(dir, bad), /escapes the archive/, bad);
  }
});

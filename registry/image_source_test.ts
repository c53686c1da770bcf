import assert from "node:assert/strict";
import { tarOf, writeOciLayout } from "../tests/support/oci_image.ts";
import { testWith } from "../tests/support/requirements.ts";
import { openImageSource } from "./image_source.ts";

const enc = new TextEncoder();

Deno.test("docker-archive: manifest.json paths outside the archive are refused (no local file is read)", async () => {
  const tmp = await Deno.makeTempDir({ prefix: "podmin-docker-archive-" });
  try {
    await Deno.writeTextFile(`${tmp}/secret`, "aws_secret_access_key=TOPSECRET");
    for (
      const layers of [["../../../../../../../../" + tmp.slice(1) + "/secret"], [`${tmp}/secret`], [
        42,
      ]]
    ) {
      const archive = `${tmp}/evil.tar`;
      await Deno.writeFile(
        archive,
        tarOf({
          "manifest.json": enc.encode(
            JSON.stringify([{ Config: "config.json", RepoTags: ["x:1"], Layers: layers }]),
          ),
          "config.json": enc.encode("{}"),
        }),
      );
      const src = await openImageSource(`docker-archive:${archive}`);
      try {
        await assert.rejects(
          src.root(),
          /escapes the archive|not a file of the archive|non-string path/,
          JSON.stringify(layers),
        );
      } finally {
        await src.close();
      }
    }
  } finally {
    await Deno.remove(tmp, { recursive: true });
  }
});

testWith(
  "oci-archive: an archive made with `tar -C layout -cf x.tar .` is read; escaping links are not",
  {
    tools: ["tar"],
  },
  async () => {
    const tmp = await Deno.makeTempDir({ prefix: "podmin-oci-archive-" });
    try {
      const layout = `${tmp}/layout`;
      const img = await writeOciLayout({
        dir: layout,
        ref: "1.0",
        platforms: [{ arch: "amd64", files: { hello: enc.encode("hi\n") } }],
      });
      const archive = `${tmp}/image.tar`;
      const tar = (args: string[]) => new Deno.Command("tar", { args, stdout: "null" }).output();
      assert.ok((await tar(["-C", layout, "-cf", archive, "."])).success);
      const listing = new TextDecoder().decode(
        (await new Deno.Command("tar", { args: ["-tf", archive] }).output()).stdout,
      );
      assert.match(listing, /^\.\/$/m); // the entries skopeo reads and Podmin refused
      assert.match(listing, /^\.\/blobs\/$/m);
      const src = await openImageSource(`oci-archive:${archive}:1.0`);
      try {
        assert.equal((await src.root()).digest, img.digest);
      } finally {
        await src.close();
      }

      // Links that leave the archive are still refused.
      for (const [name, target] of [["up", "../../../etc/passwd"], ["abs", "/etc/passwd"]]) {
        const evil = `${tmp}/evil-${name}`;
        await Deno.mkdir(evil);
        await Deno.symlink(target, `${evil}/oci-layout`);
        const evilTar = `${tmp}/evil-${name}.tar`;
        assert.ok((await tar(["-C", evil, "-cf", evilTar, "."])).success);
        await assert.rejects(
          openImageSource(`oci-archive:${evilTar}`),
          /escapes the archive|points at no regular file of the archive/,
          name,
        );
      }
    } finally {
      await Deno.remove(tmp, { recursive: true });
    }
  },
);

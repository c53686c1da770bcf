import assert from "node:assert/strict";
import { tarOf } from "../tests/support/oci_image.ts";
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

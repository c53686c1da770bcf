import assert from "node:assert/strict";
import { ManifestDir } from "./manifest_dir.ts";

const owned = (name: string) =>
  new TextEncoder().encode(
    JSON.stringify({ metadata: { name, annotations: { "podmin.dev/owner": "podmin-agent" } } }),
  );

Deno.test("manifest dir: writes, skips unchanged, removes only owned undesired files, honours keep", async () => {
  const dir = await Deno.makeTempDir();
  try {
    await Deno.writeTextFile(`${dir}/other.yaml`, "kind: Pod");
    await Deno.writeTextFile(`${dir}/podmin_default_notours.json`, '{"metadata":{}}');
    await Deno.writeTextFile(`${dir}/.podmin_default_a.json.tmp`, "{half a fi"); // interrupted write
    await Deno.writeTextFile(`${dir}/.other.tmp`, "not ours");
    const md = new ManifestDir(dir);
    let c = await md.converge(
      new Map([["podmin_default_a.json", owned("a")], ["podmin_default_b.json", owned("b")]]),
      new Set(),
    );
    assert.deepEqual(c.written.sort(), ["podmin_default_a.json", "podmin_default_b.json"]);
    assert.deepEqual(c.owned, ["podmin_default_a.json", "podmin_default_b.json"]);
    c = await md.converge(
      new Map([["podmin_default_a.json", owned("a")]]),
      new Set(["podmin_default_b.json"]),
    );
    assert.deepEqual(c, {
      written: [],
      removed: [],
      unchanged: ["podmin_default_a.json"],
      refused: [],
      // What a scan finds afterwards: the kept file is still there.
      owned: ["podmin_default_a.json", "podmin_default_b.json"],
    });
    assert.deepEqual(c.owned, [...(await md.readOwned()).keys()].sort());
    c = await md.converge(new Map(), new Set());
    assert.deepEqual(c.removed.sort(), ["podmin_default_a.json", "podmin_default_b.json"]);
    assert.deepEqual(c.owned, []);
    const left = (await Array.fromAsync(Deno.readDir(dir))).map((e) => e.name).sort();
    assert.deepEqual(
      left,
      [".other.tmp", "other.yaml", "podmin_default_notours.json"],
      "own temp files removed, foreign files kept",
    );
    // A desired name held by a file Podmin does not own is reported and left alone.
    const refused = await md.converge(
      new Map([["podmin_default_notours.json", owned("x")]]),
      new Set(),
    );
    assert.deepEqual(refused.refused, ["podmin_default_notours.json"]);
    assert.deepEqual(refused.owned, [], "a refused name is not Podmin's");
    assert.equal(await Deno.readTextFile(`${dir}/podmin_default_notours.json`), '{"metadata":{}}');
    await assert.rejects(
      md.converge(new Map([["../escape.json", owned("x")]]), new Set()),
      /refusing/,
    );
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

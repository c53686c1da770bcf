import assert from "node:assert/strict";
import {
  readGeneration,
  repairLayout,
  UnexpectedEntryError,
  writeGeneration,
} from "./pod_generations.ts";

const v = (o: Record<string, string>) =>
  new Map(Object.entries(o).map(([k, s]) => [k, new TextEncoder().encode(s)]));

Deno.test("value generations: swap, no-op on equal values, removed keys disappear", async () => {
  const dir = await Deno.makeTempDir();
  try {
    assert.equal(await readGeneration(dir), undefined);
    assert.ok(await writeGeneration(dir, v({ a: "1", b: "2" })));
    assert.equal(await writeGeneration(dir, v({ a: "1", b: "2" })), false);
    assert.ok(await writeGeneration(dir, v({ a: "1" })));
    const names = (await Array.fromAsync(Deno.readDir(dir))).map((e) => e.name).sort();
    assert.equal(names.length, 3); // ..data, one ..gen-*, a
    assert.ok(names.includes("a") && names.includes("..data") && !names.includes("b"));
    assert.equal(await Deno.readTextFile(`${dir}/a`), "1");
    assert.deepEqual([...(await readGeneration(dir))!.keys()], ["a"]);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("value generations: a crash between the swap and the links is repaired on the next write", async () => {
  const dir = await Deno.makeTempDir();
  try {
    assert.ok(await writeGeneration(dir, v({ a: "1" })));
    // The agent died after renaming ..data to the new generation, before linking `db`.
    const gen = "..gen-crashed";
    await Deno.mkdir(`${dir}/${gen}`, { mode: 0o755 });
    await Deno.writeTextFile(`${dir}/${gen}/a`, "1", { mode: 0o444 });
    await Deno.writeTextFile(`${dir}/${gen}/db`, "secret", { mode: 0o644 }); // mode not yet set
    await Deno.symlink(gen, `${dir}/..data.tmp`);
    await Deno.rename(`${dir}/..data.tmp`, `${dir}/..data`);

    assert.equal(await writeGeneration(dir, v({ a: "1", db: "secret" })), false); // same content
    assert.equal(await Deno.readTextFile(`${dir}/db`), "secret");
    assert.equal(await Deno.readLink(`${dir}/db`), "..data/db");
    assert.equal((await Deno.stat(`${dir}/${gen}/db`)).mode! & 0o777, 0o444);
    const names = (await Array.fromAsync(Deno.readDir(dir))).map((e) => e.name).sort();
    assert.deepEqual(names, [gen, "..data", "a", "db"].sort()); // the older generation is gone
    assert.deepEqual(await repairLayout(dir), []); // whole now
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("value generations: a symlinked per-Pod directory is reported and never followed", async () => {
  const root = await Deno.makeTempDir();
  try {
    const other = `${root}/other`;
    await Deno.mkdir(`${other}/sub`, { recursive: true });
    await Deno.writeTextFile(`${other}/important.txt`, "keep me");
    await Deno.symlink(other, `${root}/default_sec1`);
    await assert.rejects(
      writeGeneration(`${root}/default_sec1`, v({ db: "x" })),
      (err: Error) => err instanceof UnexpectedEntryError && /is a symlink/.test(err.message),
    );
    await assert.rejects(repairLayout(`${root}/default_sec1`), UnexpectedEntryError);
    const names = (await Array.fromAsync(Deno.readDir(other))).map((e) => e.name).sort();
    assert.deepEqual(names, ["important.txt", "sub"]);
    assert.equal(await Deno.readLink(`${root}/default_sec1`), other);
  } finally {
    await Deno.remove(root, { recursive: true });
  }
});

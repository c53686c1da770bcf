import assert from "node:assert/strict";
import { readGeneration, writeGeneration } from "./value_generations.ts";

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

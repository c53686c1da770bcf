/** Killing a writer in the middle of a filesystem-store write never leaves a torn object. */

import assert from "node:assert/strict";
import { PermanentStoreError } from "../../core/errors.ts";
import { FsStore } from "../../core/fs_store.ts";

const SIZE = 16 * 1024 * 1024;

function assertWhole(body: Uint8Array): number {
  assert.equal(body.byteLength, SIZE, "object has the full size");
  const v = body[0];
  assert.ok(v >= 1 && v <= 251);
  for (let i = 0; i < body.length; i += 4096) assert.equal(body[i], v, `byte ${i}`);
  assert.equal(body[body.length - 1], v);
  return v;
}

Deno.test("fs store: SIGKILL during writes leaves the old or the new object, never a partial one", async () => {
  const root = await Deno.makeTempDir({ prefix: "podmin-crash-" });
  try {
    const store = new FsStore({ root });
    const delays = [15, 60, 140, 250, 400, 700];
    let kills = 0;
    for (const delay of delays) {
      const child = new Deno.Command(Deno.execPath(), {
        args: [
          "run",
          "-A",
          new URL("../support/fs_store_writer.ts", import.meta.url).pathname,
          root,
          "crash/object",
        ],
        stdout: "piped",
        stderr: "inherit",
      }).spawn();
      // Let it complete at least one write when possible, then kill it at a varying moment.
      await new Promise((r) => setTimeout(r, 1500 + delay));
      child.kill("SIGKILL");
      const out = await child.output();
      assert.equal(out.signal, "SIGKILL");
      kills++;
      const wrote = new TextDecoder().decode(out.stdout).trim().split("\n").filter(Boolean);
      const got = await store.get("crash/object").catch((e) => e);
      if (wrote.length === 0 && got instanceof Error) continue; // killed before the first write
      assert.ok(!(got instanceof Error), `get failed: ${got}`);
      if (got.notModified) throw new Error("unexpected not-modified");
      const value = assertWhole(got.body);
      // The object is the last completed generation or the one in flight.
      const last = wrote.length ? Number(wrote[wrote.length - 1].split(" ")[1]) : 0;
      const candidates = [last, last + 1].map((g) => (g % 251) + 1);
      assert.ok(candidates.includes(value), `value ${value} not in ${candidates}`);
    }
    assert.equal(kills, delays.length);
    // Leftover temp files are swept and do not show up as objects.
    const keys = [];
    for await (const o of store.list("")) keys.push(o.key);
    assert.deepEqual(keys, ["crash/object"]);
    // At least one kill landed mid-write: its temp file is what the sweep removes.
    assert.ok((await store.sweepTemp(0)) >= 1, "no kill interrupted a write");
    assert.equal([...Deno.readDirSync(`${root}/.tmp`)].length, 0);
  } finally {
    await Deno.remove(root, { recursive: true });
  }
});

Deno.test("fs store: a corrupted object file is reported, not served", async () => {
  const root = await Deno.makeTempDir({ prefix: "podmin-corrupt-" });
  try {
    const store = new FsStore({ root });
    await store.put("k", new TextEncoder().encode("hello"));
    const file = `${root}/objects/k.o`;
    const bytes = await Deno.readFile(file);
    await Deno.writeFile(file, bytes.subarray(0, bytes.length - 3)); // truncated
    await assert.rejects(store.get("k"), PermanentStoreError);
    await Deno.writeFile(file, new TextEncoder().encode("not an object"));
    await assert.rejects(store.head("k"), /corrupt object file/);
  } finally {
    await Deno.remove(root, { recursive: true });
  }
});

/** Killing a writer in the middle of a filesystem-store write never leaves a torn object. */

import assert from "node:assert/strict";
import { PermanentStoreError } from "../../core/kit/errors.ts";
import { FsStore } from "../../core/store/fs_store.ts";

const SIZE = 16 * 1024 * 1024;

function assertWhole(body: Uint8Array): number {
  assert.equal(body.byteLength, SIZE, "object has the full size");
  const v = body[0];
  assert.ok(v >= 1 && v <= 251);
  for (let i = 0; i < body.length; i += 4096) assert.equal(body[i], v, `byte ${i}`);
  assert.equal(body[body.length - 1], v);
  return v;
}

const WRITER = new URL("../support/fs_store_writer.ts", import.meta.url).pathname;
const valueOf = (g: number) => (g % 251) + 1;

/** One kill: where the writer pauses (if it does), and the marker line that triggers the kill. */
interface Trial {
  pause?: [gen: number, chunk: number];
  killAt: (line: string) => boolean;
}

/**
 * Runs the writer until `trial.killAt` matches one of its progress lines, kills it with SIGKILL
 * and returns the lines it printed.
 */
async function killWriter(root: string, trial: Trial): Promise<string[]> {
  const child = new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", WRITER, root, "crash/object", ...(trial.pause ?? []).map(String)],
    stdin: "piped", // held open: a paused writer blocks on it
    stdout: "piped",
    stderr: "inherit",
  }).spawn();
  const lines: string[] = [];
  let pending = "";
  let killed = false;
  for await (const bytes of child.stdout.pipeThrough(new TextDecoderStream())) {
    pending += bytes;
    const parts = pending.split("\n");
    pending = parts.pop()!;
    for (const line of parts) {
      lines.push(line);
      if (!killed && trial.killAt(line)) {
        child.kill("SIGKILL");
        killed = true;
      }
    }
  }
  const status = await child.status;
  await child.stdin.close().catch(() => {});
  assert.ok(killed, `the writer exited before its marker: ${lines.slice(-3).join(" | ")}`);
  assert.equal(status.signal, "SIGKILL", "the writer died of SIGKILL");
  return lines;
}

const completed = (lines: string[]) =>
  lines.filter((l) => l.startsWith("wrote ")).map((l) => Number(l.split(" ")[1]));

Deno.test("fs store: SIGKILL during writes leaves the old or the new object, never a partial one", async () => {
  const root = await Deno.makeTempDir({ prefix: "podmin-crash-" });
  try {
    const store = new FsStore({ root });
    const tempFiles = () => {
      try {
        return [...Deno.readDirSync(`${root}/.tmp`)].length;
      } catch (err) {
        if (err instanceof Deno.errors.NotFound) return 0; // no writer has started yet
        throw err;
      }
    };
    // The value the object holds now (undefined: no object yet).
    let current: number | undefined;

    // 1. Paused mid-stream (chunk k ≥ 2 handed over: the temp file exists, the rename has not
    //    happened): the object is exactly the last completed generation, and a temp file is left.
    const paused: [number, number][] = [[2, 2], [2, 9], [4, 16], [6, 5]];
    for (const [gen, chunk] of paused) {
      const before = tempFiles();
      const lines = await killWriter(root, {
        pause: [gen, chunk],
        killAt: (l) => l === `paused ${gen} ${chunk}`,
      });
      assert.deepEqual(completed(lines), Array.from({ length: gen - 1 }, (_, i) => i + 1));
      current = valueOf(gen - 1);
      const got = await store.get("crash/object");
      if (got.notModified) throw new Error("unexpected not-modified");
      assert.equal(assertWhole(got.body), current, `killed in generation ${gen}, chunk ${chunk}`);
      assert.equal(tempFiles(), before + 1, "the interrupted write left its temp file");
    }

    // 2. Killed as soon as the writer announces a write (whole-buffer `put` or stream): wherever
    //    the kill lands, the object is the previous generation or the new one, whole.
    for (const gen of [1, 3, 4, 5, 8]) {
      const lines = await killWriter(root, { killAt: (l) => l === `begin ${gen}` });
      const done = completed(lines);
      assert.deepEqual(done, Array.from({ length: gen - 1 }, (_, i) => i + 1));
      const previous = gen > 1 ? valueOf(gen - 1) : current;
      const got = await store.get("crash/object");
      if (got.notModified) throw new Error("unexpected not-modified");
      const value = assertWhole(got.body);
      assert.ok(
        value === previous || value === valueOf(gen),
        `killed at the start of generation ${gen}: value ${value}, expected ${previous} or ${
          valueOf(gen)
        }`,
      );
      current = value;
    }

    // Leftover temp files are swept and do not show up as objects.
    const keys = [];
    for await (const o of store.list("")) keys.push(o.key);
    assert.deepEqual(keys, ["crash/object"]);
    const swept = await store.sweepTemp(0);
    assert.ok(swept >= paused.length, `swept ${swept} temp files, fewer than the paused kills`);
    assert.equal(tempFiles(), 0);
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

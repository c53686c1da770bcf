import assert from "node:assert/strict";
import * as path from "node:path";
import { writeFileAtomic } from "./atomic_write.ts";

/** The file-system calls a write makes, in order, observed by wrapping Deno's own. */
async function observe(fn: (steps: string[]) => Promise<void>): Promise<string[]> {
  const steps: string[] = [];
  const rename = Deno.rename;
  const sync = Deno.FsFile.prototype.sync;
  const write = Deno.FsFile.prototype.write;
  // deno-lint-ignore no-explicit-any
  const d = Deno as any;
  d.rename = (from: string | URL, to: string | URL) => {
    steps.push(`rename ${path.basename(String(to))}`);
    return rename(from, to);
  };
  Deno.FsFile.prototype.sync = function () {
    steps.push(this.statSync().isDirectory ? "sync dir" : "sync file");
    return sync.call(this);
  };
  Deno.FsFile.prototype.write = function (p: Uint8Array) {
    steps.push("write");
    return write.call(this, p);
  };
  try {
    await fn(steps);
  } finally {
    d.rename = rename;
    Deno.FsFile.prototype.sync = sync;
    Deno.FsFile.prototype.write = write;
  }
  return steps;
}

Deno.test("writeFileAtomic: write and fsync the temp, rename, then fsync the directory", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const file = path.join(dir, "state.json");
    await Deno.writeTextFile(file, "old");
    let seenAtRename: string | undefined;
    const steps = await observe(async (steps) => {
      // deno-lint-ignore no-explicit-any
      const d = Deno as any;
      const rename = d.rename;
      d.rename = async (from: string, to: string) => {
        seenAtRename = await Deno.readTextFile(to); // the target is untouched until the rename
        assert.equal(await Deno.readTextFile(from), "new", "the temp file is complete");
        return rename(from, to);
      };
      try {
        await writeFileAtomic(file, "new");
      } finally {
        d.rename = rename;
      }
      assert.ok(steps.length > 0);
    });
    assert.equal(seenAtRename, "old");
    assert.deepEqual(steps, ["write", "sync file", "rename state.json", "sync dir"]);
    assert.equal(await Deno.readTextFile(file), "new");
    assert.deepEqual([...Deno.readDirSync(dir)].map((e) => e.name), ["state.json"]);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("writeFileAtomic: not durable skips both fsyncs, the rename still comes last", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const file = path.join(dir, "status.json");
    const steps = await observe(() => writeFileAtomic(file, "x", { durable: false }));
    assert.deepEqual(steps, ["write", "rename status.json"]);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("writeFileAtomic: a write that fails before the rename leaves the old file and no temp", async () => {
  const dir = await Deno.makeTempDir();
  const write = Deno.FsFile.prototype.write;
  try {
    const file = path.join(dir, "f");
    await Deno.writeTextFile(file, "old");
    Deno.FsFile.prototype.write = () => Promise.reject(new Error("disk full"));
    await assert.rejects(writeFileAtomic(file, "new"), /disk full/);
    Deno.FsFile.prototype.write = write;
    assert.equal(await Deno.readTextFile(file), "old");
    assert.deepEqual([...Deno.readDirSync(dir)].map((e) => e.name), ["f"]);
  } finally {
    Deno.FsFile.prototype.write = write;
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("writeFileAtomic: mode and an explicit temporary path", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const file = path.join(dir, "key.pem");
    await writeFileAtomic(file, new Uint8Array([1, 2, 3]), {
      mode: 0o600,
      temp: path.join(dir, ".key.pem.tmp"),
    });
    assert.deepEqual(await Deno.readFile(file), new Uint8Array([1, 2, 3]));
    assert.equal(Deno.statSync(file).mode! & 0o777, 0o600);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

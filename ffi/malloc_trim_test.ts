import assert from "node:assert/strict";
import { trimMalloc } from "./malloc_trim.ts";

function rssKiB(): number {
  return Number(/VmRSS:\s+(\d+)/.exec(Deno.readTextFileSync("/proc/self/status"))![1]);
}

Deno.test("trimMalloc returns memory glibc kept after free() to the system", () => {
  // These tests run on glibc Linux with --allow-all.
  const libc = Deno.dlopen("libc.so.6", {
    malloc: { parameters: ["usize"], result: "pointer" },
    free: { parameters: ["pointer"], result: "void" },
    memset: { parameters: ["pointer", "i32", "usize"], result: "pointer" },
  });
  try {
    // 48 MiB in 1 KiB blocks (under any mmap threshold), touched; all freed but the last, which
    // pins the heap's top so glibc cannot shrink it on its own.
    const blocks: Deno.PointerValue[] = [];
    for (let i = 0; i < 48 * 1024; i++) {
      const p = libc.symbols.malloc(1024n);
      libc.symbols.memset(p, 1, 1024n);
      blocks.push(p);
    }
    for (const p of blocks.slice(0, -1)) libc.symbols.free(p);
    const before = rssKiB();
    assert.equal(trimMalloc(), true);
    const after = rssKiB();
    libc.symbols.free(blocks[blocks.length - 1]);
    assert.ok(before - after > 32 * 1024, `RSS ${before} KiB before the trim, ${after} KiB after`);
  } finally {
    libc.close();
  }
});

Deno.test("trimMalloc is a no-op, not an error, without FFI permission", async () => {
  const dir = await Deno.makeTempDir({ prefix: "podmin-malloc-trim-" });
  try {
    const script = `${dir}/probe.ts`;
    await Deno.writeTextFile(
      script,
      `import { trimMalloc } from ${JSON.stringify(import.meta.resolve("./malloc_trim.ts"))};\n` +
        "console.log(trimMalloc());\n",
    );
    const out = await new Deno.Command(Deno.execPath(), {
      args: ["run", "--no-check", "--no-prompt", "--allow-read", script],
      stdout: "piped",
      stderr: "piped",
    }).output();
    assert.ok(out.success, new TextDecoder().decode(out.stderr));
    assert.equal(new TextDecoder().decode(out.stdout).trim(), "false");
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

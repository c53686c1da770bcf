import assert from "node:assert/strict";
import { testWith } from "../tests/support/requirements.ts";
import { ALL_LAYOUTS, BPF_TC_HOOK, BPF_TC_OPTS, Struct } from "./structs.ts";

Deno.test("ffi structs: the layouts libbpf 1.1.2 needs, as measured", () => {
  assert.equal(BPF_TC_HOOK.size, 24);
  assert.deepEqual(
    Object.fromEntries(Object.entries(BPF_TC_HOOK.fields).map(([k, f]) => [k, f.offset])),
    { sz: 0, ifindex: 8, attach_point: 12, parent: 16 },
  );
  assert.equal(BPF_TC_OPTS.size, 32);
  assert.deepEqual(
    Object.fromEntries(Object.entries(BPF_TC_OPTS.fields).map(([k, f]) => [k, f.offset])),
    { sz: 0, prog_fd: 8, flags: 12, prog_id: 16, handle: 20, priority: 24 },
  );
  for (const l of ALL_LAYOUTS) {
    for (const [name, f] of Object.entries(l.fields)) {
      assert.ok(f.offset + f.size <= l.size, `${l.name}.${name} inside the struct`);
      assert.equal(f.offset % Math.min(f.size, 8), 0, `${l.name}.${name} aligned`);
    }
  }
});

Deno.test("ffi structs: fields are written little-endian at their offsets", () => {
  const s = new Struct(BPF_TC_OPTS).set("sz", 32).set("prog_fd", 7).set("handle", 0x504d)
    .set("priority", 1);
  assert.equal(s.bytes.length, 32);
  assert.deepEqual([...s.bytes.subarray(0, 8)], [32, 0, 0, 0, 0, 0, 0, 0]);
  assert.deepEqual([...s.bytes.subarray(8, 12)], [7, 0, 0, 0]);
  assert.deepEqual([...s.bytes.subarray(20, 24)], [0x4d, 0x50, 0, 0]);
  assert.equal(s.get("handle"), 0x504d);
  assert.equal(s.get("prog_id"), 0);
  s.set("prog_fd", -1);
  assert.equal(s.getInt32("prog_fd"), -1);
});

testWith(
  "ffi structs: every offset and size equals clang's offsetof/sizeof from the C headers",
  { tools: ["clang"] },
  async () => {
    const dir = await Deno.makeTempDir({ prefix: "podmin-structs-" });
    try {
      const headers = [...new Set(ALL_LAYOUTS.map((l) => l.header))];
      const lines = [
        "#include <stdio.h>",
        "#include <stddef.h>",
        ...headers.map((h) => `#include <${h}>`),
        "int main(void) {",
      ];
      for (const l of ALL_LAYOUTS) {
        lines.push(`  printf("${l.name} %zu\\n", sizeof(struct ${l.name}));`);
        for (const name of Object.keys(l.fields)) {
          lines.push(
            `  printf("${l.name}.${name} %zu %zu\\n", offsetof(struct ${l.name}, ${name}), sizeof(((struct ${l.name} *)0)->${name}));`,
          );
        }
      }
      lines.push("  return 0;", "}");
      await Deno.writeTextFile(`${dir}/layouts.c`, lines.join("\n"));
      const cc = await new Deno.Command("clang", {
        args: ["-o", `${dir}/layouts`, `${dir}/layouts.c`],
        stderr: "piped",
      }).output();
      assert.ok(cc.success, new TextDecoder().decode(cc.stderr));
      const out = new TextDecoder().decode(
        (await new Deno.Command(`${dir}/layouts`, { stdout: "piped" }).output()).stdout,
      );
      const measured = new Map(
        out.trim().split("\n").map((l) => {
          const [k, ...v] = l.split(" ");
          return [k, v.map(Number)];
        }),
      );
      for (const l of ALL_LAYOUTS) {
        if (l.name === "bpf_object_open_opts") {
          // We declare only the leading fields and pass a shorter sz; the size may grow.
          assert.ok(measured.get(l.name)![0] >= 16, l.name);
        } else {
          assert.equal(measured.get(l.name)![0], l.size, `sizeof(struct ${l.name})`);
        }
        for (const [name, f] of Object.entries(l.fields)) {
          assert.deepEqual(
            measured.get(`${l.name}.${name}`),
            [f.offset, f.size],
            `${l.name}.${name}`,
          );
        }
      }
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  },
);

/**
 * The embedded object stays in step with its sources: the recorded source
 * hash matches the files, a rebuild reproduces the committed module byte for
 * byte, and the map layouts the agent encodes match the object's BTF.
 */

import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import * as path from "node:path";
import { fileURLToPath } from "node:url";
import { OFFSETS, PROGRAMS, SIZES, SOCK_PROGRAMS } from "../agent/dataplane/maps.ts";
import { STAT_NAMES } from "../agent/dataplane/stats_map.ts";
import { BpfObject } from "../ffi/bpf_object.ts";
import { testWith } from "../tests/support/requirements.ts";
import {
  DATAPLANE_OBJECT_SHA256,
  DATAPLANE_SOURCE_SHA256,
  dataplaneObject,
} from "./dataplane_object.ts";
import { dataplaneSourceHash } from "./source_hash.ts";

interface BtfMember {
  name: string;
  bits_offset: number;
}

interface BtfType {
  kind: string;
  name?: string;
  size?: number;
  members?: BtfMember[];
}

const root = path.join(path.dirname(fileURLToPath(import.meta.url)), "..");

Deno.test("dataplane object: the embedded object was built from the current sources", () => {
  const hash = dataplaneSourceHash((p) => Deno.readFileSync(path.join(root, p)));
  assert.equal(
    hash,
    DATAPLANE_SOURCE_SHA256,
    "bpf/dataplane.c, dataplane.h or build.sh changed: run bpf/build.sh and commit bpf/dataplane_object.ts",
  );
  const bytes = dataplaneObject();
  assert.equal(createHash("sha256").update(bytes).digest("hex"), DATAPLANE_OBJECT_SHA256);
  assert.deepEqual([...bytes.subarray(0, 4)], [0x7f, 0x45, 0x4c, 0x46], "an ELF object");
});

testWith(
  "dataplane object: a rebuild with clang reproduces bpf/dataplane_object.ts",
  { tools: ["clang", "llvm-strip"] },
  async () => {
    const out = await new Deno.Command("bash", {
      args: [path.join(root, "bpf/build.sh"), "--check"],
      stdout: "piped",
      stderr: "piped",
    }).output();
    const text = new TextDecoder().decode(out.stdout) + new TextDecoder().decode(out.stderr);
    assert.equal(out.code, 0, text);
    assert.match(text, /up to date/);
  },
);

Deno.test("dataplane object: maps and programs have the names and sizes the agent expects", () => {
  const obj = BpfObject.openMem(dataplaneObject());
  try {
    assert.deepEqual(
      obj.programNames().sort(),
      [...Object.values(PROGRAMS), ...Object.values(SOCK_PROGRAMS)].sort(),
    );
    const expected = {
      podmin_cfg: SIZES.cfg,
      podmin_svc: SIZES.svc,
      podmin_be: SIZES.be,
      podmin_ct: SIZES.ct,
      podmin_stats: SIZES.stats,
      podmin_sock_cfg: SIZES.sockCfg,
      podmin_sock: SIZES.sock,
    };
    assert.deepEqual(obj.mapNames().sort(), Object.keys(expected).sort());
    for (const [name, size] of Object.entries(expected)) {
      const shape = obj.mapShape(name);
      assert.equal(shape.keySize, size.key, `${name} key size`);
      assert.equal(shape.valueSize, size.value, `${name} value size`);
    }
    assert.equal(obj.mapShape("podmin_stats").maxEntries, STAT_NAMES.length);
  } finally {
    obj.close();
  }
});

testWith(
  "dataplane object: struct member offsets in BTF match the agent's encoders",
  { tools: ["bpftool"] },
  async () => {
    const file = await Deno.makeTempFile({ suffix: ".o" });
    try {
      await Deno.writeFile(file, dataplaneObject());
      const out = await new Deno.Command("bpftool", {
        args: ["-j", "btf", "dump", "file", file],
        stdout: "piped",
        stderr: "piped",
      }).output();
      assert.ok(out.success, new TextDecoder().decode(out.stderr));
      const btf = JSON.parse(new TextDecoder().decode(out.stdout)) as { types: BtfType[] };
      const sizes: Record<string, number> = {
        pm_cfg: SIZES.cfg.value,
        pm_svc_key: SIZES.svc.key,
        pm_svc_val: SIZES.svc.value,
        pm_be_key: SIZES.be.key,
        pm_be_val: SIZES.be.value,
        pm_ct_key: SIZES.ct.key,
        pm_ct_val: SIZES.ct.value,
        pm_sock_cfg: SIZES.sockCfg.value,
        pm_sock_key: SIZES.sock.key,
        pm_sock_val: SIZES.sock.value,
      };
      for (const [struct, fields] of Object.entries(OFFSETS)) {
        const t: BtfType | undefined = btf.types.find((x) =>
          x.kind === "STRUCT" && x.name === struct
        );
        assert.ok(t, `struct ${struct} in BTF`);
        assert.equal(t.size, sizes[struct], `sizeof(struct ${struct})`);
        for (const [field, offset] of Object.entries(fields)) {
          const m: BtfMember | undefined = t.members?.find((x) => x.name === field);
          assert.ok(m, `${struct}.${field}`);
          assert.equal(m.bits_offset / 8, offset, `offsetof(${struct}, ${field})`);
        }
      }
    } finally {
      await Deno.remove(file);
    }
  },
);

Deno.test("dataplane object: counter names follow enum pm_stat", () => {
  const header = Deno.readTextFileSync(path.join(root, "bpf/dataplane.h"));
  const entries = [...header.matchAll(/PM_STAT_([A-Z_]+)\s*=\s*(\d+)/g)]
    .filter(([, name]) => name !== "MAX")
    .map(([, name, n]) => [Number(n), name] as const)
    .sort((a, b) => a[0] - b[0]);
  const camel = (s: string) =>
    s.toLowerCase().replace(/_([a-z])/g, (_m: string, c: string) => c.toUpperCase());
  assert.deepEqual(entries.map(([n]) => n), entries.map((_, i) => i), "dense from 0");
  assert.deepEqual(entries.map(([, name]) => camel(name)), [...STAT_NAMES]);
  assert.match(header, new RegExp(`PM_STAT_MAX = ${STAT_NAMES.length},`));
});

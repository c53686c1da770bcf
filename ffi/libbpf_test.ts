import assert from "node:assert/strict";
import { dataplaneObject } from "../bpf/dataplane_object.ts";
import { testWith } from "../tests/support/requirements.ts";
import { mapInfo, programIdOfFd, programIds, programInfo } from "./bpf_info.ts";
import { BPF_NOEXIST } from "./bpf_map.ts";
import { BpfObject } from "./bpf_object.ts";
import { errnoName, errnoNumber } from "./errno.ts";
import { BpfError, libbpf } from "./libbpf.ts";
import { tcAttach, tcDetach, tcQuery } from "./tc.ts";

Deno.test("ffi errno: names of errno numbers, both signs, and unknown numbers", () => {
  assert.equal(errnoName(2), "ENOENT");
  assert.equal(errnoName(-17), "EEXIST");
  assert.equal(errnoName(524), "ENOTSUPP");
  assert.equal(errnoName(4007), "LIBBPF_ERRNO__VERIFY");
  assert.equal(errnoName(9999), "E9999");
  assert.equal(errnoNumber("EPERM"), 1);
  const err = new BpfError("bpf_map_lookup_elem", -2, { detail: "podmin_ct" });
  assert.equal(err.errno, "ENOENT");
  assert.equal(err.code, 2);
  assert.equal(err.name, "BpfError");
  assert.match(err.message, /bpf_map_lookup_elem \(podmin_ct\) failed: ENOENT/);
});

Deno.test("ffi libbpf: the library opens; optional symbols match its version", () => {
  const lib = libbpf();
  const [major, minor] = lib.version.split(".").map(Number);
  assert.equal(major, 1);
  // tcx arrived in libbpf 1.3; batch operations long before 1.0.
  assert.equal(lib.hasTcx, minor >= 3);
  assert.equal(lib.hasBatch, true);
});

Deno.test("ffi libbpf: a broken object fails with libbpf's errno name and log", () => {
  const bytes = dataplaneObject();
  bytes.fill(0, 0, 64); // destroy the ELF header
  assert.throws(() => BpfObject.openMem(bytes), (err: unknown) => {
    assert.ok(err instanceof BpfError);
    assert.equal(err.op, "bpf_object__open_mem");
    assert.match(err.errno, /^LIBBPF_ERRNO__|^E/);
    assert.ok(err.log.length > 0, "libbpf's message is captured");
    return true;
  });
});

testWith("ffi libbpf: load, map operations, batches and typed errors", { root: true }, () => {
  const obj = BpfObject.openMem(dataplaneObject(), { name: "ffi_test" });
  try {
    obj.setMaxEntries("podmin_ct", 4096);
    obj.load();
    const ct = obj.map("podmin_ct");
    assert.equal(ct.maxEntries, 4096);
    const key = (n: number) => {
      const k = new Uint8Array(40);
      new DataView(k.buffer).setUint32(0, n);
      return k;
    };
    const value = new Uint8Array(40).fill(7);
    assert.equal(ct.lookup(key(1)), undefined);
    ct.update(key(1), value);
    assert.deepEqual(ct.lookup(key(1)), value);
    assert.throws(() => ct.update(key(1), value, BPF_NOEXIST), (e: unknown) => {
      assert.ok(e instanceof BpfError);
      assert.equal(e.errno, "EEXIST");
      assert.equal(e.op, "bpf_map_update_elem");
      return true;
    });
    assert.throws(() => ct.update(key(1), new Uint8Array(8)), RangeError);
    assert.equal(ct.delete(key(1)), true);
    assert.equal(ct.delete(key(1)), false);

    // Batches (probed per map): 1,000 entries in, read back, deleted with gaps.
    assert.deepEqual(ct.batchSupport(), { lookup: true, update: true, delete: true });
    const n = 1000;
    const keys = new Uint8Array(n * 40);
    const values = new Uint8Array(n * 40);
    for (let i = 0; i < n; i++) {
      keys.set(key(i + 10), i * 40);
      values.fill(i % 251, i * 40, (i + 1) * 40);
    }
    ct.updateMany(keys, values);
    const entries = ct.entries();
    assert.equal(entries.length, n);
    assert.equal(ct.keys().length, n);
    const byKey = new Map(entries.map(([k, v]) => [new DataView(k.buffer).getUint32(0), v[0]]));
    assert.equal(byKey.get(10 + 500), 500 % 251);
    const del = new Uint8Array([...keys.subarray(0, 400), ...key(999999), ...keys.subarray(400)]);
    assert.equal(ct.deleteMany(del), n, "absent keys are skipped, all present ones deleted");
    assert.equal(ct.entries().length, 0);

    // An array map rejects an index past its end.
    const cfg = obj.map("podmin_cfg");
    const bad = new Uint8Array(4);
    bad[0] = 5;
    assert.throws(() => cfg.update(bad, new Uint8Array(40)), (e: unknown) => {
      assert.ok(e instanceof BpfError);
      assert.equal(e.errno, "E2BIG");
      return true;
    });
    // A per-CPU map value holds one 8-byte slot per possible CPU.
    const stats = obj.map("podmin_stats");
    assert.equal(stats.userValueSize % 8, 0);
    assert.ok(stats.lookup(new Uint8Array(4)));

    // Introspection by id sees the unpinned program and its maps.
    const prog = obj.program("podmin_ingress");
    const id = programIdOfFd(prog.fd);
    assert.ok(programIds().includes(id));
    const info = programInfo(id)!;
    assert.equal(info.name, "podmin_ingress");
    assert.equal(info.type, "sched_cls");
    const names = info.mapIds.map((m) => mapInfo(m)?.name).sort();
    assert.deepEqual(names, ["podmin_be", "podmin_cfg", "podmin_ct", "podmin_stats", "podmin_svc"]);
    assert.equal(programInfo(0x7fffffff), undefined);

    // tc on an interface that does not exist: typed errors, no side effects.
    const ghost = { ifindex: 0x7ffffff0, point: "ingress" as const, handle: 1, priority: 1 };
    assert.equal(tcQuery(ghost), undefined);
    assert.equal(tcDetach(ghost), false);
    assert.throws(() => tcAttach({ ...ghost, progFd: prog.fd }), (e: unknown) => {
      assert.ok(e instanceof BpfError);
      assert.equal(e.op, "bpf_tc_attach");
      assert.match(e.errno, /^E/);
      return true;
    });
    assert.throws(() => obj.map("no_such_map"), (e: unknown) => {
      assert.ok(e instanceof BpfError);
      assert.equal(e.errno, "ENOENT");
      return true;
    });
  } finally {
    obj.close();
  }
});

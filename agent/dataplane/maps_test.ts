import assert from "node:assert/strict";
import { ValidationError } from "../../core/kit/errors.ts";
import { parseIpv6, parseIpv6Prefix } from "../../core/model/ipv6.ts";
import { parseServiceSnapshot } from "./service_snapshot.ts";
import { decodeBeKey, decodeBeVal, encodeBeKey, encodeBeVal } from "./be_map.ts";
import { decodeCfg, encodeCfg } from "./cfg_map.ts";
import { decodeCt, encodeCtKey } from "./ct_map.ts";
import { compileSnapshot } from "./desired_state.ts";
import { SOCK_KEY, SOCK_VAL } from "./sock_map.ts";
import { sumPerCpu } from "./stats_map.ts";
import { decodeSvcKey, decodeSvcVal, encodeSvcKey, encodeSvcVal, formatSvcKey } from "./svc_map.ts";

Deno.test("dataplane maps: keys and values round-trip; ports are big-endian, ids host order", () => {
  const key = { vip: parseIpv6("fd00:504d::10"), port: 8080, proto: 6 };
  const kb = encodeSvcKey(key);
  assert.equal(kb.length, 20);
  assert.deepEqual([...kb.subarray(0, 4)], [0xfd, 0x00, 0x50, 0x4d]);
  assert.deepEqual([...kb.subarray(16, 20)], [0x1f, 0x90, 6, 0]);
  assert.deepEqual(decodeSvcKey(kb), key);
  assert.equal(formatSvcKey(key), "[fd00:504d::10]:8080/TCP");

  const vb = encodeSvcVal({ id: 258, count: 3 });
  assert.deepEqual([...vb], [2, 1, 0, 0, 3, 0, 0, 0]);
  assert.deepEqual(decodeSvcVal(vb), { id: 258, count: 3 });
  assert.deepEqual(decodeBeKey(encodeBeKey({ id: 7, slot: 9 })), { id: 7, slot: 9 });
  const be = { addr: parseIpv6("2600:1f14::1"), port: 53 };
  assert.deepEqual(decodeBeVal(encodeBeVal(be)), be);

  const tuple = {
    saddr: parseIpv6("fd00::1"),
    daddr: parseIpv6("fd00::2"),
    sport: 40000,
    dport: 80,
    proto: 17,
  };
  const ck = encodeCtKey(tuple);
  const cv = new Uint8Array(40);
  cv.set(ck.subarray(0, 36));
  cv[36] = 2;
  const e = decodeCt(ck, cv);
  assert.deepEqual(e.key, tuple);
  assert.equal(e.value.dir, 2);
  assert.equal(e.value.sport, 40000);
});

Deno.test("dataplane maps: the config carries the service CIDR as network and mask", () => {
  const c = encodeCfg(parseIpv6Prefix("fd00:504d::/112"));
  assert.deepEqual([...c.subarray(16, 32)], [...Array(14).fill(0xff), 0, 0]);
  assert.deepEqual(decodeCfg(c), { serviceCIDR: "fd00:504d::/112", version: 1 });
  assert.deepEqual(decodeCfg(encodeCfg(undefined)), { version: 1 });
  const pc = new Uint8Array(24);
  new DataView(pc.buffer).setBigUint64(0, 5n, true);
  new DataView(pc.buffer).setBigUint64(16, 7n, true);
  assert.equal(sumPerCpu(pc), 12n);
});

Deno.test("dataplane maps: compiling sorts backends into slots and checks capacity", () => {
  const snap = parseServiceSnapshot({
    apiVersion: "podmin.dev/v1",
    kind: "ServiceSnapshot",
    services: [{
      namespace: "a",
      name: "b",
      vip: "fd00:504d::1",
      ports: [{ port: 80, targetPort: 8080 }, { port: 53, protocol: "UDP" }],
      backends: ["fd00::3", "fd00::1", "fd00::2"],
    }],
  });
  const d = compileSnapshot(snap);
  assert.equal(d.ports.size, 2);
  assert.equal(d.slots, 6);
  const tcp = [...d.ports.values()].find((p) => p.key.proto === 6)!;
  assert.deepEqual(
    tcp.backends.map((b) => b.addr),
    [1n, 2n, 3n].map((n) => parseIpv6("fd00::") + n),
  );
  assert.ok(tcp.backends.every((b) => b.port === 8080));
  assert.equal(tcp.service, "a/b");
  assert.throws(
    () => compileSnapshot(snap, { services: 1, backends: 100, conntrack: 10 }),
    ValidationError,
  );
  assert.throws(
    () => compileSnapshot(snap, { services: 10, backends: 5, conntrack: 10 }),
    /6 backend slots exceed/,
  );
});

Deno.test("dataplane maps: socket entries round-trip; cookie host order, ports big-endian", () => {
  const key = { cookie: 0x0102030405060708n, addr: parseIpv6("fd00:a::11"), port: 5353 };
  const kb = SOCK_KEY.encode(key);
  assert.equal(kb.length, 32);
  assert.deepEqual([...kb.subarray(0, 8)], [8, 7, 6, 5, 4, 3, 2, 1]);
  assert.deepEqual([...kb.subarray(24, 32)], [0x14, 0xe9, 0, 0, 0, 0, 0, 0]);
  assert.deepEqual(SOCK_KEY.decode(kb), key);
  const val = { vip: parseIpv6("fd00:504d::10"), port: 53, proto: 17 };
  const vb = SOCK_VAL.encode(val);
  assert.deepEqual([...vb.subarray(16, 20)], [0, 53, 17, 0]);
  assert.deepEqual(SOCK_VAL.decode(vb), val);
});

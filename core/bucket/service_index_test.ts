import assert from "node:assert/strict";
import {
  allocateVip,
  emptyServiceIndex,
  parseServiceIndex,
  serializeServiceIndex,
} from "./service_index.ts";

const spec = `sha256:${"a".repeat(64)}`;

Deno.test("service index: VIPs are stable per name, unique, inside the range, never the network address", () => {
  const index = emptyServiceIndex("fd00:504d::/120"); // 256 addresses: 255 usable
  const first = allocateVip(index, { namespace: "default", name: "web" });
  assert.equal(allocateVip(index, { namespace: "default", name: "web" }), first, "deterministic");
  const seen = new Set<string>();
  for (let i = 0; i < 255; i++) {
    const vip = allocateVip(index, { namespace: "default", name: `s${i}` });
    assert.ok(!seen.has(vip));
    assert.notEqual(vip, "fd00:504d::");
    seen.add(vip);
    index.services.push({ namespace: "default", name: `s${i}`, spec, vip });
  }
  assert.throws(
    () => allocateVip(index, { namespace: "default", name: "one-too-many" }),
    /no free VIP/,
  );
  const back = parseServiceIndex(serializeServiceIndex(index));
  assert.equal(back.services.length, 255);
});

Deno.test("service index: duplicate VIPs or VIPs outside the range are rejected", () => {
  const index = emptyServiceIndex();
  index.services.push({ namespace: "a", name: "x", spec, vip: "fd00:504d::5" });
  index.services.push({ namespace: "a", name: "y", spec, vip: "fd00:504d::5" });
  assert.throws(() => parseServiceIndex(serializeServiceIndex(index)), /duplicate VIP/);
  index.services[1].vip = "fd00:1::5";
  assert.throws(() => parseServiceIndex(serializeServiceIndex(index)), /outside/);
  assert.throws(() => emptyServiceIndex("fd00::/48"), /between \/64 and \/120/);
});

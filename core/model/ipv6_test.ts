import assert from "node:assert/strict";
import { formatIpv6, parseIpv6, parseIpv6Prefix, prefixContains } from "./ipv6.ts";

Deno.test("ipv6: parse and canonical format round-trip", () => {
  for (
    const [input, canonical] of [
      ["2001:db8::1", "2001:db8::1"],
      ["2001:0db8:0000:0000:0000:0000:0000:0001", "2001:db8::1"],
      ["::", "::"],
      ["::1", "::1"],
      ["fd00:504d::", "fd00:504d::"],
      ["1:0:0:1:0:0:0:1", "1:0:0:1::1"],
      ["1:2:3:4:5:6:7:8", "1:2:3:4:5:6:7:8"],
      ["1:0:2:3:4:5:6:7", "1:0:2:3:4:5:6:7"],
    ]
  ) assert.equal(formatIpv6(parseIpv6(input)), canonical, input);
});

Deno.test("ipv6: invalid addresses and prefixes are rejected", () => {
  for (
    const bad of [
      "",
      "1::2::3",
      "12345::",
      "g::1",
      "1:2:3:4:5:6:7:8:9",
      "10.0.0.1",
      "::ffff:1.2.3.4",
    ]
  ) {
    assert.throws(() => parseIpv6(bad), /invalid IPv6 address/, bad);
  }
  assert.throws(() => parseIpv6Prefix("fd00::1/64"), /host bits set/);
  assert.throws(() => parseIpv6Prefix("fd00::/129"), /invalid IPv6 prefix/);
  const p = parseIpv6Prefix("fd00:504d::/112");
  assert.ok(prefixContains(p, parseIpv6("fd00:504d::ffff")));
  assert.ok(!prefixContains(p, parseIpv6("fd00:504d::1:0")));
});

import assert from "node:assert/strict";
import { parseIpv6, parseIpv6Prefix, prefixContains } from "../../core/model/ipv6.ts";
import { localDnsAddress } from "./node_dns.ts";

Deno.test("local DNS address: in the Pod prefix's /64, never inside the /80 the Pods use", () => {
  for (
    const [prefix, want] of [
      ["fd00:706d:6e::/80", "fd00:706d:6e:0:ffff::53"],
      ["fd00:706d:6e:1::/80", "fd00:706d:6e:1:ffff::53"],
      ["2600:1f18:4b2:aa00:1234::/80", "2600:1f18:4b2:aa00:ffff::53"],
      ["fd00:1:2:3:ffff::/80", "fd00:1:2:3:fffe::53"],
    ]
  ) {
    const got = localDnsAddress(prefix);
    assert.equal(got, want, prefix);
    assert.ok(!prefixContains(parseIpv6Prefix(prefix), parseIpv6(got)), `${got} outside ${prefix}`);
    const net64 = parseIpv6Prefix(prefix).network >> 64n;
    assert.equal(parseIpv6(got) >> 64n, net64, `${got} in the /64 of ${prefix}`);
  }
});

Deno.test("local DNS address: only for a /80", () => {
  assert.throws(() => localDnsAddress("fd00:706d:6e::/64"), /must be a \/80/);
  assert.throws(() => localDnsAddress("fd00:706d:6e::1/80"), /host bits set/);
});

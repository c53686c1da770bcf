import assert from "node:assert/strict";
import { parseIpv6Prefix } from "../../core/model/ipv6.ts";
import { type IpLink, type IpRoute, selectTargets } from "./interfaces.ts";

// Shapes as `ip -6 -j route show` and `ip -j link show` print them.
const links: IpLink[] = [
  { ifindex: 1, ifname: "lo", link_type: "loopback" },
  { ifindex: 2, ifname: "ens5", link_type: "ether" },
  { ifindex: 3, ifname: "ens6", link_type: "ether" },
  { ifindex: 7, ifname: "veth1a", link_type: "ether" },
  { ifindex: 8, ifname: "veth2b", link_type: "ether" },
  { ifindex: 9, ifname: "wg0", link_type: "none" },
  { ifindex: 10, ifname: "veth3c", link_type: "ether" },
];
const routes: IpRoute[] = [
  { dst: "2600:1f14:a:b:1::10", dev: "veth1a", metric: 1024, flags: [] },
  { dst: "2600:1f14:a:b:1::11", dev: "veth2b", metric: 1024, flags: ["linkdown"] },
  { dst: "2600:1f14:a:b:2::5", dev: "veth3c", metric: 1024, flags: [] }, // another node's prefix
  { dst: "2600:1f14:a:b::/64", dev: "ens6", protocol: "ra", metric: 256, flags: [] } as IpRoute,
  { dst: "fe80::/64", dev: "ens5", metric: 256, flags: [] },
  { type: "unreachable", dst: "2600:1f14:a:b:1::/80", dev: "lo", metric: 1024, flags: [] },
  { dst: "fd00:77::/64", dev: "wg0", metric: 1024, flags: [] },
  { dst: "default", gateway: "fe80::1", dev: "ens6", metric: 200, flags: [] },
  { dst: "default", gateway: "fe80::1", dev: "ens5", metric: 100, flags: [] },
];

Deno.test("dataplane interfaces: Pod veths, the Pod ENI and the lowest-metric default route", () => {
  const d = selectTargets({ routes, links, podPrefix: parseIpv6Prefix("2600:1f14:a:b:1::/80") });
  assert.deepEqual(d.targets, [
    { ifindex: 2, name: "ens5", roles: ["default"] },
    { ifindex: 3, name: "ens6", roles: ["eni"] },
    { ifindex: 7, name: "veth1a", roles: ["pod"] },
    { ifindex: 8, name: "veth2b", roles: ["pod"] },
  ]);
  assert.deepEqual(d.skipped, []);
});

Deno.test("dataplane interfaces: without a prefix only the default route; dead routes and non-Ethernet devices", () => {
  assert.deepEqual(selectTargets({ routes, links }).targets, [
    { ifindex: 2, name: "ens5", roles: ["default"] },
  ]);
  // A linkdown default loses to a live one even with a lower metric.
  const r2: IpRoute[] = [
    { dst: "default", dev: "ens5", metric: 1, flags: ["linkdown"] },
    { dst: "default", dev: "ens6", metric: 500, flags: [] },
  ];
  assert.deepEqual(selectTargets({ routes: r2, links }).targets.map((t) => t.name), ["ens6"]);
  // Multipath default: every next hop's device.
  const r3: IpRoute[] = [{
    dst: "default",
    metric: 10,
    nexthops: [{ dev: "ens5", gateway: "fe80::1" }, { dev: "ens6", gateway: "fe80::2" }],
  }];
  assert.deepEqual(selectTargets({ routes: r3, links }).targets.map((t) => t.name), [
    "ens5",
    "ens6",
  ]);
  // The ENI and default route on one device: one target with both roles.
  const r4: IpRoute[] = [
    { dst: "2600:1f14:a:b::/64", dev: "ens5", metric: 256 },
    { dst: "default", dev: "ens5", metric: 100 },
    { dst: "2600:1f14:a:b:1::/96", dev: "wg0", metric: 100 },
    { dst: "2600:1f14:a:b:1::99", dev: "gone0", metric: 100 },
  ];
  const d = selectTargets({
    routes: r4,
    links,
    podPrefix: parseIpv6Prefix("2600:1f14:a:b:1::/80"),
  });
  assert.deepEqual(d.targets, [{ ifindex: 2, name: "ens5", roles: ["eni", "default"] }]);
  assert.deepEqual(d.skipped, [
    { name: "wg0", reason: "link type none is not Ethernet" },
    { name: "gone0", reason: "no such link" },
  ]);
});

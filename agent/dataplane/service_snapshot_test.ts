import assert from "node:assert/strict";
import { ValidationError } from "../../core/kit/errors.ts";
import { emptyServiceSnapshot, parseServiceSnapshot } from "./service_snapshot.ts";

const good = () => ({
  apiVersion: "podmin.dev/v1",
  kind: "ServiceSnapshot",
  generation: 3,
  serviceCIDR: "fd00:504d::/112",
  services: [
    {
      namespace: "default",
      name: "web",
      vip: "FD00:504D:0::10",
      ports: [{ name: "http", port: 80, targetPort: 8080, protocol: "TCP" }, {
        port: 53,
        protocol: "UDP",
      }],
      backends: ["2600:1f14:0:0:1::10", "2600:1f14::2:0:0:11"],
    },
  ],
});

Deno.test("service snapshot: valid input is normalized", () => {
  const s = parseServiceSnapshot(good());
  assert.equal(s.services[0].vip, "fd00:504d::10");
  assert.deepEqual(s.services[0].ports, [
    { name: "http", port: 80, targetPort: 8080, protocol: "TCP" },
    { port: 53, targetPort: 53, protocol: "UDP" },
  ]);
  assert.deepEqual(s.services[0].backends, ["2600:1f14::1:0:0:10", "2600:1f14::2:0:0:11"]);
  assert.equal(s.generation, 3);
  assert.deepEqual(parseServiceSnapshot(emptyServiceSnapshot()).services, []);
  // A port defaults to TCP; a Service may have no ready backend.
  const t = good();
  t.services[0].ports = [{ port: 9 } as never];
  t.services[0].backends = [];
  assert.deepEqual(parseServiceSnapshot(t).services[0].ports, [
    { port: 9, targetPort: 9, protocol: "TCP" },
  ]);
});

Deno.test("service snapshot: every invalid field is rejected with its path", () => {
  const cases: [string, (s: ReturnType<typeof good>) => void, RegExp][] = [
    ["apiVersion", (s) => (s.apiVersion = "v2"), /apiVersion/],
    ["kind", (s) => (s.kind = "ServiceIndex"), /kind/],
    [
      "unknown top field",
      (s) => ((s as Record<string, unknown>).extra = 1),
      /unknown field "extra"/,
    ],
    ["generation", (s) => (s.generation = -1), /generation/],
    ["cidr syntax", (s) => (s.serviceCIDR = "fd00::/300"), /serviceCIDR/],
    ["cidr length", (s) => (s.serviceCIDR = "fd00::/48"), /serviceCIDR/],
    [
      "bad vip",
      (s) => (s.services[0].vip = "fd00::zz"),
      /services\[0\]\.vip: invalid IPv6 address/,
    ],
    ["ipv4 vip", (s) => (s.services[0].vip = "10.0.0.1"), /services\[0\]\.vip/],
    ["vip outside cidr", (s) => (s.services[0].vip = "fd00:1::10"), /outside serviceCIDR/],
    ["multicast vip", (s) => {
      s.serviceCIDR = undefined as never;
      s.services[0].vip = "ff02::1";
    }, /multicast/],
    ["bad name", (s) => (s.services[0].name = "Web"), /name must be a DNS label/],
    ["no ports", (s) => (s.services[0].ports = []), /ports must not be empty/],
    ["port 0", (s) => (s.services[0].ports[0].port = 0), /ports\[0\]\.port: 0 is not a port/],
    ["port 65536", (s) => (s.services[0].ports[0].targetPort = 65536), /targetPort: 65536/],
    ["port string", (s) => (s.services[0].ports[0].port = "80" as never), /port: "80"/],
    ["port float", (s) => (s.services[0].ports[0].port = 80.5), /port/],
    ["protocol", (s) => (s.services[0].ports[0].protocol = "SCTP"), /protocol must be TCP or UDP/],
    [
      "dup port",
      (s) => (s.services[0].ports[1] = { port: 80, protocol: "TCP" } as never),
      /duplicate 80\/TCP/,
    ],
    [
      "unknown port field",
      (s) => ((s.services[0].ports[0] as Record<string, unknown>).nodePort = 1),
      /nodePort/,
    ],
    [
      "bad backend",
      (s) => (s.services[0].backends[1] = "2600::1::2"),
      /backends\[1\]: invalid IPv6/,
    ],
    ["link-local backend", (s) => (s.services[0].backends[0] = "fe80::1"), /link-local/],
    ["loopback backend", (s) => (s.services[0].backends[0] = "::1"), /loopback/],
    ["dup backend", (s) => (s.services[0].backends[1] = "2600:1f14::1:0:0:10"), /duplicate/],
    ["backend in cidr", (s) => (s.services[0].backends[0] = "fd00:504d::99"), /inside serviceCIDR/],
    [
      "dup service",
      (s) => s.services.push({ ...s.services[0], vip: "fd00:504d::11" }),
      /duplicate default\/web/,
    ],
    [
      "dup vip",
      (s) => s.services.push({ ...s.services[0], name: "other" }),
      /also the VIP of default\/web/,
    ],
    [
      "backends not a list",
      (s) => (s.services[0].backends = "x" as never),
      /backends must be a list/,
    ],
  ];
  for (const [what, mutate, message] of cases) {
    const s = good();
    mutate(s);
    assert.throws(() => parseServiceSnapshot(s), (err: unknown) => {
      assert.ok(err instanceof ValidationError, what);
      assert.match(err.message, message, what);
      return true;
    }, what);
  }
  // A backend that is another Service's VIP (no serviceCIDR to catch it).
  const s = good();
  s.serviceCIDR = undefined as never;
  s.services.push({
    ...s.services[0],
    name: "b",
    vip: "fd00:504d::77",
    backends: ["fd00:504d::10"],
  });
  assert.throws(() => parseServiceSnapshot(s), /is the VIP of default\/web/);
});

/**
 * The machine harness's "VPC": the network a run's machines share.
 *
 * - The namespace `<run>-vpc` holds the subnet's router: a bridge `vpc0` with the subnet's first
 *   addresses (IPv4 `10.0.1.1/24`, IPv6 `<ula>:1::1/64`) and `fe80::1`, forwarding on.
 * - Each machine has its own namespace `<run>-<machine>` with its ENIs, veths whose other ends are
 *   ports of `vpc0`: `ens5` (device 0, the node ENI: an IPv4 and an IPv6 address) and, for a node,
 *   `ens6` (device 1, the Pod ENI: an IPv6 address; its delegated /80 is routed to it by the VPC).
 * - A spare ENI (a NAT64 instance's stable ENI) exists in the VPC before it is attached;
 *   `plug` hot-plugs it into a running machine as `ens<5 + device>` when the IMDS emulator
 *   answers its AttachNetworkInterface, with what the AMI's hot-plug DHCP and the router
 *   advertisements would give: its addresses and an IPv6 default route.
 * - A host link (`<run>h` in the host's namespace ↔ `uplink` in the VPC) carries the machines'
 *   traffic to the test's servers, masqueraded: the host needs no route to the subnet.
 * - IMDS: inside the VPC, a machine's requests to `169.254.169.254:80` and `[fd00:ec2::254]:80`
 *   are translated (nftables DNAT, matched on the machine's addresses) to relays on the host link
 *   in front of that machine's own IMDSv2 emulator on loopback.
 *
 * Stand-ins for what only AWS provides, and why: the ENI attachment is a veth made before boot;
 * the addresses and default routes the VPC's DHCP and router advertisements would give are set by
 * the harness before boot (they survive a machine's reboot: its namespace stays); the delegated
 * prefix is assigned at launch (no AssignIpv6Addresses call); IMDS is the emulator; a route table
 * entry is a route in the VPC's namespace.
 */

import { mustRun, runCommand } from "./command.ts";
import type { BoxRun } from "./box_run.ts";
import { relayTcp, type TcpRelay } from "./tcp_relay.ts";

/** One ENI of a machine. */
export interface MachineEni {
  /** The interface name inside the machine. */
  interface: string;
  mac: string;
  ipv6: string;
  interfaceId: string;
  deviceNumber: number;
}

/** A machine's place in the VPC. */
export interface MachineNetwork {
  /** The machine's short name. */
  name: string;
  /** The machine's network namespace (`ip netns` name) and its path. */
  netns: string;
  netnsPath: string;
  node: MachineEni & { ipv4: string };
  /** The Pod ENI (a node's; a NAT instance has none). */
  pod?: MachineEni & { prefix: string };
}

/** An ENI of the VPC not attached to any machine yet (no interface name nor device number). */
export interface SpareEni {
  mac: string;
  ipv4: string;
  ipv6: string;
  interfaceId: string;
}

/** A host-side endpoint reachable from the machines. */
export interface Exposed {
  /** `http://[<host link address>]:<port>` */
  url: string;
  close(): Promise<void>;
}

/** A run's VPC. */
export interface Vpc {
  netns: string;
  /** The subnet's IPv6 /64 and IPv4 /24. */
  subnet6: string;
  subnet4: string;
  /** The VPC's IPv6 block (a /56 holding the subnet, as Amazon provides one). */
  block6: string;
  /** Makes a loopback server reachable from the machines (a relay on the host link). */
  expose(port: number): Exposed;
  /**
   * Creates machine `name`'s namespace and ENIs (`index` picks its addresses, 0-99): the node ENI
   * and, unless `podEni` is false, the Pod ENI.
   */
  attach(name: string, index: number, o?: { podEni?: boolean }): Promise<MachineNetwork>;
  /** The addresses of spare ENI `index` (0-99), in the subnet. */
  spareEni(index: number): SpareEni;
  /**
   * Hot-plugs `eni` into the running machine as device `device` (`ens<5 + device>`): a port of
   * the VPC's bridge, then its addresses and an IPv6 default route via the router (metric 2048,
   * below the node ENI's). Returns the interface name.
   */
  plug(machine: MachineNetwork, eni: SpareEni, device: number): Promise<string>;
  /** A route table entry: `cidr` (IPv6) routed to the VPC address `via` (an ENI's). */
  route(cidr: string, via: string): Promise<void>;
  /** Routes the machine's IMDS requests to the emulator listening on loopback `imdsPort`. */
  routeImds(machine: MachineNetwork, imdsPort: number): Promise<void>;
  /** Stops the relays (the run's clean-up removes the namespaces and links). */
  close(): Promise<void>;
}

const ip = (args: string[]) => mustRun("ip", args);

function checkIndex(index: number): void {
  if (!Number.isInteger(index) || index < 0 || index > 99) {
    throw new RangeError(`machine index ${index} is not 0-99`);
  }
}

function randomBytes(n: number): number[] {
  return [...crypto.getRandomValues(new Uint8Array(n))];
}

/** Creates the run's VPC namespace, router and host link. */
export async function createVpc(run: BoxRun): Promise<Vpc> {
  const netns = `${run.id}-vpc`;
  const r = randomBytes(7);
  const hex = (a: number, b: number) => ((a << 8) | b).toString(16);
  const ula = `fd${r[0].toString(16).padStart(2, "0")}:${hex(r[1], r[2])}:${hex(r[3], r[4])}`;
  const subnet6 = `${ula}:1::/64`;
  const block6 = `${ula}::/56`;
  const subnet4 = "10.0.1.0/24";
  const link4 = `198.19.${r[5]}.${(r[6] % 64) * 4}`;
  const host4 = link4.replace(/\d+$/, (n) => String(Number(n) + 1));
  const vpc4 = link4.replace(/\d+$/, (n) => String(Number(n) + 2));
  const host6 = `${ula}:ffff::1`;
  const vpc6 = `${ula}:ffff::2`;
  const hostLink = `${run.id}h`;
  const inVpc = (args: string[]) => ip(["-n", netns, ...args]);
  const id = (n: number) => n.toString(16).padStart(2, "0");
  /** A veth: `port` on the VPC's bridge, its peer the ENI's interface in namespace `ns`, up. */
  const bridged = async (
    ns: string,
    port: string,
    eni: { interface: string; mac: string; ipv6: string },
  ) => {
    await inVpc([
      "link",
      "add",
      port,
      "type",
      "veth",
      "peer",
      "name",
      eni.interface,
      "address",
      eni.mac,
      "netns",
      ns,
    ]);
    await inVpc(["link", "set", port, "master", "vpc0", "up"]);
    await ip(["-n", ns, "link", "set", eni.interface, "up"]);
    await ip(["-n", ns, "addr", "add", `${eni.ipv6}/64`, "dev", eni.interface, "nodad"]);
  };
  /** A second ENI's router advertisement: a default route below the node ENI's. */
  const secondRouter = (ns: string, iface: string) =>
    ip([
      "-n",
      ns,
      "-6",
      "route",
      "add",
      "default",
      "via",
      "fe80::1",
      "dev",
      iface,
      "metric",
      "2048",
    ]);

  await ip(["netns", "add", netns]);
  await inVpc(["link", "set", "lo", "up"]);
  for (const key of ["net.ipv4.ip_forward=1", "net.ipv6.conf.all.forwarding=1"]) {
    await mustRun("ip", ["netns", "exec", netns, "sysctl", "-q", "-w", key]);
  }
  await inVpc(["link", "add", "vpc0", "type", "bridge"]);
  await inVpc(["addr", "add", "10.0.1.1/24", "dev", "vpc0"]);
  await inVpc(["addr", "add", `${ula}:1::1/64`, "dev", "vpc0", "nodad"]);
  await inVpc(["addr", "add", "fe80::1/64", "dev", "vpc0", "nodad"]);
  await inVpc(["link", "set", "vpc0", "up"]);

  await ip(["link", "add", hostLink, "type", "veth", "peer", "name", "uplink", "netns", netns]);
  await ip(["addr", "add", `${host4}/30`, "dev", hostLink]);
  await ip(["addr", "add", `${host6}/64`, "dev", hostLink, "nodad"]);
  await ip(["link", "set", hostLink, "up"]);
  await inVpc(["addr", "add", `${vpc4}/30`, "dev", "uplink"]);
  await inVpc(["addr", "add", `${vpc6}/64`, "dev", "uplink", "nodad"]);
  await inVpc(["link", "set", "uplink", "up"]);
  await inVpc(["route", "add", "default", "via", host4]);
  await inVpc(["-6", "route", "add", "default", "via", host6]);
  await mustRun("ip", [
    "netns",
    "exec",
    netns,
    "nft",
    [
      "add table inet box",
      "add chain inet box prerouting { type nat hook prerouting priority dstnat; }",
      "add chain inet box postrouting { type nat hook postrouting priority srcnat; }",
      'add rule inet box postrouting oifname "uplink" masquerade',
    ].join("; "),
  ]);

  const relays: TcpRelay[] = [];
  const relay = (hostname: string, port: number) => {
    const r = relayTcp({ hostname }, { hostname: "127.0.0.1", port });
    relays.push(r);
    return r;
  };
  return {
    netns,
    subnet6,
    subnet4,
    block6,
    expose(port) {
      const r = relay(host6, port);
      return { url: `http://[${host6}]:${r.port}`, close: () => r.close() };
    },
    async attach(name, index, o = {}) {
      checkIndex(index);
      const ns = `${run.id}-${name}`;
      await ip(["netns", "add", ns]);
      await ip(["-n", ns, "link", "set", "lo", "up"]);
      const node = {
        interface: "ens5",
        mac: `02:00:5e:00:${id(index)}:0a`,
        ipv4: `10.0.1.${10 + index}`,
        ipv6: `${ula}:1::${(0xa00 + index).toString(16)}`,
        interfaceId: `eni-0${id(index)}aaaaaaaaaaaaa0`,
        deviceNumber: 0,
      };
      const pod = {
        interface: "ens6",
        mac: `02:00:5e:00:${id(index)}:0b`,
        ipv6: `${ula}:1::${(0xb00 + index).toString(16)}`,
        prefix: `${ula}:1:${(0x100 + index).toString(16)}::/80`,
        interfaceId: `eni-0${id(index)}bbbbbbbbbbbbb0`,
        deviceNumber: 1,
      };
      await bridged(ns, `${name}n`, node);
      // What the VPC's DHCP and router advertisements give on EC2: addresses, default routes.
      await ip(["-n", ns, "addr", "add", `${node.ipv4}/24`, "dev", "ens5"]);
      await ip(["-n", ns, "route", "add", "default", "via", "10.0.1.1", "dev", "ens5"]);
      await ip(["-n", ns, "-6", "route", "add", "default", "via", "fe80::1", "dev", "ens5"]);
      const network = { name, netns: ns, netnsPath: `/run/netns/${ns}`, node };
      if (o.podEni === false) return network;
      await bridged(ns, `${name}p`, pod);
      await secondRouter(ns, pod.interface);
      // The VPC routes the delegated prefix to the Pod ENI.
      await inVpc(["-6", "route", "add", pod.prefix, "via", pod.ipv6, "dev", "vpc0"]);
      return { ...network, pod };
    },
    spareEni(index) {
      checkIndex(index);
      return {
        mac: `02:00:5e:00:${id(index)}:0c`,
        ipv4: `10.0.1.${110 + index}`,
        ipv6: `${ula}:1::${(0xc00 + index).toString(16)}`,
        interfaceId: `eni-0${id(index)}ccccccccccccc0`,
      };
    },
    async plug(m, eni, device) {
      const iface = `ens${5 + device}`;
      await bridged(m.netns, `${m.name}d${device}`, { interface: iface, ...eni });
      await ip(["-n", m.netns, "addr", "add", `${eni.ipv4}/24`, "dev", iface]);
      await secondRouter(m.netns, iface);
      return iface;
    },
    async route(cidr, via) {
      await inVpc(["-6", "route", "add", cidr, "via", via, "dev", "vpc0"]);
    },
    async routeImds(m, imdsPort) {
      const r4 = relay(host4, imdsPort);
      const r6 = relay(host6, imdsPort);
      const sources6 = [m.node.ipv6, ...m.pod ? [m.pod.ipv6] : []].join(", ");
      await mustRun("ip", [
        "netns",
        "exec",
        netns,
        "nft",
        [
          `add rule inet box prerouting ip saddr ${m.node.ipv4} ip daddr 169.254.169.254 tcp dport 80 dnat ip to ${host4}:${r4.port}`,
          `add rule inet box prerouting ip6 saddr { ${sources6} } ip6 daddr fd00:ec2::254 tcp dport 80 dnat ip6 to [${host6}]:${r6.port}`,
        ].join("; "),
      ]);
    },
    async close() {
      await Promise.all(relays.map((r) => r.close()));
      relays.length = 0;
      await runCommand("ip", ["link", "del", hostLink]);
    },
  };
}

/**
 * The dataplane programs run by the kernel on crafted packets
 * (BPF_PROG_TEST_RUN): translations, conntrack, drops and checksums,
 * independent of any interface. Root only; nothing is attached.
 */

import assert from "node:assert/strict";
import { Dataplane } from "../agent/dataplane/dataplane.ts";
import { parseServiceSnapshot } from "../agent/dataplane/service_snapshot.ts";
import { formatIpv6, parseIpv6 } from "../core/model/ipv6.ts";
import { progTestRun } from "../ffi/bpf_object.ts";
import { testWith } from "../tests/support/requirements.ts";

const PASS = -1; // TC_ACT_UNSPEC
const DROP = 2; // TC_ACT_SHOT
const REDIRECT = 7; // TC_ACT_REDIRECT
const TCP = 6, UDP = 17, ICMP6 = 58, HOPOPTS = 0, FRAGMENT = 44, ROUTING = 43;

const CLIENT = "fd00:a::1:0:0:10";
const B1 = "fd00:a::1:0:0:11";
const B2 = "fd00:a::1:0:0:12";
const B3 = "fd00:a::2:0:0:13";
const VIP = "fd00:504d::10";
const SELF_VIP = "fd00:504d::20";
const EMPTY_VIP = "fd00:504d::40";
const TWIN_VIP = "fd00:504d::50";
const ROUTER = "fd00:a::1";

function addr16(a: string): Uint8Array {
  const v = parseIpv6(a);
  const out = new Uint8Array(16);
  for (let i = 0; i < 16; i++) out[i] = Number((v >> BigInt(8 * (15 - i))) & 0xffn);
  return out;
}

function addrOf(b: Uint8Array, off: number): string {
  let v = 0n;
  for (let i = 0; i < 16; i++) v = (v << 8n) | BigInt(b[off + i]);
  return formatIpv6(v);
}

/** One's complement sum of 16-bit words. */
function sum16(parts: Uint8Array[]): number {
  let s = 0;
  for (const p of parts) {
    for (let i = 0; i < p.length; i += 2) s += (p[i] << 8) | (i + 1 < p.length ? p[i + 1] : 0);
  }
  while (s > 0xffff) s = (s & 0xffff) + (s >>> 16);
  return s;
}

function pseudo(src: Uint8Array, dst: Uint8Array, len: number, nh: number): Uint8Array {
  const p = new Uint8Array(40);
  p.set(src, 0);
  p.set(dst, 16);
  new DataView(p.buffer).setUint32(32, len);
  p[39] = nh;
  return p;
}

/** An L4 segment (TCP, UDP or ICMPv6) with a correct checksum. */
function l4(proto: number, src: string, dst: string, body: Uint8Array): Uint8Array {
  const seg = body.slice();
  const off = proto === TCP ? 16 : proto === UDP ? 6 : 2;
  seg[off] = seg[off + 1] = 0;
  let c = 0xffff - sum16([pseudo(addr16(src), addr16(dst), seg.length, proto), seg]);
  if (c === 0 && proto === UDP) c = 0xffff;
  new DataView(seg.buffer).setUint16(off, c);
  return seg;
}

function tcpHeader(sport: number, dport: number, payload = "hello"): Uint8Array {
  const data = new TextEncoder().encode(payload);
  const h = new Uint8Array(20 + data.length);
  const d = new DataView(h.buffer);
  d.setUint16(0, sport);
  d.setUint16(2, dport);
  d.setUint32(4, 1000);
  h[12] = 5 << 4;
  h[13] = 0x18; // PSH, ACK
  d.setUint16(14, 65535);
  h.set(data, 20);
  return h;
}

function udpHeader(sport: number, dport: number, payload = "dns?"): Uint8Array {
  const data = new TextEncoder().encode(payload);
  const h = new Uint8Array(8 + data.length);
  const d = new DataView(h.buffer);
  d.setUint16(0, sport);
  d.setUint16(2, dport);
  d.setUint16(4, h.length);
  h.set(data, 8);
  return h;
}

/** IPv6 header + payload (ext headers included in `payload`, `nh` the first). */
function ipv6(src: string, dst: string, nh: number, payload: Uint8Array): Uint8Array {
  const p = new Uint8Array(40 + payload.length);
  p[0] = 0x60;
  new DataView(p.buffer).setUint16(4, payload.length);
  p[6] = nh;
  p[7] = 64;
  p.set(addr16(src), 8);
  p.set(addr16(dst), 24);
  p.set(payload, 40);
  return p;
}

function eth(ip: Uint8Array): Uint8Array {
  const f = new Uint8Array(14 + ip.length);
  f.set([2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2, 0x86, 0xdd]);
  f.set(ip, 14);
  return f;
}

function tcpPacket(src: string, sport: number, dst: string, dport: number): Uint8Array {
  return eth(ipv6(src, dst, TCP, l4(TCP, src, dst, tcpHeader(sport, dport))));
}

function udpPacket(src: string, sport: number, dst: string, dport: number): Uint8Array {
  return eth(ipv6(src, dst, UDP, l4(UDP, src, dst, udpHeader(sport, dport))));
}

/** Parsed view of an output frame: addresses, ports, checksum validity. */
interface View {
  src: string;
  dst: string;
  proto: number;
  l4off: number;
  sport: number;
  dport: number;
  checksumOk: boolean;
}

function view(frame: Uint8Array): View {
  const ip = frame.subarray(14);
  let nh = ip[6];
  let off = 40;
  while (nh === HOPOPTS || nh === 60) {
    const len = (ip[off + 1] + 1) * 8;
    nh = ip[off];
    off += len;
  }
  const seg = ip.subarray(off, 40 + new DataView(ip.buffer, ip.byteOffset).getUint16(4));
  const d = new DataView(seg.buffer, seg.byteOffset);
  const src = ip.subarray(8, 24), dst = ip.subarray(24, 40);
  return {
    src: addrOf(ip, 8),
    dst: addrOf(ip, 24),
    proto: nh,
    l4off: 14 + off,
    sport: nh === ICMP6 ? 0 : d.getUint16(0),
    dport: nh === ICMP6 ? 0 : d.getUint16(2),
    checksumOk: sum16([pseudo(src, dst, seg.length, nh), seg]) === 0xffff,
  };
}

const SNAPSHOT = {
  apiVersion: "podmin.dev/v1",
  kind: "ServiceSnapshot",
  serviceCIDR: "fd00:504d::/112",
  services: [
    {
      namespace: "default",
      name: "web",
      vip: VIP,
      ports: [
        { port: 80, targetPort: 8080, protocol: "TCP" },
        { port: 53, targetPort: 5353, protocol: "UDP" },
      ],
      backends: [B1, B2, B3],
    },
    {
      namespace: "default",
      name: "self",
      vip: SELF_VIP,
      ports: [{ port: 81, targetPort: 8081, protocol: "TCP" }],
      backends: [CLIENT],
    },
    {
      namespace: "default",
      name: "empty",
      vip: EMPTY_VIP,
      ports: [
        { port: 80, targetPort: 8080, protocol: "TCP" },
        { port: 53, targetPort: 5353, protocol: "UDP" },
      ],
      backends: [],
    },
    {
      namespace: "default",
      name: "twin",
      vip: TWIN_VIP,
      ports: [{ port: 80, targetPort: 8080, protocol: "TCP" }],
      backends: [B1],
    },
  ],
};

async function withDataplane(
  fn: (
    run: (f: Uint8Array, egress?: boolean) => { retval: number; out: Uint8Array },
    dp: Dataplane,
  ) => Promise<void> | void,
) {
  // No interfaces: programs are only loaded, never attached.
  const dp = new Dataplane({ discover: () => Promise.resolve({ targets: [], skipped: [] }) });
  try {
    await dp.apply(parseServiceSnapshot(SNAPSHOT));
    const fds = dp.programFds()!;
    await fn((frame, egress = false) => {
      const r = progTestRun(egress ? fds.egress : fds.ingress, frame);
      return { retval: r.retval, out: r.dataOut };
    }, dp);
  } finally {
    await dp.close();
  }
}

const REQS = { root: true };

testWith(
  "dataplane program: TCP to a VIP goes to a backend, replies come from the VIP, checksums stay valid",
  REQS,
  async () => {
    await withDataplane((run, dp) => {
      const seen = new Set<string>();
      for (let sport = 40000; sport < 40060; sport++) {
        const fwd = run(tcpPacket(CLIENT, sport, VIP, 80));
        assert.equal(fwd.retval, PASS);
        const v = view(fwd.out);
        assert.ok([B1, B2, B3].includes(v.dst), `backend ${v.dst}`);
        assert.equal(v.dport, 8080);
        assert.equal(v.src, CLIENT);
        assert.equal(v.sport, sport);
        assert.ok(v.checksumOk, "forward TCP checksum");
        seen.add(v.dst);

        // The same flow again: conntrack keeps it on the same backend.
        assert.equal(view(run(tcpPacket(CLIENT, sport, VIP, 80)).out).dst, v.dst);

        const rep = run(tcpPacket(v.dst, 8080, CLIENT, sport));
        assert.equal(rep.retval, PASS);
        const r = view(rep.out);
        assert.equal(r.src, VIP);
        assert.equal(r.sport, 80);
        assert.equal(r.dst, CLIENT);
        assert.equal(r.dport, sport);
        assert.ok(r.checksumOk, "reply TCP checksum");
      }
      assert.deepEqual([...seen].sort(), [B1, B2, B3].sort(), "60 flows reach all three backends");
      const ct = dp.conntrack();
      assert.equal(ct.filter((e) => e.value.dir === 1).length, 60);
      assert.equal(ct.filter((e) => e.value.dir === 2).length, 60);
    });
  },
);

testWith("dataplane program: UDP translation keeps the UDP checksum valid", REQS, async () => {
  await withDataplane((run) => {
    for (let sport = 50000; sport < 50020; sport++) {
      const v = view(run(udpPacket(CLIENT, sport, VIP, 53)).out);
      assert.equal(v.dport, 5353);
      assert.ok(v.checksumOk, "forward UDP checksum");
      const r = view(run(udpPacket(v.dst, 5353, CLIENT, sport)).out);
      assert.equal(r.src, VIP);
      assert.equal(r.sport, 53);
      assert.ok(r.checksumOk, "reply UDP checksum");
    }
  });
});

testWith("dataplane program: hairpin rewrites the source to the VIP both ways", REQS, async () => {
  await withDataplane((run) => {
    const f = view(run(tcpPacket(CLIENT, 33333, SELF_VIP, 81)).out);
    assert.equal(f.dst, CLIENT);
    assert.equal(f.dport, 8081);
    assert.equal(f.src, SELF_VIP, "source becomes the VIP so the reply leaves the Pod");
    assert.ok(f.checksumOk);
    const r = view(run(tcpPacket(CLIENT, 8081, SELF_VIP, 33333)).out);
    assert.equal(r.src, SELF_VIP);
    assert.equal(r.sport, 81);
    assert.equal(r.dst, CLIENT);
    assert.equal(r.dport, 33333);
    assert.ok(r.checksumOk);
  });
});

testWith(
  "dataplane program: a reply tuple owned by another flow gets a new source port",
  REQS,
  async () => {
    await withDataplane((run) => {
      // Same client port to two VIPs whose only backend is B1:8080: the
      // second flow's reply tuple would collide with the first's. Try client
      // ports until the web VIP hashes one onto B1 (one in three does).
      let collided = 0;
      for (let sport = 45000; sport < 45060 && collided < 3; sport++) {
        const a = view(run(tcpPacket(CLIENT, sport, TWIN_VIP, 80)).out);
        assert.equal(a.sport, sport);
        const b = view(run(tcpPacket(CLIENT, sport, VIP, 80)).out);
        if (b.dst !== B1) continue;
        collided++;
        assert.notEqual(b.sport, sport, "remapped source port");
        assert.ok(b.checksumOk);
        const ra = view(run(tcpPacket(B1, 8080, CLIENT, sport)).out);
        assert.deepEqual([ra.src, ra.sport, ra.dport], [TWIN_VIP, 80, sport]);
        const rb = view(run(tcpPacket(B1, 8080, CLIENT, b.sport)).out);
        assert.deepEqual([rb.src, rb.sport, rb.dport], [VIP, 80, sport]);
        assert.ok(rb.checksumOk);
      }
      assert.equal(collided, 3, "collisions were exercised");
    });
  },
);

testWith(
  "dataplane program: extension headers, fragments, unknown ports and empty Services",
  REQS,
  async () => {
    await withDataplane((run) => {
      // Hop-by-hop options before TCP: translated, the header kept.
      const hop = new Uint8Array(8);
      hop[0] = TCP;
      hop[2] = 1; // PadN
      hop[3] = 4;
      const seg = l4(TCP, CLIENT, VIP, tcpHeader(41000, 80));
      const withHop = eth(ipv6(CLIENT, VIP, HOPOPTS, new Uint8Array([...hop, ...seg])));
      const h = run(withHop);
      assert.equal(h.retval, PASS);
      const hv = view(h.out);
      assert.equal(hv.dport, 8080);
      assert.ok(hv.checksumOk);
      assert.equal(h.out[14 + 6], HOPOPTS);

      // A fragment to a VIP cannot be translated: dropped.
      const frag = new Uint8Array(8);
      frag[0] = TCP;
      const fragged = eth(ipv6(CLIENT, VIP, FRAGMENT, new Uint8Array([...frag, ...seg])));
      assert.equal(run(fragged).retval, DROP);
      // A routing header to a VIP: dropped.
      const rh = new Uint8Array(8);
      rh[0] = TCP;
      assert.equal(
        run(eth(ipv6(CLIENT, VIP, ROUTING, new Uint8Array([...rh, ...seg])))).retval,
        DROP,
      );
      // The same fragment elsewhere: passed untouched.
      const other = eth(ipv6(CLIENT, B1, FRAGMENT, new Uint8Array([...frag, ...seg])));
      const o = run(other);
      assert.equal(o.retval, PASS);
      assert.deepEqual(o.out, other);

      // Unknown port on a VIP: dropped.
      assert.equal(run(tcpPacket(CLIENT, 41001, VIP, 443)).retval, DROP);
      assert.equal(run(udpPacket(CLIENT, 41001, VIP, 80)).retval, DROP);
      // Outside the service CIDR: untouched.
      const plain = tcpPacket(CLIENT, 41003, B2, 8080);
      const p = run(plain);
      assert.equal(p.retval, PASS);
      assert.deepEqual(p.out, plain);
      // The egress program never translates TCP/UDP.
      const e = run(tcpPacket(CLIENT, 41004, VIP, 80), true);
      assert.equal(e.retval, PASS);
      assert.equal(view(e.out).dst, VIP);
    });
  },
);

testWith(
  "dataplane program: a Service without backends refuses TCP and UDP with ICMPv6 port unreachable",
  REQS,
  async () => {
    await withDataplane((run) => {
      for (
        const sent of [
          tcpPacket(CLIENT, 41002, EMPTY_VIP, 80),
          syn(CLIENT, 41005, EMPTY_VIP),
          udpPacket(CLIENT, 41007, EMPTY_VIP, 53),
        ]
      ) {
        const r = run(sent);
        assert.equal(r.retval, REDIRECT, "sent back out of the interface it came in on");
        const out = r.out;
        assert.equal(out.length, 14 + 40 + 8 + 48);
        assert.deepEqual([...out.subarray(0, 6)], [...sent.subarray(6, 12)], "to the sender's MAC");
        assert.deepEqual([...out.subarray(6, 12)], [...sent.subarray(0, 6)]);
        const v = view(out);
        assert.deepEqual([v.src, v.dst, v.proto], [EMPTY_VIP, CLIENT, ICMP6]);
        assert.equal(out[14 + 7], 64, "hop limit");
        assert.deepEqual([out[v.l4off], out[v.l4off + 1]], [1, 4], "Destination Unreachable, Port");
        assert.ok(v.checksumOk, "ICMPv6 checksum");
        assert.deepEqual(
          [...out.subarray(v.l4off + 8)],
          [...sent.subarray(14, 14 + 48)],
          "quotes the IPv6 header, the ports and the TCP sequence",
        );
      }
      const u = run(udpPacket(CLIENT, 41006, EMPTY_VIP, 80));
      assert.equal(u.retval, DROP, "no UDP port 80 on it: unknown port, dropped");
    });
  },
);

/** A TCP SYN with options (a 40-byte header, as Linux sends). */
function syn(src: string, sport: number, dst: string): Uint8Array {
  const h = new Uint8Array(40);
  const d = new DataView(h.buffer);
  d.setUint16(0, sport);
  d.setUint16(2, 80);
  d.setUint32(4, 123456789);
  h[12] = 10 << 4;
  h[13] = 0x02; // SYN
  d.setUint16(14, 64800);
  h.set([2, 4, 0x05, 0xa0], 20); // MSS 1440
  return eth(ipv6(src, dst, TCP, l4(TCP, src, dst, h)));
}

function packetTooBig(from: string, to: string, quoted: Uint8Array): Uint8Array {
  const body = new Uint8Array(8 + quoted.length);
  body[0] = 2; // Packet Too Big
  new DataView(body.buffer).setUint32(4, 1280);
  body.set(quoted, 8);
  return eth(ipv6(from, to, ICMP6, l4(ICMP6, from, to, body)));
}

testWith(
  "dataplane program: ICMPv6 errors about translated packets are translated back",
  REQS,
  async () => {
    await withDataplane((run) => {
      for (const egress of [false, true]) {
        const sport = egress ? 42001 : 42000;
        const fwd = run(tcpPacket(CLIENT, sport, VIP, 80)).out;
        const backend = view(fwd).dst;
        // A router on the way to the backend answers with Packet Too Big,
        // quoting the translated packet (client -> backend:8080).
        const ptb = run(packetTooBig(ROUTER, CLIENT, fwd.subarray(14)), egress);
        assert.equal(ptb.retval, PASS);
        const outer = view(ptb.out);
        assert.equal(outer.proto, ICMP6);
        assert.equal(outer.src, ROUTER);
        assert.equal(outer.dst, CLIENT);
        assert.ok(outer.checksumOk, "ICMPv6 checksum");
        const inner = view(ptb.out.subarray(outer.l4off + 8 - 14));
        assert.equal(inner.dst, VIP, "the quoted packet is the one the client sent");
        assert.equal(inner.dport, 80);
        assert.equal(inner.src, CLIENT);
        assert.equal(inner.sport, sport);
        assert.ok(inner.checksumOk, "quoted TCP checksum");

        // The backend itself reporting (e.g. UDP port unreachable) appears to be the VIP.
        const fwdU = run(udpPacket(CLIENT, sport, VIP, 53)).out;
        const be = view(fwdU).dst;
        const unreach = packetTooBig(be, CLIENT, fwdU.subarray(14));
        unreach[14 + 40] = 1; // Destination Unreachable
        unreach[14 + 41] = 4; // port unreachable
        const fixed = l4(ICMP6, be, CLIENT, unreach.subarray(54));
        unreach.set(fixed, 54);
        const u = run(unreach, egress);
        const uo = view(u.out);
        assert.equal(uo.src, VIP);
        assert.ok(uo.checksumOk, "ICMPv6 checksum after the source rewrite");
        assert.notEqual(backend, "");
      }
    });
  },
);

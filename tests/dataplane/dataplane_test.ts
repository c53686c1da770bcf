/**
 * The eBPF Service dataplane on the real kernel, in network namespaces this
 * test creates and removes:
 *
 *   c1, b1, b2 (Pods) ── n1 (node 1, runs the dataplane) ── up (default route, metric 100)
 *                          │ en1 (Pod ENI, MTU 1280; also a default route, metric 200)
 *                          │ en2
 *                        n2 (node 2) ── b3 (Pod)
 *
 * Node 1's delegated Pod prefix is fd00:a::1:0:0:0/80, node 2's fd00:a::2:0:0:0/80;
 * Services live in fd00:504d::/112. Checksum offload is off on every veth.
 */

import assert from "node:assert/strict";
import { testWith } from "../support/requirements.ts";
import { Driver, type LineProcess, nsRun, sh, Topology } from "../support/dataplane_topology.ts";

const CIDR = "fd00:504d::/112";
const WEB = "fd00:504d::10";
const SELF = "fd00:504d::20";
const REMOTE = "fd00:504d::30";
const POD_PREFIX = "fd00:a::1:0:0:0/80";
const ADDR = {
  c1: "fd00:a::1:0:0:10",
  b1: "fd00:a::1:0:0:11",
  b2: "fd00:a::1:0:0:12",
  b3: "fd00:a::2:0:0:13",
  b4: "fd00:a::1:0:0:14",
};

type Name = "b1" | "b2" | "b3";

function snapshot(webBackends: Name[], extra: Record<string, unknown>[] = []) {
  return {
    apiVersion: "podmin.dev/v1",
    kind: "ServiceSnapshot",
    serviceCIDR: CIDR,
    services: [
      {
        namespace: "default",
        name: "web",
        vip: WEB,
        ports: [
          { name: "http", port: 80, targetPort: 8080, protocol: "TCP" },
          { name: "dns", port: 53, targetPort: 5353, protocol: "UDP" },
        ],
        backends: webBackends.map((b) => ADDR[b]),
      },
      {
        namespace: "default",
        name: "self",
        vip: SELF,
        ports: [{ port: 81, targetPort: 8080, protocol: "TCP" }, {
          port: 53,
          targetPort: 5353,
          protocol: "UDP",
        }],
        backends: [ADDR.b1],
      },
      {
        // Another NodeGroup's Service: its only backend runs on node 2.
        namespace: "other",
        name: "remote",
        vip: REMOTE,
        ports: [{ port: 82, targetPort: 8080, protocol: "TCP" }],
        backends: [ADDR.b3],
      },
      ...extra,
    ],
  };
}

const EMPTY = { apiVersion: "podmin.dev/v1", kind: "ServiceSnapshot", services: [] };

interface Report {
  programs: { id: number; name: string }[];
  attachments: { interface: string; point: string; program: string; programId: number }[];
  servicePorts: { servicePort: string; count: number; backends: string[] }[];
  conntrack: {
    entries: number;
    flows: {
      dir: string;
      key: { saddr: string; daddr: string; sport: number };
      value: { saddr: string; daddr: string };
    }[];
  };
  stats: Record<string, number>;
}

interface Many {
  ok: number;
  failed: number;
  replies: string[];
  errors: string[];
}

interface UdpMany {
  ok: number;
  failed: number;
  replies: { from: string; text: string }[];
  errors: string[];
}

/** Backend names in TCP reply lines ("b2 [peer]:port req 3"). */
const backendsOf = (replies: string[]) => new Set(replies.map((r) => r.split(" ")[0]));

/**
 * The ids of the programs this test's agents attached, seen in node n1's namespace after every
 * driver call (`tracked`): the kernel may hold other agents' `podmin_*` programs at the same time
 * (the machines of the machine lane run the same dataplane), so "ours" is what we saw attached.
 */
const ours = new Set<number>();

/** Adds the ids of the programs attached to the links of `ns` to `ours`. */
async function noteAttached(ns: string): Promise<void> {
  const net = JSON.parse(await nsRun(ns, "bpftool", ["-j", "net", "show"])) as {
    tc?: { id?: number; prog_id?: number }[];
  }[];
  for (const e of net) {
    for (const t of e.tc ?? []) {
      const id = t.id ?? t.prog_id;
      if (typeof id === "number") ours.add(id);
    }
  }
}

/**
 * `driver`, with every call followed by noting what is attached in its namespace, and a report's
 * programs (`dataplane status` lists every `podmin_*` program of the kernel) cut to ours.
 */
function tracked(driver: Driver, ns: string): Driver {
  const call = driver.call.bind(driver);
  driver.call = (async (cmd: Record<string, unknown>, timeoutMs?: number) => {
    const r = await call(cmd, timeoutMs);
    await noteAttached(ns);
    if (cmd.op === "report") {
      const rep = r as unknown as Report;
      return { ...rep, programs: rep.programs.filter((p) => ours.has(p.id)) };
    }
    return r;
  }) as typeof driver.call;
  return driver;
}

/** The names of our programs the kernel still holds. */
async function ourPrograms(): Promise<string[]> {
  const progs = JSON.parse(await sh("bpftool", ["-j", "prog", "show"])) as {
    id: number;
    name?: string;
  }[];
  return progs.filter((p) => ours.has(p.id)).map((p) => p.name ?? "");
}

async function waitNoPrograms(): Promise<void> {
  const deadline = Date.now() + 5000;
  // Programs are freed after an RCU grace period once the last reference goes.
  while ((await ourPrograms()).length) {
    if (Date.now() > deadline) assert.fail(`programs left: ${await ourPrograms()}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** Every tc filter and clsact qdisc on every link of a namespace. */
async function tcState(ns: string): Promise<string[]> {
  const links = JSON.parse(await nsRun(ns, "ip", ["-j", "link", "show"])) as { ifname: string }[];
  const found: string[] = [];
  for (const { ifname } of links) {
    for (const point of ["ingress", "egress"]) {
      const f = JSON.parse(await nsRun(ns, "tc", ["-j", "filter", "show", "dev", ifname, point]));
      if (f.length) found.push(`${ifname} ${point} filter`);
    }
    const q = JSON.parse(await nsRun(ns, "tc", ["-j", "qdisc", "show", "dev", ifname])) as {
      kind: string;
    }[];
    if (q.some((x) => x.kind === "clsact")) found.push(`${ifname} clsact`);
  }
  return found;
}

/** Absolute nstat counters of a namespace. */
async function nstat(ns: string): Promise<Map<string, number>> {
  const out = await nsRun(ns, "nstat", ["-asz"]);
  const m = new Map<string, number>();
  for (const line of out.split("\n")) {
    const [k, v] = line.trim().split(/\s+/);
    if (k && !k.startsWith("#") && v !== undefined) m.set(k, Number(v));
  }
  return m;
}

testWith(
  "dataplane [kernel]: VIP load balancing, conntrack, hairpin, other node, incremental updates, clean unload",
  { root: true, tools: ["ip", "ethtool", "bpftool", "nsenter", "tc", "nstat"] },
  async (t) => {
    const topo = Topology.create("pdt");
    try {
      // --- topology -------------------------------------------------------
      const n1 = await topo.node("n1");
      const n2 = await topo.node("n2");
      const up = await topo.node("up");
      const c1 = await topo.pod(n1, "c1", "vc1", ADDR.c1);
      const b1 = await topo.pod(n1, "b1", "vb1", ADDR.b1);
      const b2 = await topo.pod(n1, "b2", "vb2", ADDR.b2);
      const b3 = await topo.pod(n2, "b3", "vb3", ADDR.b3);
      await topo.link({ ns: n1, dev: "en1", addr: "fd00:a::1" }, {
        ns: n2,
        dev: "en2",
        addr: "fd00:a::2",
      }, { mtu: 1280 });
      await topo.link({ ns: n1, dev: "up1", addr: "fd00:f::1" }, {
        ns: up,
        dev: "up0",
        addr: "fd00:f::2",
      });
      await topo.route(n1, "fd00:a::2:0:0:0/80", "via", "fd00:a::2", "dev", "en1");
      await topo.route(n1, "default", "via", "fd00:f::2", "dev", "up1", "metric", "100");
      await topo.route(n1, "default", "via", "fd00:a::2", "dev", "en1", "metric", "200");
      await topo.route(n2, "fd00:a::1:0:0:0/80", "via", "fd00:a::1", "dev", "en2");
      const servers = await Promise.all(
        ([["b1", b1.ns], ["b2", b2.ns], ["b3", b3.ns]] as const).map(([name, ns]) =>
          topo.startPeer(ns, ["serve", name, "8080", "5353"])
        ),
      );
      assert.equal(servers.length, 3);
      const before = new Map(
        await Promise.all(topo.namespaces.map(async (ns) => [ns, await nstat(ns)] as const)),
      );
      let driver = tracked(new Driver(topo, n1, POD_PREFIX), n1);

      await t.step("an invalid snapshot is rejected before anything is loaded", async () => {
        const bad = snapshot(["b1"]);
        bad.services[0].backends = ["fd00:a::1:0:0:11", "not-an-address"];
        await assert.rejects(
          driver.call({ op: "apply", snapshot: bad }),
          /ValidationError.*backends\[1\]/,
        );
        // The agent's own view (the kernel-wide listing holds other agents' programs too).
        assert.deepEqual(
          (await driver.call<{ programs: unknown[] }>({ op: "status" })).programs,
          [],
        );
        assert.deepEqual(await tcState(n1), []);
      });

      await t.step(
        "a snapshot loads the programs and attaches to Pod veths, the ENI and the lowest-metric default route",
        async () => {
          const r = await driver.call<{ loadedNow: boolean; attached: string[] }>({
            op: "apply",
            snapshot: snapshot(["b1", "b2", "b3"]),
          });
          assert.equal(r.loadedNow, true);
          assert.deepEqual(r.attached.sort(), ["en1", "up1", "vb1", "vb2", "vc1"]);
          const rep = await driver.call<Report>({ op: "report" });
          assert.deepEqual(rep.programs.map((p) => p.name).sort(), [
            "podmin_egress",
            "podmin_ingress",
          ]);
          assert.deepEqual(
            rep.attachments.map((a) => `${a.interface}/${a.point}/${a.program}`).sort(),
            ["en1", "up1", "vb1", "vb2", "vc1"].flatMap((i) => [
              `${i}/egress/podmin_egress`,
              `${i}/ingress/podmin_ingress`,
            ]),
          );
          assert.match(
            await nsRun(n1, "tc", ["filter", "show", "dev", "vc1", "ingress"]),
            /podmin_ingress/,
          );
          assert.equal(rep.servicePorts.length, 5);
        },
      );

      await t.step(
        "TCP through the VIP reaches all three backends, which see the client's address",
        async () => {
          const r = JSON.parse(await topo.peer(c1.ns, ["tcp-many", WEB, "80", "45", "4"])) as Many;
          assert.equal(r.failed, 0, r.errors.join("; "));
          assert.equal(r.ok, 45);
          assert.deepEqual([...backendsOf(r.replies)].sort(), ["b1", "b2", "b3"]);
          for (const line of r.replies) {
            assert.equal(line.split(" ")[1].replace(/:\d+$/, ""), `[${ADDR.c1}]`);
          }
        },
      );

      await t.step("UDP replies come from the VIP, from all three backends", async () => {
        const r = JSON.parse(await topo.peer(c1.ns, ["udp-many", WEB, "53", "30"])) as UdpMany;
        assert.equal(r.failed, 0, r.errors.join("; "));
        for (const x of r.replies) {
          assert.equal(x.from, `[${WEB}]:53`);
        }
        assert.deepEqual([...backendsOf(r.replies.map((x) => x.text))].sort(), ["b1", "b2", "b3"]);
      });

      await t.step(
        "`podmin-agent dataplane status` prints programs, attachments and maps",
        async () => {
          const run = async (args: string[]) => {
            const p = topo.spawnDeno(n1, "tests/support/dataplane_status_cli.ts", args);
            await p.stdin.close();
            const out = await p.output();
            return { code: out.code, stdout: new TextDecoder().decode(out.stdout) };
          };
          const text = await run(["dataplane", "status"]);
          assert.equal(text.code, 0);
          for (
            const want of [
              /podmin_ingress\s+id \d+/,
              /vc1\s+ifindex \d+\s+ingress podmin_ingress/,
              /en1\s+ifindex \d+\s+egress\s+podmin_egress/,
              /service CIDR fd00:504d::\/112/,
              /\[fd00:504d::10\]:80\/TCP\s+id \d+\s+3 backend/,
              /conntrack \([1-9]\d* entries/,
              /forward TCP \[fd00:a::1:0:0:10\]:\d+ -> \[fd00:504d::10\]:80/,
              /newFlow=[1-9]/,
            ]
          ) assert.match(text.stdout, want);
          const json = await run(["dataplane", "status", "-o", "json", "--flows", "0"]);
          const rep = JSON.parse(json.stdout) as Report;
          assert.equal(rep.attachments.length, 10);
          assert.equal(rep.conntrack.flows.length, 0);
          assert.ok(rep.conntrack.entries > 0);
          assert.equal((await run(["dataplane", "bogus"])).code, 2);
        },
      );

      await t.step(
        "a backend on the other node, across a 1280-byte MTU (Packet Too Big translated)",
        async () => {
          const statsBefore = (await driver.call<Report>({ op: "report" })).stats;
          const out = await topo.peer(c1.ns, ["sink", REMOTE, "82", "300000", "15000"]);
          assert.equal(out.trim(), "got 300000");
          const stats = (await driver.call<Report>({ op: "report" })).stats;
          assert.ok(stats.icmp > statsBefore.icmp, "the node's Packet Too Big was translated");
          const r = JSON.parse(
            await topo.peer(c1.ns, ["tcp-many", REMOTE, "82", "3", "1"]),
          ) as Many;
          assert.deepEqual([...backendsOf(r.replies)], ["b3"]);
        },
      );

      await t.step(
        "hairpin: a Pod reaches itself through its own Service (TCP and UDP)",
        async () => {
          const r = JSON.parse(await topo.peer(b1.ns, ["tcp-many", SELF, "81", "5", "1"])) as Many;
          assert.equal(r.failed, 0, r.errors.join("; "));
          for (const line of r.replies) {
            assert.equal(line.split(" ")[0], "b1");
            assert.match(
              line.split(" ")[1],
              new RegExp(`^\\[${SELF}\\]:`),
              "the backend sees the VIP",
            );
          }
          const u = JSON.parse(await topo.peer(b1.ns, ["udp-many", SELF, "53", "5"])) as UdpMany;
          assert.equal(u.failed, 0, u.errors.join("; "));
          for (const x of u.replies) {
            assert.equal(x.from, `[${SELF}]:53`);
            assert.ok(x.text.startsWith("b1 "));
          }
        },
      );

      await t.step(
        "removing a backend: new flows avoid it, an open connection to another survives, its conntrack goes",
        async () => {
          const holds: LineProcess[] = [];
          try {
            const tcp = await topo.startPeer(c1.ns, ["tcp-hold", WEB, "80"]);
            holds.push(tcp);
            const held = (await tcp.ask("ping 1")).split(" ")[0];
            assert.match(held, /^b[123]$/);
            // A connected UDP socket on a backend other than the TCP one: that backend goes.
            let udp: LineProcess | undefined, removed = "";
            for (let i = 0; i < 12 && !udp; i++) {
              const u = await topo.startPeer(c1.ns, ["udp-hold", WEB, "53"]);
              holds.push(u);
              const [from, name] = (await u.ask("u 1")).split(" ");
              assert.equal(from, `[${WEB}]:53`);
              if (name !== held) [udp, removed] = [u, name];
            }
            assert.ok(udp, "found a UDP flow on another backend");
            const keep = (["b1", "b2", "b3"] as Name[]).filter((b) => b !== removed);
            const removedAddr = ADDR[removed as Name];
            // The web Service's flows to the removed backend (its other Services keep theirs).
            const ctOf = (rep: Report) =>
              rep.conntrack.flows.filter((f) =>
                (f.dir === "forward" && f.key.daddr === WEB && f.value.daddr === removedAddr) ||
                (f.dir === "reply" && f.value.saddr === WEB && f.key.saddr === removedAddr)
              );
            assert.ok(ctOf(await driver.call<Report>({ op: "report" })).length > 0);

            const r = await driver.call<Record<string, number>>({
              op: "apply",
              snapshot: snapshot(keep),
            });
            // Incremental: two Service ports shrink from 3 to 2 slots; nothing else is rewritten.
            assert.equal(r.svcDeletes, 0);
            assert.equal(r.svcWrites, 2);
            assert.equal(r.backendDeletes, 2);
            assert.ok(r.backendWrites <= 4, `backend writes ${r.backendWrites}`);
            assert.ok(r.conntrackDeleted > 0);
            assert.deepEqual(ctOf(await driver.call<Report>({ op: "report" })), []);

            assert.equal(
              (await tcp.ask("ping 2")).split(" ")[0],
              held,
              "the TCP connection survived",
            );
            const [from2, name2] = (await udp!.ask("u 2")).split(" ");
            assert.equal(from2, `[${WEB}]:53`);
            assert.notEqual(name2, removed, "connected UDP moved to a remaining backend");
            const m = JSON.parse(
              await topo.peer(c1.ns, ["tcp-many", WEB, "80", "30", "4"]),
            ) as Many;
            assert.equal(m.failed, 0, m.errors.join("; "));
            assert.deepEqual([...backendsOf(m.replies)].sort(), keep);
          } finally {
            for (const h of holds) await h.end();
          }
        },
      );

      await t.step("an invalid snapshot while loaded changes nothing", async () => {
        const rep = await driver.call<Report>({ op: "report" });
        const bad = snapshot(["b3"], [{
          namespace: "default",
          name: "new",
          vip: "fd00:504d::99",
          ports: [{ port: 70000, targetPort: 80, protocol: "TCP" }],
          backends: [ADDR.b2],
        }]);
        await assert.rejects(driver.call({ op: "apply", snapshot: bad }), /ValidationError.*70000/);
        const after = await driver.call<Report>({ op: "report" });
        assert.deepEqual(after.servicePorts, rep.servicePorts);
        assert.deepEqual(after.attachments, rep.attachments);
        assert.deepEqual(after.programs.map((p) => p.id), rep.programs.map((p) => p.id));
      });

      await t.step(
        "a new Pod veth is attached on the next pass and dropped when it goes",
        async () => {
          const b4 = await topo.pod(n1, "b4", "vb4", ADDR.b4);
          const r = await driver.call<{ attached: string[] }>({
            op: "apply",
            snapshot: snapshot(["b1", "b2", "b3"]),
          });
          assert.deepEqual(r.attached, ["vb4"]);
          await nsRun(n1, "ip", ["link", "del", "vb4"]); // synchronous, unlike deleting the namespace
          await sh("ip", ["netns", "del", b4.ns]);
          topo.namespaces.splice(topo.namespaces.indexOf(b4.ns), 1);
          const r2 = await driver.call<{ detached: string[] }>({
            op: "apply",
            snapshot: snapshot(["b1", "b2", "b3"]),
          });
          assert.deepEqual(r2.detached, ["vb4"]);
        },
      );

      await t.step("a full pass repairs a removed filter and a deleted map entry", async () => {
        await nsRun(n1, "tc", [
          "filter",
          "del",
          "dev",
          "vb2",
          "ingress",
          "pref",
          "1",
          "handle",
          "0x504d",
          "bpf",
        ]);
        const rep = await driver.call<Report>({ op: "report" });
        assert.ok(!rep.attachments.some((a) => a.interface === "vb2" && a.point === "ingress"));
        // Our agent's podmin_svc map: one its programs use (other agents may run beside).
        const used = new Set<number>();
        for (const p of rep.programs) {
          const info = JSON.parse(await sh("bpftool", ["-j", "prog", "show", "id", String(p.id)]));
          for (const id of info.map_ids ?? []) used.add(id);
        }
        const svcMap = JSON.parse(await sh("bpftool", ["-j", "map", "show"])).find((
          m: { id: number; name: string },
        ) => m.name === "podmin_svc" && used.has(m.id));
        // Delete the remote Service's entry: key = VIP (16 bytes), port 82 big-endian, TCP, pad.
        const key = [0xfd, 0, 0x50, 0x4d, ...Array(11).fill(0), 0x30, 0, 82, 6, 0].map(String);
        await sh("bpftool", ["map", "delete", "id", String(svcMap.id), "key", ...key]);
        assert.equal((await driver.call<Report>({ op: "report" })).servicePorts.length, 4);
        const r = await driver.call<{ attached: string[]; svcWrites: number }>({
          op: "apply",
          snapshot: snapshot(["b1", "b2", "b3"]),
          full: true,
        });
        assert.deepEqual(r.attached, ["vb2"]);
        assert.equal(r.svcWrites, 1);
        const fixed = await driver.call<Report>({ op: "report" });
        assert.equal(fixed.servicePorts.length, 5);
        assert.equal(fixed.attachments.length, 10);
        const m = JSON.parse(await topo.peer(c1.ns, ["tcp-many", REMOTE, "82", "2", "1"])) as Many;
        assert.equal(m.ok, 2);
      });

      await t.step("no checksum errors anywhere", async () => {
        for (const ns of topo.namespaces) {
          const now = await nstat(ns);
          const was = before.get(ns)!;
          for (const [k, v] of now) {
            if (/CsumErrors$/.test(k)) assert.equal(v, was.get(k) ?? 0, `${ns} ${k}`);
          }
        }
        const c = await nstat(c1.ns);
        assert.ok((c.get("Ip6InReceives") ?? 0) > (before.get(c1.ns)!.get("Ip6InReceives") ?? 0));
        assert.ok((await nstat(c1.ns)).has("TcpInCsumErrors"), "nstat lists the checksum counters");
      });

      await t.step("an empty snapshot detaches everything and unloads", async () => {
        const r = await driver.call<{ loaded: boolean; detached: string[] }>({
          op: "apply",
          snapshot: EMPTY,
        });
        assert.equal(r.loaded, false);
        assert.deepEqual(r.detached.sort(), ["en1", "up1", "vb1", "vb2", "vc1"]);
        assert.deepEqual(await tcState(n1), []);
        await waitNoPrograms();
        const rep = await driver.call<Report>({ op: "report" });
        assert.deepEqual([rep.programs, rep.attachments], [[], []]);
        // Traffic to the VIP no longer reaches anyone.
        const m = JSON.parse(await topo.peer(c1.ns, ["udp-many", WEB, "53", "1"])) as UdpMany;
        assert.equal(m.ok, 0);
      });

      await t.step(
        "an agent restart keeps open flows (conntrack adopted); after a crash an empty snapshot cleans up",
        async () => {
          await driver.call({ op: "apply", snapshot: snapshot(["b1", "b2", "b3"]) });
          const hold = await topo.startPeer(c1.ns, ["tcp-hold", WEB, "80"]);
          try {
            const [held, peer] = (await hold.ask("ping 1")).split(" ");
            const clientPort = Number(peer.replace(/^.*\]:/, ""));
            driver.lp.proc.kill("SIGKILL");
            await driver.lp.proc.status;
            // tc filters keep the programs (and their maps) alive without the agent.
            assert.ok((await tcState(n1)).length >= 10);
            assert.deepEqual((await ourPrograms()).sort(), ["podmin_egress", "podmin_ingress"]);
            assert.equal(
              (await hold.ask("ping 2")).split(" ")[0],
              held,
              "Services work while the agent is down",
            );

            // The restarted agent also drops another backend: without the old
            // conntrack the open flow would be re-hashed over the remaining two.
            driver = tracked(new Driver(topo, n1, POD_PREFIX), n1);
            const keep: Name[] = [held as Name, held === "b1" ? "b2" : "b1"];
            const r = await driver.call<{ conntrackAdopted: number; attached: string[] }>({
              op: "apply",
              snapshot: snapshot(keep),
            });
            assert.ok(r.conntrackAdopted > 0, "conntrack adopted");
            assert.deepEqual(r.attached.sort(), ["en1", "up1", "vb1", "vb2", "vc1"]);
            const flows = (await driver.call<Report>({ op: "report" })).conntrack.flows;
            const mine = flows.find((f) => f.dir === "forward" && f.key.sport === clientPort);
            assert.equal(mine?.value.daddr, ADDR[held as Name]);
            assert.equal(
              (await hold.ask("ping 3")).split(" ")[0],
              held,
              "the open connection survived",
            );
          } finally {
            await hold.end();
          }

          driver.lp.proc.kill("SIGKILL");
          await driver.lp.proc.status;
          driver = tracked(new Driver(topo, n1, POD_PREFIX), n1);
          const r = await driver.call<{ detached: string[] }>({ op: "apply", snapshot: EMPTY });
          assert.deepEqual(r.detached.sort(), ["en1", "up1", "vb1", "vb2", "vc1"]);
          assert.deepEqual(await tcState(n1), []);
          await waitNoPrograms();
        },
      );

      await t.step(
        "`podmin-agent dataplane detach` removes what a stopped agent left serving",
        async () => {
          await driver.call({ op: "apply", snapshot: snapshot(["b1", "b2", "b3"]) });
          driver.lp.proc.kill("SIGKILL");
          await driver.lp.proc.status;
          assert.ok((await tcState(n1)).length >= 10, "left serving");
          const detach = async () => {
            const p = topo.spawnDeno(n1, "tests/support/dataplane_status_cli.ts", [
              "dataplane",
              "detach",
            ]);
            await p.stdin.close();
            const out = await p.output();
            assert.equal(out.code, 0, new TextDecoder().decode(out.stderr));
            return new TextDecoder().decode(out.stdout).trim();
          };
          assert.match(await detach(), /^dataplane detached from (en1|up1|vb1|vb2|vc1)(, |$)/);
          assert.deepEqual(await tcState(n1), []);
          await waitNoPrograms();
          assert.equal(await detach(), "dataplane: nothing attached in this network namespace");
          driver = tracked(new Driver(topo, n1, POD_PREFIX), n1);
        },
      );
    } finally {
      await topo.destroy();
    }
  },
);

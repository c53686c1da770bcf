/**
 * Service VIPs from host processes: the dataplane's cgroup socket programs (connect6, sendmsg6,
 * recvmsg6 on the root cgroup v2) on the real kernel, in namespaces this test creates:
 *
 *   n1 (node: runs the dataplane; its processes are the "host processes") ── b1, b2 (Pods)
 *
 * Cgroup hooks see every namespace's sockets; the programs translate only n1's, so this test
 * (and any other running on the machine) is unaffected outside n1.
 */

import assert from "node:assert/strict";
import { programInfo } from "../../ffi/bpf_info.ts";
import {
  BPF_CGROUP_INET6_CONNECT,
  BPF_CGROUP_UDP6_RECVMSG,
  BPF_CGROUP_UDP6_SENDMSG,
  cgroupQuery,
  closeCgroup,
  openCgroup2Root,
} from "../../ffi/cgroup.ts";
import { testWith } from "../support/requirements.ts";
import { Driver, LineProcess, nsRun, sh, Topology } from "../support/dataplane_topology.ts";

const VIP = "fd00:504d::10";
const EMPTY_VIP = "fd00:504d::11";
const HOST = "fd00:ff::1";
const POD_PREFIX = "fd00:a::1:0:0:0/80";
const B1 = "fd00:a::1:0:0:11";
const B2 = "fd00:a::1:0:0:12";
const HOOKS = [BPF_CGROUP_INET6_CONNECT, BPF_CGROUP_UDP6_SENDMSG, BPF_CGROUP_UDP6_RECVMSG];

function snapshot(backends: string[]) {
  return {
    apiVersion: "podmin.dev/v1",
    kind: "ServiceSnapshot",
    serviceCIDR: "fd00:504d::/112",
    services: [
      {
        namespace: "default",
        name: "web",
        vip: VIP,
        ports: [
          { name: "http", port: 80, targetPort: 8080, protocol: "TCP" },
          { name: "dns", port: 53, targetPort: 5353, protocol: "UDP" },
        ],
        backends,
      },
      {
        namespace: "default",
        name: "empty",
        vip: EMPTY_VIP,
        ports: [{ port: 80, targetPort: 8080, protocol: "TCP" }, {
          port: 53,
          targetPort: 5353,
          protocol: "UDP",
        }],
        backends: [],
      },
    ],
  };
}

const EMPTY = { apiVersion: "podmin.dev/v1", kind: "ServiceSnapshot", services: [] };

interface Status {
  loaded: boolean;
  sockets?: {
    attached: boolean;
    how?: string;
    cgroup?: string;
    programs: Record<string, number>;
    error?: string;
  };
}

interface Many {
  ok: number;
  failed: number;
  replies: string[];
  errors: string[];
}

/** Program ids attached to the root cgroup v2 at the three socket hooks. */
function rootCgroupPrograms(): Set<number> {
  const root = openCgroup2Root();
  try {
    return new Set(HOOKS.flatMap((h) => cgroupQuery(root.fd, h)));
  } finally {
    closeCgroup(root.fd);
  }
}

async function setup() {
  const topo = Topology.create("hs");
  const n1 = await topo.node("n1");
  await nsRun(n1, "ip", ["-6", "addr", "add", `${HOST}/128`, "dev", "lo", "nodad"]);
  const b1 = await topo.pod(n1, "b1", "vb1", B1);
  const b2 = await topo.pod(n1, "b2", "vb2", B2);
  const servers: LineProcess[] = [];
  for (const [pod, name] of [[b1, "b1"], [b2, "b2"]] as const) {
    servers.push(await topo.startPeer(pod.ns, ["serve", name, "8080", "5353"]));
  }
  return { topo, n1 };
}

/**
 * One datagram over a connected UDP socket (connect(2), send(2), recvfrom(2)) from a host
 * process of `ns` (python3: Deno's node:dgram emulates connect without connect(2)).
 */
async function connectedUdp(
  ns: string,
  host: string,
  port: number,
  text: string,
): Promise<{ errno?: number; peer?: string; from?: string; text?: string }> {
  const py = [
    "import json, socket, sys",
    "s = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)",
    "s.settimeout(3)",
    "try:",
    "    s.connect((sys.argv[1], int(sys.argv[2])))",
    "except OSError as e:",
    "    print(json.dumps({'errno': e.errno})); sys.exit(0)",
    "peer = s.getpeername()",
    "s.send(sys.argv[3].encode())",
    "data, src = s.recvfrom(2048)",
    "print(json.dumps({'peer': '[%s]:%d' % peer[:2], 'from': '[%s]:%d' % src[:2], 'text': data.decode()}))",
  ].join("\n");
  return JSON.parse(await nsRun(ns, "python3", ["-c", py, host, String(port), text]));
}

async function stats(driver: Driver): Promise<Record<string, number>> {
  return (await driver.call<{ stats: Record<string, number> }>({ op: "report" })).stats;
}

testWith(
  "host sockets: connect() and UDP to a VIP from the node reach a backend; no backends is ECONNREFUSED; unload leaves nothing",
  { root: true, tools: ["ip", "nsenter", "ethtool", "bpftool", "python3"] },
  async () => {
    const { topo, n1 } = await setup();
    const driver = new Driver(topo, n1, POD_PREFIX);
    try {
      await driver.call({ op: "apply", snapshot: snapshot([B1, B2]) });
      const st = await driver.call<Status>({ op: "status" });
      assert.equal(st.sockets?.attached, true, JSON.stringify(st.sockets));
      const ids = Object.values(st.sockets!.programs);
      assert.equal(ids.length, 3);
      const attached = rootCgroupPrograms();
      for (const id of ids) assert.ok(attached.has(id), `program ${id} on the root cgroup`);
      // `dataplane status` lists them for this namespace (and only there).
      const report = await driver.call<
        { sockets: { hooks: { hook: string; programId: number }[] } }
      >(
        { op: "report" },
      );
      assert.deepEqual(
        report.sockets.hooks.map((h) => [h.hook, h.programId]).sort(),
        [["connect6", st.sockets!.programs.podmin_connect6], [
          "recvmsg6",
          st.sockets!.programs.podmin_recvmsg6,
        ], ["sendmsg6", st.sockets!.programs.podmin_sendmsg6]],
      );

      // (a) TCP: a host process's connect() to VIP:80 reaches a backend's 8080, with the node's
      // own address as the peer; no packet was translated (the socket was, at connect()).
      const tcp = JSON.parse(await topo.peer(n1, ["tcp-many", VIP, "80", "20"])) as Many;
      assert.equal(tcp.ok, 20, JSON.stringify(tcp.errors));
      const names = new Set(tcp.replies.map((r) => r.split(" ")[0]));
      assert.deepEqual([...names].sort(), ["b1", "b2"], "both backends chosen");
      for (const r of tcp.replies) assert.match(r, new RegExp(`^b[12] \\[${HOST}\\]:\\d+ `));
      let s = await stats(driver);
      assert.equal(s.sockConnect, 20);
      assert.equal(s.newFlow, 0, "no per-packet translation for host sockets");

      // (b) UDP, unconnected (sendmsg): every reply comes from the VIP:53.
      const udp = JSON.parse(await topo.peer(n1, ["udp-many", VIP, "53", "10"])) as {
        ok: number;
        replies: { from: string; text: string }[];
        errors: string[];
      };
      assert.equal(udp.ok, 10, JSON.stringify(udp.errors));
      for (const r of udp.replies) {
        assert.equal(r.from, `[${VIP}]:53`, "the reply's source is the VIP");
        assert.match(r.text, /^b[12] /);
      }
      // UDP, connected (connect then send): the reply's source is the VIP too.
      const conn = await connectedUdp(n1, VIP, 53, "hi");
      assert.equal(conn.from, `[${VIP}]:53`, JSON.stringify(conn));
      // getpeername() names the backend: there is no getpeername hook (documented in §7.8).
      assert.ok([`[${B1}]:5353`, `[${B2}]:5353`].includes(conn.peer!), String(conn.peer));
      assert.match(conn.text!, /^b[12] .* hi$/);
      s = await stats(driver);
      assert.equal(s.sockSendmsg, 10);
      assert.equal(s.sockConnect, 21);
      assert.equal(s.sockRecvmsg, 11);

      // (c) No ready backend: connect() fails at once with ECONNREFUSED (errno 111), TCP and
      // connected UDP alike; an unconnected datagram's sendto() too.
      const refused = JSON.parse(await topo.peer(n1, ["tcp-many", EMPTY_VIP, "80", "3"])) as Many;
      assert.equal(refused.ok, 0);
      assert.equal(refused.errors.length, 3);
      for (const e of refused.errors) assert.match(e, /os error 111/);
      const uRefused = await connectedUdp(n1, EMPTY_VIP, 53, "hi");
      assert.equal(uRefused.errno, 111, JSON.stringify(uRefused));
      const sRefused = JSON.parse(await topo.peer(n1, ["udp-many", EMPTY_VIP, "53", "1"]));
      assert.equal(sRefused.ok, 0);
      assert.match(sRefused.errors[0], /os error 111/);
      s = await stats(driver);
      assert.equal(s.sockRefused, 5);

      // A Pod's socket (another namespace) is left to the packet path: its connection is a new
      // flow at the veth's tc ingress, not a socket translation.
      const pod = JSON.parse(
        await topo.peer(topo.name("b1"), ["tcp-many", VIP, "80", "1"]),
      ) as Many;
      assert.equal(pod.ok, 1, JSON.stringify(pod.errors));
      const s2 = await stats(driver);
      assert.equal(s2.sockConnect, s.sockConnect, "not seen by the socket programs");
      assert.equal(s2.newFlow, s.newFlow + 1, "translated per packet");

      // (d) The empty snapshot unloads: nothing of ours on the root cgroup, and a connect to
      // the VIP is no longer translated (n1 has no route to the service range).
      await driver.call({ op: "apply", snapshot: EMPTY });
      const after = rootCgroupPrograms();
      for (const id of ids) assert.ok(!after.has(id), `program ${id} detached`);
      const cgtree = await sh("bpftool", ["-j", "cgroup", "tree", openCgroup2Root().path]);
      for (const id of ids) assert.ok(!cgtree.includes(`"id":${id},`), cgtree);
      const gone = JSON.parse(await topo.peer(n1, ["tcp-many", VIP, "80", "1"])) as Many;
      assert.equal(gone.ok, 0);
      assert.match(gone.errors[0], /os error 101/, "unreachable, not translated");
    } finally {
      await driver.lp.end();
      await driver.lp.proc.status;
      await topo.destroy();
    }
  },
);

testWith(
  "host sockets: a killed agent leaves no socket program attached",
  { root: true, tools: ["ip", "nsenter", "ethtool"] },
  async () => {
    const { topo, n1 } = await setup();
    const driver = new Driver(topo, n1, POD_PREFIX);
    try {
      await driver.call({ op: "apply", snapshot: snapshot([B1]) });
      const st = await driver.call<Status>({ op: "status" });
      const ids = Object.values(st.sockets!.programs);
      assert.equal(ids.length, 3);
      driver.lp.proc.kill("SIGKILL");
      await driver.lp.proc.status;
      const attached = rootCgroupPrograms();
      for (const id of ids) assert.ok(!attached.has(id), `program ${id} detached with the process`);
      // The links were the programs' last users: they are freed.
      const deadline = Date.now() + 5000;
      while (ids.some((id) => programInfo(id) !== undefined)) {
        if (Date.now() > deadline) assert.fail("socket programs still loaded");
        await new Promise((r) => setTimeout(r, 50));
      }
    } finally {
      await topo.destroy();
    }
  },
);

testWith(
  "host sockets: on a host without a cgroup2 mount the agent mounts one, attaches to its root, and leaves no mount",
  { root: true, tools: ["ip", "nsenter", "ethtool", "unshare"] },
  async () => {
    const { topo, n1 } = await setup();
    const mountDir = await Deno.makeTempDir({ prefix: "podmin-cg-" });
    // A private mount namespace with every cgroup2 mount gone: a pure cgroup v1 host.
    const script = [
      'for m in $(awk \'{for(i=7;i<=NF;i++) if($i=="-"){if($(i+1)=="cgroup2") print $5; break}}\' /proc/self/mountinfo); do umount -l "$m"; done',
      `exec nsenter --net=/run/netns/${n1} "$@"`,
    ].join("; ");
    const root = new URL("../../", import.meta.url).pathname;
    const proc = new Deno.Command("unshare", {
      args: [
        "-m",
        "--propagation",
        "private",
        "sh",
        "-c",
        script,
        "sh",
        Deno.execPath(),
        "run",
        "-A",
        `${root}tests/support/dataplane_driver.ts`,
        POD_PREFIX,
        "",
        mountDir,
      ],
      stdin: "piped",
      stdout: "piped",
      stderr: "piped",
    }).spawn();
    const lp = new LineProcess(proc);
    const call = async (cmd: Record<string, unknown>) => {
      const reply = JSON.parse(await lp.ask(JSON.stringify(cmd), 60_000));
      assert.ok(reply.ok, JSON.stringify(reply.error));
      return reply.result;
    };
    try {
      await call({ op: "apply", snapshot: snapshot([B1, B2]) });
      const st = (await call({ op: "status" })) as Status;
      assert.equal(st.sockets?.attached, true, JSON.stringify(st.sockets));
      assert.equal(st.sockets?.how, "mounted");
      assert.ok(st.sockets?.cgroup?.startsWith(mountDir), String(st.sockets?.cgroup));
      assert.deepEqual([...Deno.readDirSync(mountDir)], [], "the temporary mount point is gone");
      const mounts = await sh("nsenter", [
        `--mount=/proc/${proc.pid}/ns/mnt`,
        "cat",
        "/proc/self/mountinfo",
      ]);
      assert.ok(
        !mounts.includes(" - cgroup2 "),
        "nothing left mounted in the agent's mount namespace",
      );
      // The freshly mounted hierarchy's root is the one every host process lives under.
      const ids = Object.values(st.sockets!.programs);
      const attached = rootCgroupPrograms();
      for (const id of ids) assert.ok(attached.has(id), `program ${id} on the root cgroup`);
      const tcp = JSON.parse(await topo.peer(n1, ["tcp-many", VIP, "80", "4"])) as Many;
      assert.equal(tcp.ok, 4, JSON.stringify(tcp.errors));
      await call({ op: "close" });
      const after = rootCgroupPrograms();
      for (const id of ids) assert.ok(!after.has(id), `program ${id} detached`);
    } finally {
      await lp.end();
      await proc.status;
      await Deno.remove(mountDir, { recursive: true }).catch(() => {});
      await topo.destroy();
    }
  },
);

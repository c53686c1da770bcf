/**
 * A NAT64 instance that boots (issue 31 item 4): one machine of the machine harness
 * (tests/support/machine.ts: systemd-nspawn, Debian bookworm, systemd as PID 1) boots from the
 * NAT user-data exactly as `podmin setup` renders it for a new VPC (cli/setup/render_config.ts:
 * the VPC's IPv4 CIDR as source NAT allowlist, NAT64 sources and pool4 `detect`), its
 * dependencies being what setup's own dependency sync publishes to the bucket (moto): the vmconfig
 * archive, and the node dependencies the NAT kind does not pin (a node's runc here).
 *
 * The machine has only its boot ENI; the user-data's bootstrap reads the VPC's IPv6 block and the
 * instance tag naming the stable NAT64 ENI from IMDS, attaches that ENI (the IMDS emulator
 * answers AttachNetworkInterface and the VPC hot-plugs it), and configure.sh takes the Debian path
 * for Jool (no pinned `jool`; apt-get is a stand-in that installs nothing: box_nat_overrides.ts).
 * Checked for real inside the machine after podmin-nat.service ran (twice: its retry): the
 * nftables table `inet podmin_nat`, the sysctls, the policy routing through the stable ENI and
 * its routing decisions, and the NAT64 filters with packets sent from the VPC to the NAT64
 * prefix (the VPC routes it to the stable ENI): a source outside the allowlist and a non-global
 * destination dropped and counted, an allowlisted one let through.
 *
 * Jool's kernel module cannot be loaded here (the machine shares the host's kernel): the one
 * expected failure is podmin-nat.service failing at `modprobe jool` after everything before it is
 * in place, retried by systemd, and, through configure.sh's restart of it, the user-data; nothing
 * else fails. A failed step is named, with the machine's cloud-init output and the journal of
 * every unit that is not active. Afterwards nothing of the run is left.
 */

import assert from "node:assert/strict";
import * as path from "node:path";
import { CLUSTER_TAG, NAT64_ENI_TAG, NAT64_TAG } from "../../cli/infra/iam.ts";
import { openStore } from "../../core/store/store_url.ts";
import {
  DEFAULT_NAT64_PREFIX,
  dependenciesForKind,
  POOL4_DETECT,
  renderUserData,
  SOURCES_DETECT,
} from "../../vmconfig/render_user_data.ts";
import { cgroupDirs } from "../support/box_cgroups.ts";
import {
  APT_GET_LOG,
  MODULES_UNIT,
  NAT_BOX_UNITS,
  natOverrides,
  readKernelFacts,
} from "../support/box_nat_overrides.ts";
import { TUNABLES_UNIT } from "../support/box_overrides.ts";
import { openBoxRun } from "../support/box_run.ts";
import { publishAsSetup, vmconfigDependency } from "../support/box_setup.ts";
import { machineSteps, until } from "../support/box_steps.ts";
import { createVpc } from "../support/box_vpc.ts";
import { mustRun, runCommand } from "../support/command.ts";
import { Machine, USER_DATA_UNIT } from "../support/machine.ts";
import { moto } from "../support/moto.ts";
import { testWith } from "../support/requirements.ts";
import { HOST_ARCH, which } from "../support/vendor_artifacts.ts";

const ROOT = new URL("../../", import.meta.url).pathname;
const BUILD_ROOTFS = path.join(ROOT, "tests/peers/build_machine_rootfs.sh");
const CLUSTER = "box";
/** `podmin setup --vpc-cidr`: the source NAT allowlist; it holds the VPC's subnet 10.0.1.0/24. */
const VPC_CIDR = "10.0.0.0/16";
const NAT_UNIT = "podmin-nat.service";
const UNITS = [USER_DATA_UNIT, NAT_UNIT, TUNABLES_UNIT, MODULES_UNIT];
/** Generous bounds for a slow, shared machine: they only stop a wait that would never end. */
const USER_DATA_MS = 5 * 60_000;
const RETRY_MS = 60_000;
/** A source outside the VPC (RFC 3849's documentation prefix). */
const OUTSIDE = "2001:db8::1";
/** 8.8.8.8 and 10.0.0.1 in the NAT64 prefix: a global and a non-global IPv4 destination. */
const GLOBAL = "64:ff9b::808:808";
const NON_GLOBAL = "64:ff9b::a00:1";
const re = (s: string) => new RegExp(s.replace(/[.*+?^${}()|[\]\\/]/g, "\\$&"));

testWith(
  "machine: a NAT64 machine boots from setup's NAT user-data: the stable ENI attached, nftables, sysctls, policy routing and the NAT64 allowlist real; Jool's module the one failure; nothing is left",
  {
    root: true,
    tools: ["systemd-nspawn", "mmdebstrap", "nsenter", "unshare", "ip", "nft", "runc", "curl"],
  },
  async () => {
    const kernel = await readKernelFacts();
    const overrides = natOverrides(kernel);
    const rootfs = (await mustRun("bash", [BUILD_ROOTFS])).trim();
    const run = await openBoxRun();
    const vpc = await createVpc(run);
    const work = path.join(run.dir, "work");
    await Deno.mkdir(work);
    let machine: Machine | undefined;
    const step = machineSteps(() => machine, UNITS);
    try {
      const m = await moto();
      const bucket = await m.createBucket();
      const published = await step(
        "setup uploads the dependencies",
        async () =>
          await publishAsSetup({
            store: openStore(`s3://${bucket}`),
            work,
            artifacts: new Map([["runc", await Deno.readFile(await which("runc"))]]),
            versions: {},
            local: [vmconfigDependency()],
          }),
      );
      assert.deepEqual(published.map((d) => d.name).sort(), ["runc", "vmconfig"]);
      // As cli/setup/render_config.ts renders it for a new VPC (only the bucket's URL differs);
      // it pins what the NAT kind takes of the published set.
      const pinned = dependenciesForKind("nat", published);
      assert.deepEqual(pinned.map((d) => d.name), ["vmconfig"]);
      const s3 = vpc.expose(m.port);
      const userData = renderUserData({
        kind: "nat",
        cluster: CLUSTER,
        bucket,
        region: "us-east-1",
        architecture: HOST_ARCH,
        dependencies: pinned,
        s3BaseUrl: `${s3.url}/${bucket}`,
        nat: {
          ipv4SourceCidrs: [VPC_CIDR],
          nat64: { sourceIpv6Cidrs: [SOURCES_DETECT], pool4Address: POOL4_DETECT },
        },
      });
      for (const o of overrides) console.error(`machine override ${o.file}: ${o.reason}`);
      const stable = vpc.spareEni(0);
      machine = await Machine.create({
        run,
        vpc,
        name: "n0",
        index: 0,
        rootfs,
        userData: userData.text,
        files: overrides,
        enable: [...NAT_BOX_UNITS],
        podEni: false,
        // The tags setup's launch template gives a NAT64 instance (instance metadata tags on).
        tags: {
          [CLUSTER_TAG]: CLUSTER,
          [NAT64_TAG]: "us-east-1a",
          [NAT64_ENI_TAG]: stable.interfaceId,
        },
        spareEnis: [stable],
      });
      const nat = machine;
      /** The subnet's /64 without its `::/64`. */
      const subnet = vpc.subnet6.replace(/::\/64$/, "");
      const inVpc = (args: string[]) => runCommand("ip", ["netns", "exec", vpc.netns, ...args]);

      await step("boot", () => nat.boot());
      await step(
        "user-data (cloud-init) runs to podmin-nat.service and fails with it",
        async () => {
          await until("the user-data finished", USER_DATA_MS, async () => {
            const state = await nat.unitState(USER_DATA_UNIT);
            return [/^(active\/exited|failed\/)/.test(state), state];
          });
          const out = await nat.cloudInitOutput();
          for (
            const line of [
              /^podmin-user-data: verified 1 dependency files$/m,
              /^podmin-install: jool: no pinned archive; configure\.sh installs Debian's /m,
              re(
                `podmin-bootstrap: NAT64 source allowlist: the VPC's IPv6 CIDR blocks ${vpc.block6}`,
              ),
              re(
                `podmin-bootstrap: attaching the NAT64 ENI ${stable.interfaceId} to ${nat.instanceId} as device 1`,
              ),
              re(
                `podmin-bootstrap: NAT64 ENI ${stable.interfaceId} is ens6 with ${stable.ipv4} (the Jool pool4 address) in ${vpc.subnet4}`,
              ),
              re(
                `podmin-configure: Jool: installed jool-dkms jool-tools linux-headers-${kernel.release} from Debian`,
              ),
              /^podmin-restart: restarting podmin-nat$/m,
              /^Job for podmin-nat\.service failed because the control process exited with error code\.$/m,
            ]
          ) assert.match(out, line);
          // The one error is the restart of podmin-nat.service; the boot does not complete.
          assert.deepEqual(out.match(/^.*\berror:.*$/gim), [
            "podmin-configure: error: restart.sh failed",
          ]);
          assert.doesNotMatch(out, /boot complete/);
          assert.match(await nat.unitState(USER_DATA_UNIT), /^failed\/failed \(exit-code\)$/);
          // Bootstrap attached the stable ENI once, with the role's signature.
          assert.deepEqual(nat.imds.attachCalls, [
            {
              networkInterfaceId: stable.interfaceId,
              instanceId: nat.instanceId,
              deviceIndex: "1",
            },
          ]);
          assert.deepEqual(nat.imds.violations, []);
          // Jool the Debian way: apt-get as configure.sh calls it (the stand-in installs nothing).
          const opts = "-q -o DPkg::Lock::Timeout=300 -o Acquire::Retries=5";
          assert.deepEqual((await nat.must(["cat", APT_GET_LOG])).trim().split("\n"), [
            `DEBIAN_FRONTEND=noninteractive ${opts} update`,
            `DEBIAN_FRONTEND=noninteractive ${opts} -y --no-install-recommends install ` +
            `jool-dkms jool-tools linux-headers-${kernel.release}`,
          ]);
        },
      );

      await step(
        "Jool's missing module is the one failure: podmin-nat.service fails at it, and retries",
        async () => {
          // Read between two runs: after the first retry, waiting for the next.
          await until("podmin-nat.service's retry", RETRY_MS, async () => {
            const out = await nat.must([
              "systemctl",
              "show",
              "--property=NRestarts,SubState",
              NAT_UNIT,
            ]);
            const retried = Number(/NRestarts=(\d+)/.exec(out)?.[1]) >= 1;
            return [retried && /SubState=auto-restart/.test(out), out.trim()];
          });
          // Each run: the ruleset, the egress routing, then modprobe's real answer (the unit
          // retries while the ruleset and routes stay).
          // Only the runs that ended: the next one may have begun between the two reads (the
          // unit retries every 5 s; a loaded host can take that long between them).
          const whole = await nat.journal(NAT_UNIT);
          const lastEnd = whole.lastIndexOf("Main process exited");
          const journal = lastEnd < 0 ? whole : whole.slice(0, whole.indexOf("\n", lastEnd) + 1);
          const runs = journal.match(/podmin-nat: applied \/etc\/podmin\/nat\/nat\.nft/g) ?? [];
          assert.ok(runs.length >= 2, journal);
          for (
            const line of [
              "podmin-nat: applied /etc/podmin/nat/nat.nft (WAN ens6)",
              "podmin-nat: NAT64 egress through ens6: table 110, IPv4 via 10.0.1.1, IPv6 via fe80::1",
              `modprobe: FATAL: Module jool not found in directory /lib/modules/${kernel.release}`,
            ]
          ) assert.equal(journal.split(line).length - 1, runs.length, `${line}\n${journal}`);
          const errors = journal.match(/^.*podmin-nat: error: .*$/gm) ?? [];
          assert.equal(errors.length, runs.length, journal);
          for (const e of errors) {
            assert.match(
              e,
              re(
                `podmin-nat: error: no Jool module for kernel ${kernel.release} (Debian's jool-dkms builds it when linux-headers-${kernel.release} is installed)`,
              ),
            );
          }
          assert.doesNotMatch(journal, /Jool from|NAT64 64:ff9b/);
          // Nothing else failed: the user-data failed with it, every other unit is fine.
          const failed =
            (await nat.must(["systemctl", "list-units", "--failed", "--plain", "--no-legend"]))
              .split("\n").map((l) => l.split(" ")[0]).filter(Boolean);
          assert.deepEqual(failed.filter((u) => u !== NAT_UNIT), [USER_DATA_UNIT]);
          assert.match(
            await nat.unitState(NAT_UNIT),
            /^(activating\/auto-restart|failed\/failed) \(exit-code\)$/,
          );
          for (const u of NAT_BOX_UNITS) {
            assert.equal(await nat.unitState(u), "active/exited (success)");
          }
        },
        [NAT_UNIT],
      );

      await step("the nftables ruleset nat.sh loaded", async () => {
        const table = await nat.must(["nft", "list", "table", "inet", "podmin_nat"]);
        const set = (name: string) => new RegExp(`set ${name} \\{[^}]*\\}`).exec(table)?.[0] ?? "";
        // Allowlists: the VPC's IPv4 CIDR for source NAT, the VPC's IPv6 block (from IMDS) for
        // NAT64; the non-global IPv4 ranges in the NAT64 prefix blocked.
        assert.match(set("nat4_sources"), /elements = \{ 10\.0\.0\.0\/16 \}/);
        assert.match(set("nat64_sources"), re(`elements = { ${vpc.block6} }`));
        for (const blocked of ["64:ff9b::a00:0/104", "64:ff9b::7f00:0/104", "64:ff9b::e000:0/99"]) {
          assert.match(set("nat64_blocked"), re(blocked));
        }
        assert.match(
          table,
          /type filter hook prerouting priority raw; policy accept;\n\s*ip6 daddr 64:ff9b::\/96 ip6 saddr != @nat64_sources counter name "nat64_denied_source" drop\n\s*ip6 daddr @nat64_blocked counter name "nat64_denied_destination" drop\n\s*iifname "ens6" counter name "metrics_rx_packets"\n/,
        );
        assert.match(
          table,
          /type filter hook forward priority filter; policy accept;\n\s*ct state established,related accept\n\s*ip saddr @nat4_sources oifname "ens6" accept\n\s*meta nfproto ipv4 drop\n/,
        );
        // Source NAT out of the stable ENI, its ports out of Jool's pool4 range (61001-65535).
        assert.match(
          table,
          /type nat hook postrouting priority srcnat; policy accept;\n\s*ip saddr @nat4_sources oifname "ens6" meta l4proto \{ 1, 6, 17 \} masquerade to :1024-61000\n\s*ip saddr @nat4_sources oifname "ens6" masquerade\n/,
        );
        assert.match(table, /oifname "ens6" counter name "metrics_tx_packets"/);
        assert.doesNotMatch(table, /ens5/);
        // Nothing else in the machine's ruleset.
        const tables = await nat.must(["nft", "list", "tables"]);
        assert.deepEqual(tables.trim().split("\n"), ["table inet podmin_nat"]);
      });

      await step("the sysctls nat.sh applied", async () => {
        const sysctl = async (key: string) => (await nat.must(["sysctl", "-n", key])).trim();
        for (
          const [key, value] of [
            ["net.ipv4.ip_forward", "1"],
            ["net.ipv6.conf.all.forwarding", "1"],
            ["net.ipv6.conf.ens5.accept_ra", "2"],
            ["net.ipv6.conf.ens6.accept_ra", "2"],
            ["net.ipv4.conf.ens6.send_redirects", "0"],
            ["net.ipv4.conf.all.rp_filter", "2"],
            // The private file (box_nat_overrides.ts), empty until nat.sh's sysctl wrote it.
            ["net.netfilter.nf_conntrack_max", "262144"],
          ]
        ) assert.equal(await sysctl(key), value, key);
      });

      await step("the policy routing through the stable ENI", async () => {
        const ip = (...args: string[]) => nat.must(["ip", ...args]);
        const rules4 = await ip("-4", "rule", "show");
        const rules6 = await ip("-6", "rule", "show");
        // Exactly one rule at each priority after the retry: every run replaces them.
        assert.match(rules4, re(`1100:\tfrom ${stable.ipv4} lookup 110`));
        assert.match(rules4, /^1101:\tfrom all iif ens6 lookup 110\s*$/m);
        assert.equal(rules4.match(/^110[01]:/gm)?.length, 2, rules4);
        assert.match(rules6, re(`1100:\tfrom ${DEFAULT_NAT64_PREFIX} lookup 110`));
        assert.equal(rules6.match(/^1100:/gm)?.length, 1, rules6);
        const table4 = (await ip("-4", "route", "show", "table", "110")).trim().split("\n");
        assert.deepEqual(table4.map((l) => l.trim()), [
          "default via 10.0.1.1 dev ens6",
          `${vpc.subnet4} dev ens6 scope link src ${stable.ipv4}`,
        ]);
        const table6 = (await ip("-6", "route", "show", "table", "110")).trim().split("\n");
        assert.equal(table6.length, 1, table6.join("\n"));
        assert.match(table6[0], /^default via fe80::1 dev ens6 /);
        // The kernel's decisions: Jool's IPv4 output (from pool4), forwarded IPv4 from the stable
        // ENI (source NAT) and Jool's replies (from the prefix) leave through it; the VM's own
        // traffic through the boot ENI.
        const get = async (...args: string[]) => (await ip(...args)).split("\n")[0];
        assert.match(
          await get("-4", "route", "get", "8.8.8.8", "from", stable.ipv4),
          /via 10\.0\.1\.1 dev ens6 table 110/,
        );
        assert.match(
          await get("-4", "route", "get", "8.8.8.8", "from", "10.0.7.7", "iif", "ens6"),
          /via 10\.0\.1\.1 dev ens6 table 110/,
        );
        assert.match(
          await get("-6", "route", "get", `${subnet}::a07`, "from", GLOBAL),
          /via fe80::1 dev ens6 table 110/,
        );
        assert.match(await get("-4", "route", "get", "8.8.8.8"), /via 10\.0\.1\.1 dev ens5 /);
        assert.match(await get("-6", "route", "get", "2001:db8::8"), /via fe80::1 dev ens5 /);
      });

      await step(
        "the NAT64 allowlist with packets from the VPC (the VPC routes the prefix to the stable ENI)",
        async () => {
          // Its retries would replace the table (and reset its counters) while packets are
          // counted: stopped, the unit leaves the ruleset and routes as they are.
          await nat.must(["systemctl", "stop", NAT_UNIT]);
          await vpc.route(DEFAULT_NAT64_PREFIX, stable.ipv6);
          await inVpc(["ip", "addr", "add", `${OUTSIDE}/128`, "dev", "vpc0", "nodad"]);
          const counter = async (name: string) => {
            const out = await nat.must(["nft", "list", "counter", "inet", "podmin_nat", name]);
            return Number(/packets (\d+)/.exec(out)?.[1]);
          };
          const counters = async () => ({
            source: await counter("nat64_denied_source"),
            destination: await counter("nat64_denied_destination"),
            // What passed prerouting (where Jool would have taken it) and was routed on.
            forwarded: Number(
              /^Ip6OutForwDatagrams\s+(\d+)$/m.exec(await nat.must(["cat", "/proc/net/snmp6"]))
                ?.[1],
            ),
          });
          /** A TCP SYN from `source` in the VPC to `[dest]:80` (nothing answers: no Jool). */
          const send = (source: string, dest: string) =>
            inVpc(["curl", "-sS", "--max-time", "1", "--interface", source, `http://[${dest}]/`]);
          const inside = `${subnet}::1`; // the VPC router's address
          const c0 = await counters();
          assert.deepEqual([c0.source, c0.destination], [0, 0]);
          await send(OUTSIDE, GLOBAL);
          const c1 = await counters();
          assert.ok(c1.source >= 1 && c1.destination === 0, JSON.stringify(c1));
          assert.equal(c1.forwarded, c0.forwarded, "dropped before it is routed");
          await send(inside, NON_GLOBAL);
          const c2 = await counters();
          assert.ok(c2.destination >= 1 && c2.source === c1.source, JSON.stringify(c2));
          assert.equal(c2.forwarded, c1.forwarded, "dropped before it is routed");
          await send(inside, GLOBAL);
          const c3 = await counters();
          assert.deepEqual([c3.source, c3.destination], [c2.source, c2.destination]);
          assert.ok(
            c3.forwarded > c2.forwarded,
            `an allowlisted packet passes: ${JSON.stringify(c3)}`,
          );
        },
      );
    } finally {
      await machine?.destroy();
      await vpc.close();
      await run.close();
    }
    // Nothing of the run is left: directory, namespaces, links, cgroups.
    await assert.rejects(Deno.stat(run.dir));
    const netns = await mustRun("ip", ["netns", "list"]);
    assert.ok(!netns.includes(run.id), netns);
    const links = await mustRun("ip", ["-o", "link", "show"]);
    assert.ok(!links.includes(run.id), links);
    assert.deepEqual(await cgroupDirs(run.id), []);
  },
);

/**
 * The dataplane cost benchmark's kube-proxy rule sets load into a real nftables (root) and hold
 * every Service: the nftables mode's batched endpoint choices included.
 */

import assert from "node:assert/strict";
import { nftIn, nsRun, sh } from "../support/dataplane_topology.ts";
import { testWith } from "../support/requirements.ts";
import {
  IPTABLES_MODE_TABLE,
  iptablesModeRules,
  NFTABLES_MODE_TABLE,
  nftablesModeRules,
  type RuleService,
} from "./kube_proxy_rules.ts";

const COUNT = 2_500; // three batches of endpoint choices

const services: RuleService[] = Array.from({ length: COUNT }, (_, k) => ({
  vip: `fd00:504d::${(k + 1).toString(16)}`,
  port: 80,
  protocol: "udp",
  targetPort: 8080,
  endpoints: ["fd00:a::1:0:0:30", "fd00:a::1:0:0:31"],
}));
const cluster = { podCidr: "fd00:a::1:0:0:0/80", serviceCidr: "fd00:504d::/112" };

async function load(ns: string, scripts: string[]): Promise<void> {
  for (const script of scripts) await nftIn(ns, script);
}

// deno-lint-ignore no-explicit-any
type NftItem = Record<string, any>;

async function list(ns: string, table: string): Promise<NftItem[]> {
  return JSON.parse(await nsRun(ns, "nft", ["-j", "list", "table", "ip6", table])).nftables;
}

testWith(
  "kube-proxy rule sets: nftables mode (batched) and iptables mode hold every Service",
  { root: true, tools: ["nft", "ip"] },
  async () => {
    const ns = `pkr${crypto.randomUUID().slice(0, 6)}`;
    await sh("ip", ["netns", "add", ns]);
    try {
      const maps = nftablesModeRules(services, cluster);
      assert.equal(maps.length, 1 + Math.ceil(COUNT / 1000));
      await load(ns, maps);
      const m = await list(ns, NFTABLES_MODE_TABLE);
      const serviceIps = m.find((i) => i.map?.name === "service-ips")?.map;
      assert.ok(serviceIps, "map service-ips");
      assert.equal(serviceIps.elem.length, COUNT);
      const choices = m.filter((i) => i.rule && JSON.stringify(i.rule.expr).includes('"numgen"'));
      assert.equal(choices.length, COUNT, "one endpoint choice per Service chain");
      const dnats = m.filter((i) => i.rule && JSON.stringify(i.rule.expr).includes('"dnat"'));
      assert.equal(dnats.length, COUNT * 2, "one DNAT per endpoint chain");

      await load(ns, iptablesModeRules(services, cluster));
      const c = await list(ns, IPTABLES_MODE_TABLE);
      const linear = c.filter((i) => i.rule?.chain === "services");
      assert.equal(linear.length, COUNT, "KUBE-SERVICES: one rule per Service port");
      const cDnats = c.filter((i) => i.rule && JSON.stringify(i.rule.expr).includes('"dnat"'));
      assert.equal(cDnats.length, COUNT * 2);
    } finally {
      await sh("ip", ["netns", "del", ns]);
    }
  },
);

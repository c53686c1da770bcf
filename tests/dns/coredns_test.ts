/**
 * Service names through a real CoreDNS (built from the Go module proxy by tests/setup.sh) with the
 * Corefile vmconfig generates: the agent's zone answers `<svc>.<ns>.svc.cluster.local` AAAA with
 * the Service's VIP and SRV for named ports; a new Service resolves after the next write, a
 * deleted one stops resolving; every other name is forwarded upstream (here: a second CoreDNS).
 */

import assert from "node:assert/strict";
import * as path from "node:path";
import { DnsPublisher } from "../../agent/dns/dns_publisher.ts";
import { DEFAULT_CLUSTER_DOMAIN, ServicesView } from "../../agent/services/services_view.ts";
import { applyResources, deleteResource } from "../../cli/desired_state.ts";
import { createFsBucket, FsStore } from "../../core/store/fs_store.ts";
import { silentLogger } from "../../core/kit/log.ts";
import { parseResource, type Resource } from "../../core/model/resources.ts";
import { runGenerator } from "../../vmconfig/node_files.ts";
import { freePort } from "../support/moto.ts";
import { nodeAgentArgs, spawnAgent, waitFor } from "../support/programs.ts";
import { testWith } from "../support/requirements.ts";
import { nodePeerProgram } from "../support/node_peers.ts";

export const COREDNS = nodePeerProgram("coredns");

function service(name: string, ports: { name?: string; port: number; protocol?: string }[]) {
  return parseResource({
    apiVersion: "podmin.dev/v1",
    kind: "Service",
    metadata: { name, namespace: "shop" },
    spec: {
      selector: { app: name },
      ports: ports.map((p) => ({ ...p, targetPort: 8080 })),
    },
  }) as Resource;
}

async function dig(
  port: number,
  name: string,
  type: string,
): Promise<{ status: string; answers: string[] }> {
  const out = await new Deno.Command("dig", {
    args: ["-p", String(port), "@127.0.0.1", "+time=1", "+tries=1", name, type],
    stdout: "piped",
    stderr: "piped",
  }).output();
  const text = new TextDecoder().decode(out.stdout);
  const status = /status: (\w+)/.exec(text)?.[1] ?? `dig failed: ${text}`;
  const answer = text.split(";; ANSWER SECTION:\n")[1]?.split("\n\n")[0] ?? "";
  const answers = answer.split("\n").filter(Boolean).map((l) => l.split(/\s+/).slice(3).join(" "));
  return { status, answers };
}

async function until<T>(what: string, f: () => Promise<T | undefined>, timeoutMs = 15_000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await f();
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

function startCoreDns(corefile: string, dir: string): Deno.ChildProcess {
  return new Deno.Command(COREDNS, {
    args: ["-conf", corefile],
    cwd: dir,
    stdout: "piped",
    stderr: "piped",
  }).spawn();
}

testWith(
  "CoreDNS [real]: Service names answer the VIP from the agent's zone; other names go upstream",
  { tools: ["dig"], files: [new URL(`file://${COREDNS}`)] },
  async () => {
    const tmp = await Deno.makeTempDir({ prefix: "podmin-dns-" });
    const procs: Deno.ChildProcess[] = [];
    try {
      await createFsBucket(path.join(tmp, "bucket"));
      const store = new FsStore({ root: path.join(tmp, "bucket") });
      await applyResources({
        store,
        resources: [service("web", [{ name: "http", port: 80 }, { port: 9090 }])],
      });
      const services = new ServicesView({ store, intervalMs: 0 });
      const dns = new DnsPublisher({
        services,
        dir: path.join(tmp, "dns"),
        domain: DEFAULT_CLUSTER_DOMAIN,
        log: silentLogger,
      });
      let status = await dns.pass();
      assert.equal(status.error, undefined);

      // The upstream resolver (the VPC resolver's role): a second CoreDNS with its own zone.
      const upPort = await freePort();
      await Deno.writeTextFile(
        path.join(tmp, "example.test.db"),
        "$ORIGIN example.test.\n@ 60 IN SOA ns hostmaster 1 60 30 3600 60\nwww 60 IN AAAA 2001:db8::80\n",
      );
      await Deno.writeTextFile(
        path.join(tmp, "Upstream"),
        `example.test:${upPort} {\n  bind 127.0.0.1\n  file ${tmp}/example.test.db\n}\n`,
      );
      procs.push(startCoreDns(path.join(tmp, "Upstream"), tmp));

      const port = await freePort();
      const corefile = await runGenerator({
        name: "gen_corefile",
        args: [
          "127.0.0.1",
          String(port),
          dns.zoneFile,
          DEFAULT_CLUSTER_DOMAIN,
          `127.0.0.1:${upPort}`,
        ],
      });
      await Deno.writeTextFile(path.join(tmp, "Corefile"), corefile);
      procs.push(startCoreDns(path.join(tmp, "Corefile"), tmp));

      const vip = (await services.refresh(Date.now()), services.services()[0].entry.vip);
      const aaaa = await until("web's AAAA", async () => {
        const r = await dig(port, "web.shop.svc.cluster.local", "AAAA");
        return r.answers.length ? r : undefined;
      });
      assert.deepEqual(aaaa.answers, [`AAAA ${vip}`]);
      const srv = await dig(port, "_http._tcp.web.shop.svc.cluster.local", "SRV");
      assert.deepEqual(srv.answers, ["SRV 0 100 80 web.shop.svc.cluster.local."]);
      // An unnamed port has no SRV record.
      assert.equal(
        (await dig(port, "_9090._tcp.web.shop.svc.cluster.local", "SRV")).status,
        "NXDOMAIN",
      );

      // A new Service resolves after the agent's next write; a deleted one stops resolving.
      await applyResources({ store, resources: [service("api", [{ name: "grpc", port: 443 }])] });
      status = await dns.pass();
      await until("api's AAAA", async () => {
        const r = await dig(port, "api.shop.svc.cluster.local", "AAAA");
        return r.answers.length ? r : undefined;
      });
      await deleteResource({ store, kind: "Service", namespace: "shop", name: "web" });
      await dns.pass();
      await until("web gone", async () => {
        const r = await dig(port, "web.shop.svc.cluster.local", "AAAA");
        return r.status === "NXDOMAIN" ? r : undefined;
      });

      // Everything else is forwarded.
      const www = await dig(port, "www.example.test", "AAAA");
      assert.deepEqual(www.answers, ["AAAA 2001:db8::80"]);
    } finally {
      for (const p of procs) {
        try {
          p.kill("SIGTERM");
        } catch { /* gone */ }
        await p.output().catch(() => {});
      }
      await Deno.remove(tmp, { recursive: true });
    }
  },
);

Deno.test("podmin-agent run --dns-dir keeps the zone file of the cluster's Services", async () => {
  const tmp = await Deno.makeTempDir({ prefix: "podmin-dns-agent-" });
  try {
    const bucketDir = path.join(tmp, "bucket");
    await createFsBucket(bucketDir);
    const store = new FsStore({ root: bucketDir });
    await applyResources({ store, resources: [service("web", [{ name: "http", port: 80 }])] });
    const agent = spawnAgent([
      ...nodeAgentArgs({ bucket: `file://${bucketDir}`, nodeGroup: "workers", base: tmp }),
      "--registry-listen",
      "off",
      "--interval",
      "200ms",
      "--dns-dir",
      path.join(tmp, "dns"),
    ]);
    try {
      const zone = path.join(tmp, "dns", "cluster.local.db");
      const read = () => Deno.readTextFile(zone).catch(() => "");
      await waitFor(
        "the zone with web",
        async () => /^web\.shop\.svc IN AAAA /m.test(await read()),
      );
      await deleteResource({ store, kind: "Service", namespace: "shop", name: "web" });
      await waitFor("the zone without web", async () => !/web\.shop\.svc/.test(await read()));
    } finally {
      agent.kill("SIGTERM");
      await agent.status;
      await agent.stderr.cancel().catch(() => {});
    }
  } finally {
    await Deno.remove(tmp, { recursive: true });
  }
});

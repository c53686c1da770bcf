/**
 * `deno task demo` (cli/demo.ts) end to end, as a new user runs it from the repository: as root it
 * downloads the node programs through the digest-checked cache — here from a local file server
 * standing in for the vendors' URLs, serving the test-built pinned peers packed as the vendors
 * pack them (containerd tar.gz with bin/, crictl and CoreDNS tgz, kubelet and runc raw, CNI
 * plugins tgz), through a catalogue whose sha256 are their real digests — brings up `podmin
 * local`, and must show the Service answering by name from the host and from a Pod, and leave
 * nothing behind. Also: the no-root fallback, and the message when a download is unreachable.
 */

import assert from "node:assert/strict";
import * as path from "node:path";
import { hasLoopbackAddress, localDnsAddress } from "../../cli/local/node_dns.ts";
import { serveFiles } from "../support/file_server.ts";
import { freePort } from "../support/moto.ts";
import { testWith } from "../support/requirements.ts";
import { noOtherHostKubelet } from "../support/host_kubelet.ts";
import { catalogOf, servedArtifacts, vendorArtifacts } from "../support/vendor_artifacts.ts";

const DEMO = new URL("../../cli/demo.ts", import.meta.url).pathname;

/**
 * Runs the demo; `asNonRoot` in a new user namespace without a mapping, where the process is
 * uid 65534 (not root) yet still owns root's files (the repository, Deno's cache).
 */
async function runDemo(args: string[], env: Record<string, string>, asNonRoot = false) {
  const argv = [Deno.execPath(), "run", "-q", "--allow-all", DEMO, ...args];
  const out = await new Deno.Command(asNonRoot ? "unshare" : argv[0], {
    args: asNonRoot ? ["--user", "--", ...argv] : argv.slice(1),
    env,
    stdout: "piped",
    stderr: "piped",
  }).output();
  const dec = new TextDecoder();
  return { code: out.code, text: dec.decode(out.stdout) + dec.decode(out.stderr) };
}

testWith(
  "demo: as root, the pinned programs downloaded and verified from a local file server; the Service answers by name from the host and from a Pod; a second version; local down leaves nothing",
  { root: true, tools: ["nsenter", "unshare", "runc", "ip", "tar"] },
  async () => {
    const work = await Deno.makeTempDir({ prefix: "podmin-demo-test-" });
    const stateDir = path.join(work, "state");
    const cache = path.join(work, "cache");
    const { files, sha } = servedArtifacts(await vendorArtifacts(work));
    const server = serveFiles(files);
    const catalogFile = path.join(work, "catalog.json");
    await Deno.writeTextFile(catalogFile, JSON.stringify(catalogOf(sha, server.url)));
    const podPrefix = "fd00:706d:6e:37::/80";
    try {
      await noOtherHostKubelet();
      const { code, text } = await runDemo([
        "--dependency-catalog",
        catalogFile,
        "--state-dir",
        stateDir,
        "--pod-prefix",
        podPrefix,
        "--registry-port",
        String(await freePort()),
      ], { ...Deno.env.toObject(), PODMIN_CACHE_DIR: cache });
      console.error(text);
      assert.equal(code, 0, text);
      // The download-and-verify path ran: every file fetched once (local up reused the cache).
      for (const name of files.keys()) assert.equal(server.hits.get(name), 1, name);
      assert.match(text, /download kubelet 0\.0\.0-test: .* done/);
      assert.match(text, /every program matches its pinned sha256/);
      const dns = localDnsAddress(podPrefix);
      // From the host: CoreDNS answers the name, the VIP answers (socket programs).
      const vip = new RegExp(
        `dig \\+short @${dns} AAAA hello\\.default\\.svc\\.cluster\\.local → (\\S+)`,
      ).exec(text)?.[1];
      assert.ok(vip, text);
      assert.ok(
        text.includes(
          `curl http://[${vip}]/ → hello from podmin (image demo:1.0, Pod hello-podmin-local)`,
        ),
        text,
      );
      // From the client Pod: its resolv.conf's nameserver, the search domain, the VIP.
      assert.ok(
        text.includes(
          `hello.default.svc.cluster.local is ${vip} (nameserver ${dns}); GET http://[${vip}]:80/`,
        ),
        text,
      );
      assert.match(text, /^ {5}hello from podmin \(image demo:1\.0, Pod hello-podmin-local\)$/m);
      // The second version answers, from the host and from the Pod.
      // The second version runs in a surge Pod named after its spec (spec §7.1).
      const v2Pod = "hello-[0-9a-f]{8}-podmin-local";
      assert.match(
        text,
        new RegExp(
          `curl http://\\[${vip}\\]/ → hello again from podmin \\(image demo:2\\.0, Pod ${v2Pod}\\)`,
        ),
      );
      assert.match(
        text,
        new RegExp(`^ {5}hello again from podmin \\(image demo:2\\.0, Pod ${v2Pod}\\)$`, "m"),
      );
      assert.match(text, /^Time to the first answered request: \d+\.\d s\.$/m);
      assert.match(text, /local node removed/);
      // Nothing left: no state, mounts, address, processes, files.
      await assert.rejects(Deno.stat(stateDir), "the state directory is gone");
      assert.equal(await hasLoopbackAddress(dns), false);
      assert.ok(!(await Deno.readTextFile("/proc/self/mountinfo")).includes(stateDir));
      for await (const e of Deno.readDir("/proc")) {
        if (!/^\d+$/.test(e.name)) continue;
        const cmd = await Deno.readTextFile(`/proc/${e.name}/cmdline`).catch(() => "");
        assert.ok(!cmd.includes(stateDir), `process ${e.name} left: ${cmd}`);
      }
      const demoFiles = /files (\/\S+)\)/.exec(text)?.[1];
      assert.ok(demoFiles);
      await assert.rejects(Deno.stat(demoFiles), "the demo's files are gone");
    } finally {
      try {
        await Deno.stat(path.join(stateDir, "state.json"));
        await new Deno.Command(Deno.execPath(), {
          args: [
            "run",
            "-q",
            "--allow-all",
            new URL("../../cli/main.ts", import.meta.url).pathname,
            "local",
            "down",
            "--state-dir",
            stateDir,
            "--purge",
          ],
        }).output();
      } catch { /* the demo removed it */ }
      await server.close();
      await Deno.remove(work, { recursive: true }).catch(() => {});
    }
  },
);

testWith(
  "demo: a download that cannot be reached names its URL and the two ways forward, and nothing is brought up",
  { root: true },
  async () => {
    const work = await Deno.makeTempDir({ prefix: "podmin-demo-offline-" });
    const stateDir = path.join(work, "state");
    const port = await freePort(); // nothing listens there
    const zeros = "0".repeat(64);
    const catalog = catalogOf(
      new Map(["containerd", "runc", "kubelet", "crictl", "coredns", "cni-plugins"].map((n) => [
        n,
        zeros,
      ])),
      (f) => `http://127.0.0.1:${port}/${f}`,
    );
    await Deno.writeTextFile(path.join(work, "catalog.json"), JSON.stringify(catalog));
    try {
      const { code, text } = await runDemo(
        ["--dependency-catalog", path.join(work, "catalog.json"), "--state-dir", stateDir],
        { ...Deno.env.toObject(), PODMIN_CACHE_DIR: path.join(work, "cache") },
      );
      assert.equal(code, 1, text);
      assert.ok(
        text.includes(
          `✗ cannot download containerd 0.0.0-test from http://127.0.0.1:${port}/containerd.tar.gz`,
        ),
        text,
      );
      assert.match(text, /sudo deno task demo --bin-dir DIR/);
      assert.match(text, /sudo deno task demo --build-from-source/);
      await assert.rejects(Deno.stat(path.join(stateDir, "state.json")), "no node was brought up");
    } finally {
      await Deno.remove(work, { recursive: true }).catch(() => {});
    }
  },
);

testWith(
  "demo: without root it says why in one line and runs the no-root walkthrough",
  { root: true, tools: ["unshare"] },
  async () => {
    const work = await Deno.makeTempDir({ prefix: "podmin-demo-noroot-" });
    try {
      const { code, text } = await runDemo([], {
        ...Deno.env.toObject(),
        PODMIN_DEMO_DIR: path.join(work, "demo"),
      }, true);
      assert.equal(code, 0, text);
      const [first] = text.split("\n");
      assert.equal(
        first,
        "demo: a real node needs root (sudo npx -y deno@2.9.6 task demo): running the no-root " +
          "walkthrough instead (a plan and the deploy spine)",
      );
      assert.match(text, /== podmin setup --dry-run/);
      assert.match(text, /kubelet static Pod manifest written by the agent/);
    } finally {
      await Deno.remove(work, { recursive: true }).catch(() => {});
    }
  },
);

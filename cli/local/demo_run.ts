/**
 * `deno task demo` (cli/demo.ts): Podmin's main job on a real single-node cluster on this host.
 * It runs the commands a person would type — `podmin local up`, `push`, `apply`, `get`, `local
 * status`, `local exec -- crictl …`, `local down` — each announced by one line of what happens
 * and the command, with their own output below. Between them it builds the demo image
 * (demo_image.ts), waits for readiness and asks the Service by name from the host (the node's
 * CoreDNS, then the VIP, which the dataplane's socket programs translate) and from a client Pod.
 * Without root or off Linux it says why and runs the no-root walkthrough (cli/demo.sh).
 */

import * as path from "node:path";
import { parseArgs } from "node:util";
import { PodminError } from "../../core/kit/errors.ts";
import { REGISTRY_HOSTNAME } from "../../core/model/image_ref.ts";
import { defaultCacheDir } from "../setup/dependency_cache.ts";
import { readCatalogFile } from "../setup/dependency_catalog.ts";
import { resolveCatalog } from "../setup/vendor_checksum.ts";
import { writeDemoImageLayout } from "./demo_image.ts";
import { LOCAL_DEFAULTS } from "./local_defaults.ts";
import { nodePaths, readState } from "./local_node.ts";
import { fetchPinnedBinaries, PinnedDownloadError } from "./node_binaries.ts";
import { buildFromSource } from "./source_build.ts";
import { DEFAULT_CATALOG } from "../setup/default_catalog.ts";
import { forEachLine } from "../../core/kit/stream_lines.ts";

const HELP = `Usage: sudo deno task demo [flags]

Brings up a real single-node Podmin cluster on this host (podmin local), builds and
pushes a demo image, applies a Deployment and a Service, asks the Service by name from
the host and from a client Pod, applies a second version, and removes everything
(unless --keep). Needs root on Linux; otherwise it runs the no-root walkthrough.

Flags:
  --keep                     leave the node running and print commands to explore it
  --bin-dir DIR              node programs built here (repeatable) instead of the
                             pinned downloads (containerd, containerd-shim-runc-v2,
                             kubelet, crictl, coredns; runc from PATH)
  --build-from-source        build the pinned kubelet, containerd, crictl and CoreDNS
                             from the Go module proxy (needs Go; tens of minutes the
                             first time, cached by version) where the vendors'
                             downloads are unreachable; runc from PATH
  --cni-bin-dir DIR          ptp, host-local, loopback (default /opt/cni/bin, /usr/lib/cni)
  --dependency-catalog FILE  pins to download instead of the embedded catalogue
                             (the JSON shape of podmin setup --dependency-catalog)
  --state-dir DIR            where the node lives (default ${LOCAL_DEFAULTS.stateDir})
  --pod-prefix PREFIX        IPv6 /80 of the Pods (default ${LOCAL_DEFAULTS.podPrefix})
  --registry-port N          the node's loopback registry port (default ${LOCAL_DEFAULTS.registryPort})
  --timeout SECONDS          how long to wait for each step (default 180)`;

/** A demo step failed; the message says which and why. */
export class DemoError extends PodminError {}

/** Options of `runDemo`. */
export interface DemoOptions {
  args: string[];
  /** Output (default console.log); every line of the demo goes here. */
  out?: (line: string) => void;
}

const CLI_MAIN = new URL("../main.ts", import.meta.url).pathname;
const AGENT_MAIN = new URL("../../agent/main.ts", import.meta.url).pathname;
const NO_ROOT_DEMO = new URL("../demo.sh", import.meta.url).pathname;
const SERVICE_NAME = "hello.default.svc.cluster.local";

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const seconds = (ms: number) => `${(ms / 1000).toFixed(1)} s`;

/** The YAML the demo applies (version 1, then 2). */
export function demoManifest(o: { version: string; greeting: string }): string {
  return `apiVersion: podmin.dev/v1
kind: Deployment
metadata: {name: hello}
spec:
  nodeGroup: default
  template:
    metadata: {labels: {app: hello}}
    spec:
      terminationGracePeriodSeconds: 5
      containers:
        - name: hello
          image: ${REGISTRY_HOSTNAME}/apps/demo:${o.version}
          args: ["serve", "8080"]
          env: [{name: GREETING, value: "${o.greeting}"}]
---
apiVersion: podmin.dev/v1
kind: Service
metadata: {name: hello}
spec:
  selector: {app: hello}
  ports: [{name: http, port: 80, targetPort: 8080}]
---
apiVersion: podmin.dev/v1
kind: Deployment
metadata: {name: client}
spec:
  nodeGroup: default
  template:
    spec:
      terminationGracePeriodSeconds: 1
      containers:
        - name: client
          image: ${REGISTRY_HOSTNAME}/apps/demo:1.0
          args: ["sleep"]
`;
}

/** Runs the demo; returns the exit code. */
export async function runDemo(o: DemoOptions): Promise<number> {
  const out = o.out ?? ((l: string) => console.log(l));
  let v;
  try {
    v = parseArgs({
      args: o.args,
      options: {
        keep: { type: "boolean", default: false },
        "bin-dir": { type: "string", multiple: true },
        "build-from-source": { type: "boolean", default: false },
        "cni-bin-dir": { type: "string" },
        "dependency-catalog": { type: "string" },
        "state-dir": { type: "string", default: LOCAL_DEFAULTS.stateDir },
        "pod-prefix": { type: "string" },
        "registry-port": { type: "string" },
        timeout: { type: "string", default: "180" },
        help: { type: "boolean", short: "h", default: false },
      },
      strict: true,
      allowPositionals: false,
    }).values;
  } catch (err) {
    out(`demo: ${(err as Error).message}`);
    out(HELP);
    return 2;
  }
  if (v.help) {
    out(HELP);
    return 0;
  }
  const why = Deno.build.os !== "linux"
    ? `this is ${Deno.build.os}, and a real node needs Linux`
    : Deno.uid() !== 0
    ? "a real node needs root (sudo npx -y deno@2.9.6 task demo)"
    : undefined;
  if (why) {
    out(`demo: ${why}: running the no-root walkthrough instead (a plan and the deploy spine)`);
    const child = new Deno.Command("bash", { args: [NO_ROOT_DEMO] }).spawn();
    return (await child.status).code;
  }
  try {
    return await new Demo({
      out,
      keep: v.keep!,
      binDirs: v["bin-dir"] ?? [],
      buildFromSource: v["build-from-source"]!,
      cniBinDir: v["cni-bin-dir"],
      catalogFile: v["dependency-catalog"],
      stateDir: path.resolve(v["state-dir"]!),
      podPrefix: v["pod-prefix"],
      registryPort: v["registry-port"],
      timeoutMs: Number(v.timeout) * 1000,
    }).run();
  } catch (err) {
    if (err instanceof PinnedDownloadError) {
      out("");
      out(`✗ cannot download ${err.pinned.name} ${err.pinned.version} from ${err.pinned.url}`);
      out(`  (${String((err.cause as Error)?.message ?? err.message).split("\n")[0]})`);
      out("  Two ways forward on a host that cannot reach it:");
      out("  1. node programs built here:");
      out("       sudo deno task demo --bin-dir DIR [--bin-dir DIR…]");
      out("     (containerd, containerd-shim-runc-v2, kubelet, crictl, coredns; runc from PATH,");
      out("     the CNI plugins from /opt/cni/bin or /usr/lib/cni)");
      out(
        "  2. build the pinned versions from the Go module proxy (tens of minutes, then cached):",
      );
      out("       sudo deno task demo --build-from-source");
      out("  (or --dependency-catalog FILE with URLs this host reaches)");
      return 1;
    }
    if (err instanceof PodminError) {
      out(`✗ ${err.message}`);
      if (err.hint) out(`  hint: ${err.hint}`);
      return 1;
    }
    throw err;
  }
}

interface DemoConfig {
  out: (line: string) => void;
  keep: boolean;
  binDirs: string[];
  /** Build the pinned programs from source instead of downloading them (`--build-from-source`). */
  buildFromSource: boolean;
  cniBinDir?: string;
  catalogFile?: string;
  stateDir: string;
  podPrefix?: string;
  registryPort?: string;
  timeoutMs: number;
}

class Demo {
  readonly #c: DemoConfig;
  readonly #start = performance.now();
  #work = "";
  #bucket = "";
  #bucketWasThere = false;
  #nodeUp = false;
  #step = 0;

  constructor(c: DemoConfig) {
    this.#c = c;
  }

  #say(what: string, command?: string) {
    this.#step++;
    this.#c.out("");
    this.#c.out(`${this.#step}. ${what}`);
    if (command) this.#c.out(`   $ ${command}`);
  }

  #indent(text: string) {
    for (const l of text.replace(/\n$/, "").split("\n")) this.#c.out(`     ${l}`);
  }

  /** The node's flags a person adds when not on the defaults. */
  /** Asks the Service by name from inside the client Pod until it answers (with `want`). */
  async #askFromPod(what: string, clientId: string, want?: string): Promise<void> {
    await this.#until(what, async () => {
      const r = await this.#podmin(
        [
          "local",
          "exec",
          ...this.#nodeFlags(),
          "--",
          "crictl",
          "exec",
          clientId,
          "/demo",
          "get",
          "hello",
        ],
        { show: false, allowFail: true },
      );
      if (r.code !== 0 || (want && !r.text.includes(want))) return undefined;
      this.#indent(r.text);
      return true;
    });
  }

  #nodeFlags(): string[] {
    const f: string[] = [];
    if (this.#c.stateDir !== LOCAL_DEFAULTS.stateDir) f.push("--state-dir", this.#c.stateDir);
    return f;
  }

  /** `podmin ARGS` as this demo runs it; output streamed, indented, and returned. */
  async #podmin(
    args: string[],
    o: { show?: boolean; allowFail?: boolean } = {},
  ): Promise<{ code: number; text: string }> {
    const child = new Deno.Command(Deno.execPath(), {
      args: ["run", "-q", "--allow-all", CLI_MAIN, ...args],
      stdout: "piped",
      stderr: "piped",
    }).spawn();
    let text = "";
    const pump = (s: ReadableStream<Uint8Array>) =>
      forEachLine(s, (l, newline) => {
        text += newline ? `${l}\n` : l;
        if (o.show !== false) this.#c.out(`     ${l}`);
      });
    await Promise.all([pump(child.stdout), pump(child.stderr)]);
    const { code } = await child.status;
    if (code !== 0 && !o.allowFail) {
      if (o.show === false) this.#indent(text);
      throw new DemoError(`podmin ${args.join(" ")} exited with ${code}`);
    }
    return { code, text };
  }

  /** Polls `check` until it returns a value; progress every 10 s. */
  async #until<T>(what: string, check: () => Promise<T | undefined>): Promise<T> {
    const t0 = performance.now();
    let next = 10_000;
    for (;;) {
      const got = await check().catch(() => undefined);
      if (got !== undefined) return got;
      const waited = performance.now() - t0;
      if (waited > this.#c.timeoutMs) {
        throw new DemoError(`${what}: not done after ${seconds(waited)}`, {
          hint: `see 'sudo deno task podmin local status${
            this.#nodeFlags().map((f) => ` ${f}`).join("")
          }' and the daemons' logs in ${nodePaths(this.#c.stateDir).logs}`,
        });
      }
      if (waited > next) {
        this.#c.out(`     … still waiting for ${what} (${Math.round(waited / 1000)} s)`);
        next += 10_000;
      }
      await sleep(1000);
    }
  }

  async run(): Promise<number> {
    const c = this.#c;
    const p = nodePaths(c.stateDir);
    if (await readState(c.stateDir)) {
      throw new DemoError(`a local node is already recorded in ${c.stateDir}`, {
        hint: `remove it first (sudo deno task podmin local down${
          this.#nodeFlags().map((f) => ` ${f}`).join("")
        }) or give the demo another --state-dir`,
      });
    }
    this.#bucket = p.defaultBucket;
    const bucketDir = path.join(c.stateDir, "bucket");
    this.#bucketWasThere = await Deno.stat(bucketDir).then(() => true, () => false);
    this.#work = await Deno.makeTempDir({ prefix: "podmin-demo-" });
    const flags = this.#nodeFlags().map((f) => ` ${f}`).join("");
    const interrupted = () => {
      c.out("");
      c.out(
        `demo interrupted: what it brought up stays; remove it with ` +
          `'sudo deno task podmin local down${flags}${this.#bucketWasThere ? "" : " --purge"}'`,
      );
      Deno.exit(130);
    };
    Deno.addSignalListener("SIGINT", interrupted);
    c.out(`Podmin demo: a real node on this host (state ${c.stateDir}, files ${this.#work}).`);
    c.out(`The CLI below is this repository's: 'deno task podmin' = 'deno run -A cli/main.ts'.`);
    try {
      const upArgs = await this.#programs();
      const dns = await this.#node(upArgs);
      const file = await this.#deploy();
      await this.#ready();
      const { vip, first } = await this.#askFromHost(dns);
      const clientId = await this.#askFromClient();
      await this.#secondVersion({ file, vip, clientId });
      c.out("");
      c.out(`Time to the first answered request: ${seconds(first)}.`);
      return 0;
    } finally {
      Deno.removeSignalListener("SIGINT", interrupted);
      await this.#finish();
    }
  }

  /** Step 1: the node programs (given, built from source or fetched); returns `local up`'s arguments. */
  async #programs(): Promise<string[]> {
    const c = this.#c;
    // 1. Programs.
    const upArgs = ["local", "up", ...this.#nodeFlags()];
    if (c.binDirs.length) {
      for (const d of c.binDirs) upArgs.push("--bin-dir", d);
    } else if (c.buildFromSource) {
      const outRoot = path.join(defaultCacheDir(), "source-builds");
      this.#say(
        "Build the pinned kubelet, containerd, crictl and CoreDNS from the Go module proxy " +
          `(cached by version in ${outRoot}: tens of minutes the first time, then nothing)`,
        "sudo deno task demo --build-from-source",
      );
      const catalog = c.catalogFile
        ? await resolveCatalog(await readCatalogFile(c.catalogFile))
        : DEFAULT_CATALOG;
      const dirs = await buildFromSource({ catalog, outRoot, log: (l) => c.out(`     ${l}`) });
      for (const d of dirs) upArgs.push("--bin-dir", d);
      c.out(`     built or cached: ${dirs.map((d) => path.basename(d)).join(", ")}`);
    } else {
      this.#say(
        "Fetch the pinned node programs (containerd, runc, kubelet, crictl, CoreDNS, CNI plugins) " +
          `into the digest-checked cache ${defaultCacheDir()}; 'local up' does this itself`,
      );
      const catalog = c.catalogFile
        ? await resolveCatalog(await readCatalogFile(c.catalogFile), {
          log: (l) => c.out(`     ${l}`),
        })
        : undefined;
      await fetchPinnedBinaries({
        dir: path.join(c.stateDir, "downloads"),
        cacheDir: defaultCacheDir(),
        log: (l) => c.out(`     ${l}`),
        catalog,
      });
      c.out("     every program matches its pinned sha256");
      if (c.catalogFile) upArgs.push("--dependency-catalog", c.catalogFile);
    }
    if (c.cniBinDir) upArgs.push("--cni-bin-dir", c.cniBinDir);
    if (c.podPrefix) upArgs.push("--pod-prefix", c.podPrefix);
    if (c.registryPort) upArgs.push("--registry-port", c.registryPort);
    return upArgs;
  }

  /** Step 2: brings the node up; returns its DNS address. */
  async #node(upArgs: string[]): Promise<string> {
    const c = this.#c;
    // 2. The node.
    await portFree(10248, "kubelet's healthz port 10248 is in use: another kubelet runs here");
    this.#say(
      "Bring up the node: the bucket (a directory), podmin-agent with its loopback registry, " +
        "containerd, CoreDNS and a standalone kubelet, in a private mount namespace",
      `sudo deno task podmin ${upArgs.join(" ")}`,
    );
    this.#nodeUp = true;
    await this.#podmin(upArgs);
    const state = (await readState(c.stateDir))!;
    const dns = state.dnsAddress!;
    c.out(`   (below, $B is ${this.#bucket})`);
    return dns;
  }

  /** Steps 3–4: builds and pushes version 1.0, applies the demo file; returns the file. */
  async #deploy(): Promise<string> {
    const B = `--bucket ${this.#bucket}`;
    // 3. The image.
    const v1 = await writeDemoImageLayout({
      dir: path.join(this.#work, "demo-1.0"),
      version: "1.0",
    });
    this.#say(
      `Build the demo image here (one static program, /demo: an HTTP server and a client; ` +
        `no registry account) as an OCI layout in ${v1}, and push it into the bucket`,
      `sudo deno task podmin --bucket $B push oci:${v1}:1.0 apps/demo:1.0`,
    );
    await this.#podmin([...B.split(" "), "push", `oci:${v1}:1.0`, "apps/demo:1.0"]);

    // 4. Apply.
    const file = path.join(this.#work, "demo.yaml");
    await Deno.writeTextFile(
      file,
      demoManifest({ version: "1.0", greeting: "hello from podmin" }),
    );
    this.#say(
      "Apply a Deployment 'hello' (the server), a Service 'hello' (port 80 → 8080) and a " +
        `Deployment 'client' (waits, to ask from inside a Pod); the file:`,
      `sudo deno task podmin --bucket $B apply -f ${file}`,
    );
    this.#indent(await Deno.readTextFile(file));
    await this.#podmin([...B.split(" "), "apply", "-f", file]);
    return file;
  }

  /** Steps 5–6: waits for the Pods, then shows the bucket's view of the cluster. */
  async #ready(): Promise<void> {
    const c = this.#c;
    const B = `--bucket ${this.#bucket}`;
    // 5. Ready.
    this.#say(
      "Wait until both Pods are Ready (kubelet's Pods API, as the agent reads it)",
      `sudo deno task podmin local status${this.#nodeFlags().map((f) => ` ${f}`).join("")}`,
    );
    const t0 = performance.now();
    await this.#until("the Pods Ready", async () => {
      const pods = await this.#pods();
      return ["hello", "client"].every((n) =>
          pods.some((p) => p.name.startsWith(`${n}-`) && p.ready)
        )
        ? true
        : undefined;
    });
    c.out(`     Ready after ${seconds(performance.now() - t0)}`);
    await this.#podmin(["local", "status", ...this.#nodeFlags()]);

    // 6. The cluster's view.
    this.#say("What the bucket says", `sudo deno task podmin --bucket $B get nodes`);
    await this.#podmin([...B.split(" "), "get", "nodes"]);
    c.out(`   $ sudo deno task podmin --bucket $B get deployments`);
    await this.#podmin([...B.split(" "), "get", "deployments"]);
    c.out(`   $ sudo deno task podmin --bucket $B get services`);
    const services = await this.#until("the Service's endpoint in the bucket", async () => {
      const r = await this.#podmin([...B.split(" "), "get", "services"], { show: false });
      const row = r.text.split("\n").find((l) => /^default\s+hello\s/.test(l));
      return row && row.split(/\s+/)[4] === "1" ? r.text : undefined;
    });
    this.#indent(services);
    c.out(`   $ sudo deno task podmin --bucket $B describe service hello`);
    await this.#podmin([...B.split(" "), "describe", "service", "hello"]);
  }

  /** Step 7: asks the Service by name from the host; returns its VIP and the first answer's time. */
  async #askFromHost(dns: string): Promise<{ vip: string; first: number }> {
    const c = this.#c;
    // 7. From the host, by name.
    this.#say(
      `Ask the Service by name from the host: the node's CoreDNS (${dns}) answers the VIP; ` +
        "the connection to the VIP is translated to the Pod by the dataplane's socket programs",
      `curl "http://[$(dig +short @${dns} AAAA ${SERVICE_NAME})]/"`,
    );
    const vip = await this.#until("the Service name in CoreDNS", async () => {
      const got = await Deno.resolveDns(SERVICE_NAME, "AAAA", {
        nameServer: { ipAddr: dns, port: 53 },
      });
      return got[0];
    });
    c.out(`     dig +short @${dns} AAAA ${SERVICE_NAME} → ${vip}`);
    const answer = await this.#until("an answer through the VIP", () => httpGet(vip));
    const first = performance.now() - this.#start;
    c.out(`     curl http://[${vip}]/ → ${answer.trim()}`);
    c.out(`     (first answer ${seconds(first)} after the demo started)`);
    return { vip, first };
  }

  /** Step 8: asks it by name from the client Pod; returns the client container's id. */
  async #askFromClient(): Promise<string> {
    // 8. From a Pod, by name.
    const clientId = (await this.#until("the client container", async () => {
      const r = await this.#podmin(
        ["local", "exec", ...this.#nodeFlags(), "--", "crictl", "ps", "-q", "--name", "client"],
        { show: false },
      );
      return r.text.trim().split("\n")[0] || undefined;
    })).slice(0, 13);
    this.#say(
      "Ask it by name from the client Pod: /demo reads the Pod's resolv.conf (the node's " +
        "CoreDNS, search default.svc.cluster.local) and connects to the VIP",
      `sudo deno task podmin local exec${
        this.#nodeFlags().map((f) => ` ${f}`).join("")
      } -- crictl exec ${clientId} /demo get hello`,
    );
    await this.#askFromPod("an answer inside the client Pod", clientId);
    return clientId;
  }

  /** Step 9: version 2.0 pushed and applied while a prober asks the Service. */
  async #secondVersion(o: { file: string; vip: string; clientId: string }): Promise<void> {
    const { file, vip, clientId } = o;
    const c = this.#c;
    const B = `--bucket ${this.#bucket}`;
    // 9. Version 2.
    const v2 = await writeDemoImageLayout({
      dir: path.join(this.#work, "demo-2.0"),
      version: "2.0",
    });
    this.#say(
      "A second version: image demo:2.0 and another GREETING; push it and apply the changed file",
      `sudo deno task podmin --bucket $B push oci:${v2}:2.0 apps/demo:2.0`,
    );
    await this.#podmin([...B.split(" "), "push", `oci:${v2}:2.0`, "apps/demo:2.0"]);
    await Deno.writeTextFile(
      file,
      demoManifest({ version: "2.0", greeting: "hello again from podmin" }),
    );
    c.out(`   $ sudo deno task podmin --bucket $B diff -f ${file}`);
    await this.#podmin([...B.split(" "), "diff", "-f", file], { allowFail: true });
    c.out(`   $ sudo deno task podmin --bucket $B apply -f ${file}`);
    const probe = new Prober(vip);
    probe.start();
    await this.#podmin([...B.split(" "), "apply", "-f", file]);
    this.#say(
      "The agent starts the new Pod beside the old one and removes the old one once kubelet " +
        "reports the new one Ready (a surge on the node, spec §7.1). Asking the Service every " +
        "0.25 s meanwhile",
    );
    const t2 = performance.now();
    await this.#until(
      "the new version answering",
      () => Promise.resolve(probe.last?.includes("demo:2.0") ? true : undefined),
    );
    await probe.stop();
    c.out(
      `     answered by demo:2.0 after ${seconds(performance.now() - t2)}; of ${probe.total} ` +
        `requests, ${probe.failed} got no answer (for ${seconds(probe.gapMs)}) during the rollout`,
    );
    c.out(`     curl http://[${vip}]/ → ${probe.last!.trim()}`);
    c.out(`   $ sudo deno task podmin --bucket $B get deployments`);
    await this.#podmin([...B.split(" "), "get", "deployments"]);
    c.out(
      `   $ sudo deno task podmin local exec${
        this.#nodeFlags().map((f) => ` ${f}`).join("")
      } -- crictl exec ${clientId} /demo get hello`,
    );
    await this.#askFromPod("an answer of demo:2.0 inside the client Pod", clientId, "demo:2.0");
  }

  /** The Pods kubelet reports (the agent's Pods API client, in the node's view). */
  async #pods(): Promise<Array<{ name: string; ready: boolean }>> {
    const s = await readState(this.#c.stateDir);
    if (!s?.mountNs) return [];
    const agent = s.agentCommand ?? [Deno.execPath(), "run", "--allow-all", AGENT_MAIN];
    const r = await new Deno.Command("nsenter", {
      args: [`--mount=${s.mountNs}`, "--", ...agent, "pods", "-o", "json"],
      stdout: "piped",
      stderr: "null",
    }).output();
    if (!r.success) return [];
    return new TextDecoder().decode(r.stdout).trim().split("\n").filter(Boolean).map((l) =>
      JSON.parse(l)
    );
  }

  async #finish() {
    const c = this.#c;
    const flags = this.#nodeFlags().map((f) => ` ${f}`).join("");
    if (c.keep && this.#nodeUp) {
      c.out("");
      c.out("The node keeps running (--keep). Explore it:");
      c.out(`  B=${this.#bucket}`);
      c.out(`  sudo deno task podmin local status${flags}`);
      c.out(`  sudo deno task podmin --bucket $B get services -o wide`);
      c.out(`  sudo deno task podmin --bucket $B describe service hello`);
      c.out(`  sudo deno task podmin local exec${flags} -- crictl ps`);
      c.out(`  sudo deno task podmin local exec${flags} -- crictl logs CONTAINER-ID`);
      c.out(`  sudo deno task agent dataplane status`);
      c.out(
        `  sudo deno task podmin --bucket $B apply -f ${this.#work}/demo.yaml   # edit it first`,
      );
      c.out(`  sudo deno task podmin local down${flags}${this.#bucketWasThere ? "" : " --purge"}`);
      return;
    }
    if (this.#nodeUp) {
      const args = [
        "local",
        "down",
        ...this.#nodeFlags(),
        ...(this.#bucketWasThere ? [] : ["--purge"]),
      ];
      this.#say(
        "Remove exactly what 'up' made" + (this.#bucketWasThere ? "" : ", and the demo's bucket"),
        `sudo deno task podmin ${args.join(" ")}`,
      );
      await this.#podmin(args, { allowFail: true });
    }
    await Deno.remove(path.join(c.stateDir, "downloads"), { recursive: true }).catch(() => {});
    if (this.#work) await Deno.remove(this.#work, { recursive: true }).catch(() => {});
    // The state directory itself, when the demo left it empty.
    await Deno.remove(c.stateDir).catch(() => {});
  }
}

/** Fails when something listens on 127.0.0.1:`port`. */
async function portFree(port: number, message: string): Promise<void> {
  try {
    const conn = await Deno.connect({ hostname: "127.0.0.1", port });
    conn.close();
  } catch {
    return;
  }
  throw new DemoError(message, {
    hint: "stop it first (pgrep -a kubelet), or wait for the other podmin local to finish",
  });
}

/** GET http://[vip]/ with a short timeout; the body on a 2xx, else undefined. */
async function httpGet(vip: string): Promise<string | undefined> {
  const res = await fetch(`http://[${vip}]/`, { signal: AbortSignal.timeout(2000) });
  const text = await res.text();
  return res.ok ? text : undefined;
}

/** Asks the VIP every 250 ms, counting answers and failures (the replacement's gap). */
class Prober {
  total = 0;
  failed = 0;
  gapMs = 0;
  last?: string;
  #running = false;
  #done?: Promise<void>;

  constructor(readonly vip: string) {}

  start() {
    this.#running = true;
    this.#done = (async () => {
      let failingSince: number | undefined;
      while (this.#running) {
        const t = performance.now();
        this.total++;
        const got = await httpGet(this.vip).catch(() => undefined);
        if (got === undefined) {
          this.failed++;
          failingSince ??= t;
        } else {
          this.last = got;
          if (failingSince !== undefined) this.gapMs += performance.now() - failingSince;
          failingSince = undefined;
        }
        await sleep(Math.max(0, 250 - (performance.now() - t)));
      }
    })();
  }

  async stop() {
    this.#running = false;
    await this.#done;
  }
}

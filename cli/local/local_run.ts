/** `podmin local`'s implementation: up, down, status and exec (help and flags: local_command.ts). */

import * as path from "node:path";
import { agentV8FlagsArg } from "../../core/model/agent_runtime_settings.ts";
import type { CommandContext } from "../../core/kit/cli_kit.ts";
import { UsageError } from "../../core/kit/errors.ts";
import { defaultCacheDir } from "../setup/dependency_cache.ts";
import { readCatalogFile } from "../setup/dependency_catalog.ts";
import { resolveCatalog } from "../setup/vendor_checksum.ts";
import { LOCAL_DEFAULTS } from "./local_defaults.ts";
import {
  DAEMONS,
  daemonsRunning,
  localDown,
  LocalNodeError,
  localUp,
  nodePaths,
  readState,
  requireLocalHost,
} from "./local_node.ts";
import { fetchPinnedBinaries, resolveBinaries } from "./node_binaries.ts";
import { lastErrorLines } from "./node_processes.ts";
import { table } from "../output_format.ts";

/** The argv that runs podmin-agent from here. */
async function agentCommand(explicit?: string): Promise<string[]> {
  if (explicit) return [path.resolve(explicit)];
  const source = new URL("../../agent/main.ts", import.meta.url);
  if (source.protocol === "file:") {
    try {
      await Deno.stat(source);
      return [Deno.execPath(), "run", "--allow-all", agentV8FlagsArg(), source.pathname];
    } catch { /* not a source tree */ }
  }
  const beside = path.join(path.dirname(Deno.execPath()), "podmin-agent");
  try {
    await Deno.stat(beside);
    return [beside];
  } catch {
    return ["podmin-agent"];
  }
}

async function inNode(mountNs: string, argv: string[]): Promise<Deno.CommandOutput> {
  return await new Deno.Command("nsenter", {
    args: [`--mount=${mountNs}`, "--", ...argv],
    stdout: "piped",
    stderr: "piped",
  }).output();
}

interface PodRow {
  name: string;
  namespace: string;
  state: string;
  ip: string;
  containers: string;
  /** kubelet's own last error about this Pod, when it is not fully running. */
  problem?: string;
}

/** The Pods the agent wrote (static Pod manifests), as namespace/name. */
async function desiredPods(
  manifestDir: string,
): Promise<Array<{ namespace: string; name: string }>> {
  const out = [];
  try {
    for await (const e of Deno.readDir(manifestDir)) {
      if (!e.isFile || !e.name.endsWith(".json") || e.name.startsWith(".")) continue;
      try {
        const m = JSON.parse(await Deno.readTextFile(path.join(manifestDir, e.name)));
        out.push({ namespace: m.metadata?.namespace ?? "default", name: String(m.metadata?.name) });
      } catch { /* not a manifest */ }
    }
  } catch { /* no directory yet */ }
  return out;
}

/** kubelet's last log line about a Pod that reports an error (image pulls, CNI, config). */
function kubeletProblem(logText: string, podName: string): string | undefined {
  const lines = logText.split("\n").filter((l) =>
    l.includes(podName) && /error|failed|back-off|ErrImagePull/i.test(l)
  );
  const last = lines.at(-1);
  if (!last) return undefined;
  // klog: "E1130 22:11:05.123 1234 file.go:12] message" — keep the message, unescape the nested
  // quoting and shorten ids; Go errors end with their root cause, so a long one keeps its end.
  const msg = last.replace(/^[IWEF]\d{4} [\d:.]+\s+\d+ [^\]]+\] /, "")
    .replace(/\\+"/g, '"')
    .replace(/\b([0-9a-f]{12})[0-9a-f]{52}\b/g, "$1")
    .replace(/(\s+(pod|podUID)="[^"]*")+\s*$/, "");
  return msg.length > 400 ? `…${msg.slice(-400)}` : msg;
}

/** The node's Pods: the agent's desired ones and what CRI reports (crictl inside the node's view). */
async function podRows(o: {
  mountNs: string;
  crictl: string;
  manifestDir: string;
  kubeletLog: string;
}): Promise<PodRow[]> {
  const json = async (args: string[]) => {
    const out = await inNode(o.mountNs, [o.crictl, ...args]);
    if (!out.success) {
      throw new LocalNodeError(`crictl ${args.join(" ")}: ${new TextDecoder().decode(out.stderr)}`);
    }
    return JSON.parse(new TextDecoder().decode(out.stdout));
  };
  const pods = ((await json(["pods", "-o", "json"])).items ?? [])
    .filter((p: { state: string }) => p.state === "SANDBOX_READY");
  const containers = (await json(["ps", "-a", "-o", "json"])).containers ?? [];
  const rows: PodRow[] = [];
  for (const pod of pods) {
    const inspect = await json(["inspectp", "-o", "json", pod.id]);
    const mine = containers.filter((c: { podSandboxId: string }) => c.podSandboxId === pod.id);
    const running = mine.some((c: { state: string }) => c.state === "CONTAINER_RUNNING");
    rows.push({
      name: pod.metadata.name,
      namespace: pod.metadata.namespace,
      state: running ? "Running" : "NotRunning",
      ip: inspect.status?.network?.ip || "-",
      containers: mine.map((c: { metadata: { name: string }; state: string }) =>
        `${c.metadata.name}=${c.state.replace("CONTAINER_", "").toLowerCase()}`
      ).join(",") || "-",
    });
  }
  // kubelet names a static Pod <manifest name>-<node name>.
  for (const d of await desiredPods(o.manifestDir)) {
    const name = `${d.name}-${LOCAL_DEFAULTS.nodeName}`;
    if (!rows.some((r) => r.name === name && r.namespace === d.namespace)) {
      rows.push({ name, namespace: d.namespace, state: "NoSandbox", ip: "-", containers: "-" });
    }
  }
  if (rows.some((r) => r.state !== "Running")) {
    // One read of kubelet's log serves every Pod that is not running.
    const logText = await Deno.readTextFile(o.kubeletLog).catch(() => "");
    for (const r of rows) {
      if (r.state !== "Running") r.problem = kubeletProblem(logText, r.name);
    }
  }
  return rows;
}

async function status(ctx: CommandContext, stateDir: string, agent: string[]): Promise<number> {
  const s = await readState(stateDir);
  if (!s) {
    ctx.err(`no local node in ${stateDir}: run 'podmin local up'`);
    return 1;
  }
  const p = nodePaths(stateDir);
  const running = await daemonsRunning(s);
  ctx.out(`Node:       ${LOCAL_DEFAULTS.nodeName} (state ${stateDir})`);
  ctx.out(`Bucket:     ${s.bucket}`);
  ctx.out(`Pod prefix: ${s.podPrefix}`);
  if (s.dnsAddress) ctx.out(`Cluster DNS: ${s.dnsAddress} (cluster.local)`);
  ctx.out(
    `Versions:   containerd ${s.containerdVersion}, kubelet ${s.kubeletVersion}` +
      (s.corednsVersion ? `, CoreDNS ${s.corednsVersion}` : ""),
  );
  let healthy = true;
  for (const d of DAEMONS) {
    const rec = s.daemons[d];
    if (running[d]) {
      ctx.out(`${d.padEnd(12)} running (pid ${rec!.pid})`);
    } else {
      healthy = false;
      const why = rec ? (await lastErrorLines(rec.log, 1)) || "no output" : "never started";
      ctx.out(`${d.padEnd(12)} NOT running: ${why}`);
    }
  }
  if (running["podmin-agent"]) {
    const out = await new Deno.Command(agent[0], {
      args: [...agent.slice(1), "status", `--state-dir=${p.agentState}`],
      stdout: "piped",
      stderr: "piped",
    }).output();
    const dec = new TextDecoder();
    for (const line of (dec.decode(out.stdout) + dec.decode(out.stderr)).trim().split("\n")) {
      ctx.out(`  agent ${line}`);
    }
  }
  if (running.containerd && s.mountNs) {
    const rows = await podRows({
      mountNs: s.mountNs,
      crictl: path.join(p.bin, "crictl"),
      manifestDir: path.join(p.root, "etc/podmin/manifests"),
      kubeletLog: path.join(p.logs, "kubelet.log"),
    });
    ctx.out("");
    const lines = table([
      ["NAMESPACE", "POD", "STATE", "IPV6", "CONTAINERS"],
      ...rows.map((r) => [r.namespace, r.name, r.state, r.ip, r.containers]),
    ], { gap: 1, minWidths: [12, 40, 9, 28] });
    ctx.out(lines[0]);
    rows.forEach((r, i) => {
      ctx.out(lines[i + 1]);
      if (r.problem) ctx.out(`  ${r.name}: ${r.problem}`);
    });
    if (!rows.length) ctx.out("(no Pods)");
  }
  return healthy ? 0 : 1;
}

/** Runs `podmin local VERB`. */
export async function runLocal(ctx: CommandContext): Promise<number> {
  const [verb, ...rest] = ctx.positionals;
  const v = ctx.values as Record<string, string | undefined>;
  const stateDir = path.resolve(v["state-dir"]!);
  const agent = await agentCommand(v["agent-binary"]);
  const log = (line: string) => ctx.err(line);
  if (["up", "down", "status", "exec"].includes(verb)) requireLocalHost();
  switch (verb) {
    case "up": {
      const port = Number(v["registry-port"]);
      if (!Number.isInteger(port) || port < 1 || port > 65535) {
        throw new UsageError(`invalid --registry-port ${v["registry-port"]}`);
      }
      if (!/^[0-9a-fA-F:]+\/80$/.test(v["pod-prefix"]!)) {
        throw new UsageError(`--pod-prefix must be an IPv6 /80, got ${v["pod-prefix"]}`);
      }
      let binDirs = (ctx.values["bin-dir"] as string[] | undefined) ?? [];
      if (!binDirs.length) {
        binDirs = [
          await fetchPinnedBinaries({
            dir: path.join(stateDir, "downloads"),
            cacheDir: defaultCacheDir(),
            log,
            catalog: v["dependency-catalog"]
              ? await resolveCatalog(await readCatalogFile(v["dependency-catalog"]), { log })
              : undefined,
          }),
        ];
      }
      const binaries = await resolveBinaries({
        binDirs,
        cniDir: v["cni-bin-dir"] ??
          (ctx.values["bin-dir"] ? undefined : path.join(binDirs[0], "cni")),
      });
      await localUp({
        stateDir,
        bucket: v.bucket ?? Deno.env.get("PODMIN_BUCKET"),
        binaries,
        agentCommand: agent,
        cluster: v.cluster!,
        nodeGroup: v.nodegroup!,
        podPrefix: v["pod-prefix"]!,
        registryPort: port,
        sandboxImage: v["sandbox-image"]!,
        interval: v.interval,
        secretsInterval: v["secrets-interval"],
        log,
      });
      ctx.out(`local node up; use --bucket ${(await readState(stateDir))!.bucket}`);
      return 0;
    }
    case "down":
      return (await localDown({ stateDir, log, purge: ctx.values.purge as boolean })).length
        ? 1
        : 0;
    case "status":
      return await status(ctx, stateDir, agent);
    case "exec": {
      const s = await readState(stateDir);
      if (!s?.mountNs) throw new LocalNodeError(`no local node in ${stateDir}`);
      if (!rest.length) throw new UsageError("expected: podmin local exec -- COMMAND [ARG...]");
      const child = new Deno.Command("nsenter", {
        args: [`--mount=${s.mountNs}`, "--", ...rest],
        env: { PATH: `${nodePaths(stateDir).bin}:${Deno.env.get("PATH") ?? "/usr/bin:/bin"}` },
      }).spawn();
      return (await child.status).code;
    }
    default:
      throw new UsageError(`unknown local action ${JSON.stringify(verb ?? "")}`, {
        hint: "use podmin local up, down, status or exec",
      });
  }
}

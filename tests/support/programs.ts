/** Runs `podmin` and `podmin-agent` from source as subprocesses, as an operator would. */

const root = new URL("../../", import.meta.url).pathname;

/** The outcome of a finished command. */
export interface Ran {
  code: number;
  stdout: string;
  stderr: string;
}

async function runEntry(
  entry: string,
  args: string[],
  env?: Record<string, string>,
  signal?: AbortSignal,
): Promise<Ran> {
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["run", "--allow-all", `${root}${entry}`, ...args],
    env,
    signal,
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  }).output();
  const dec = new TextDecoder();
  return { code: out.code, stdout: dec.decode(out.stdout), stderr: dec.decode(out.stderr) };
}

/** Runs `podmin ARGS…`; `signal` kills it (a hung command then ends with a non-zero code). */
export function podmin(
  args: string[],
  env?: Record<string, string>,
  options: { signal?: AbortSignal } = {},
): Promise<Ran> {
  return runEntry("cli/main.ts", args, env, options.signal);
}

/** Runs `podmin-agent ARGS…` to completion. */
export function agent(args: string[], env?: Record<string, string>): Promise<Ran> {
  return runEntry("agent/main.ts", args, env);
}

/** Starts a long-running `podmin-agent ARGS…` (extra `env` when given); stderr is collected. */
export function spawnAgent(args: string[], env?: Record<string, string>): Deno.ChildProcess {
  return new Deno.Command(Deno.execPath(), {
    args: ["run", "--allow-all", `${root}agent/main.ts`, ...args],
    env,
    stdin: "null",
    stdout: "null",
    stderr: "piped",
  }).spawn();
}

/**
 * Starts `podmin ARGS…` (or `podmin-agent` with `agent: true`) without waiting; stdout is
 * discarded, stderr too unless `stderr: "piped"`.
 */
export function spawnProgram(
  args: string[],
  options: { agent?: boolean; env?: Record<string, string>; stderr?: "piped" | "null" } = {},
): Deno.ChildProcess {
  return new Deno.Command(Deno.execPath(), {
    args: ["run", "--allow-all", `${root}${options.agent ? "agent" : "cli"}/main.ts`, ...args],
    env: options.env,
    stdin: "null",
    stdout: "null",
    stderr: options.stderr ?? "null",
  }).spawn();
}

/** Polls `check` until it returns true or `timeoutMs` passes. */
export async function waitFor(
  what: string,
  check: () => Promise<boolean> | boolean,
  timeoutMs = 20_000,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/**
 * `podmin-agent run` flags for a test node whose directories all live under `base`. Workload
 * certificates are off unless `caKeyFile` names the workload CA key (tests/identity covers them).
 */
export function nodeAgentArgs(
  o: { bucket: string; nodeGroup: string; base: string; caKeyFile?: string },
): string[] {
  return [
    "run",
    "--bucket",
    o.bucket,
    "--cluster",
    "test",
    "--nodegroup",
    o.nodeGroup,
    "--manifest-dir",
    `${o.base}/manifests`,
    "--workload-ca-key",
    o.caKeyFile ? `file:${o.caKeyFile}` : "off",
    ...nodeStateDirArgs(o.base),
  ];
}

/**
 * `podmin-agent run` flags of an agent in the endpoint mesh on loopback: its node id, the mesh on
 * 127.0.0.1 (any port), the cluster CA from a PEM file (key included; keep it on tmpfs), a kubelet
 * Pods API socket, and the dataplane off (on, it would attach to this machine's interfaces, and
 * a SIGKILL leaves it serving; the services e2e test runs it in network namespaces).
 */
export function meshAgentArgs(o: { nodeId: string; caFile: string; podsSocket: string }): string[] {
  return [
    "--node-id",
    o.nodeId,
    "--mesh-listen",
    "127.0.0.1:0",
    "--mesh-advertise",
    "127.0.0.1",
    "--cluster-ca",
    `file:${o.caFile}`,
    "--pods-api-socket",
    o.podsSocket,
    "--dataplane",
    "off",
  ];
}

/** The agent's tmpfs-side directories (values, certificates, status) under `base`. */
export function nodeStateDirArgs(base: string): string[] {
  return [
    "--secrets-dir",
    `${base}/secrets`,
    "--tls-dir",
    `${base}/tls`,
    "--state-dir",
    `${base}/state`,
  ];
}

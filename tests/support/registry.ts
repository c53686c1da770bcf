/** Starts `podmin-agent registry` as a subprocess on a free loopback port. */

import { freePort } from "./moto.ts";
import { waitFor } from "./programs.ts";

const root = new URL("../../", import.meta.url).pathname;

/** A running registry. */
export interface RunningRegistry {
  /** `127.0.0.1:PORT` */
  address: string;
  stop(): Promise<string>;
}

/**
 * Starts the agent's registry for a bucket URL (extra `env` and flags such as
 * `--redirect-min-bytes` when given) and waits until it answers.
 */
export async function startRegistry(
  bucketUrl: string,
  options: { env?: Record<string, string>; args?: string[] } = {},
): Promise<RunningRegistry> {
  const port = await freePort();
  const address = `127.0.0.1:${port}`;
  const child = new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "--allow-all",
      `${root}agent/main.ts`,
      "registry",
      "--bucket",
      bucketUrl,
      "--listen",
      address,
      ...options.args ?? [],
    ],
    env: options.env,
    stdin: "null",
    stdout: "null",
    stderr: "piped",
  }).spawn();
  await waitFor("the registry", async () => {
    try {
      const res = await fetch(`http://${address}/v2/`);
      await res.body?.cancel();
      return res.ok;
    } catch {
      return false;
    }
  });
  return {
    address,
    async stop() {
      child.kill("SIGTERM");
      const out = await child.output();
      return new TextDecoder().decode(out.stderr);
    },
  };
}

/** Runs a command and returns its output; throws with stderr on failure. */
export async function run(
  cmd: string,
  args: string[],
  env?: Record<string, string>,
): Promise<string> {
  const out = await new Deno.Command(cmd, { args, env, stdout: "piped", stderr: "piped" }).output();
  const dec = new TextDecoder();
  if (!out.success) {
    throw new Error(
      `${cmd} ${args.join(" ")} exited ${out.code}:\n${dec.decode(out.stderr)}${
        dec.decode(out.stdout)
      }`,
    );
  }
  return dec.decode(out.stdout);
}

/** A running CNCF distribution registry (plain HTTP on loopback, filesystem storage). */
export interface DistributionRegistry {
  port: number;
  stop(): Promise<void>;
}

/** Starts `distribution-registry` (built by tests/setup.sh) without authentication. */
export async function startDistributionRegistry(): Promise<DistributionRegistry> {
  const dir = await Deno.makeTempDir({ prefix: "podmin-distribution-" });
  const port = await freePort();
  await Deno.writeTextFile(
    `${dir}/config.yml`,
    `version: 0.1
log: {level: error}
storage: {filesystem: {rootdirectory: ${dir}/storage}}
http: {addr: 127.0.0.1:${port}}
`,
  );
  const child = new Deno.Command("distribution-registry", {
    args: ["serve", `${dir}/config.yml`],
    stdout: "null",
    stderr: "null",
  }).spawn();
  await waitFor("the distribution registry", async () => {
    try {
      const res = await fetch(`http://127.0.0.1:${port}/v2/`);
      await res.body?.cancel();
      return res.ok;
    } catch {
      return false;
    }
  });
  return {
    port,
    async stop() {
      child.kill("SIGTERM");
      await child.status;
      await Deno.remove(dir, { recursive: true }).catch(() => {});
    },
  };
}

/** Drives `podmin` for the CLI tests: in process (fast) or as a subprocess with stdin. */

import { runProgram } from "../../core/kit/cli_kit.ts";
import { programOf } from "../../cli/program.ts";

const root = new URL("../../", import.meta.url).pathname;

/** What a finished command printed, and its exit code. */
export interface Result {
  code: number;
  out: string;
  err: string;
}

/** Runs `podmin ARGS…` in this process (stdout and stderr collected). */
export async function cli(...args: string[]): Promise<Result> {
  const out: string[] = [];
  const err: string[] = [];
  const code = await runProgram(programOf(), args, {
    out: (l) => out.push(l),
    err: (l) => err.push(l),
  });
  return { code, out: out.join("\n"), err: err.join("\n") };
}

/** Runs `podmin ARGS…` as a subprocess, `stdin` written to its standard input. */
export async function cliProcess(
  args: string[],
  options: { stdin?: string; env?: Record<string, string>; clearEnv?: boolean } = {},
): Promise<Result> {
  const child = new Deno.Command(Deno.execPath(), {
    args: ["run", "-q", "--allow-all", `${root}cli/main.ts`, ...args],
    env: options.env,
    clearEnv: options.clearEnv,
    stdin: "piped",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const writer = child.stdin.getWriter();
  await writer.write(new TextEncoder().encode(options.stdin ?? ""));
  await writer.close();
  const r = await child.output();
  const dec = new TextDecoder();
  return { code: r.code, out: dec.decode(r.stdout), err: dec.decode(r.stderr) };
}

/** A fresh filesystem bucket; returns its URL. */
export async function freshBucket(): Promise<string> {
  const dir = await Deno.makeTempDir({ prefix: "podmin-cli-" });
  const url = `file://${dir}/bucket`;
  const r = await cli("--bucket", url, "create-bucket");
  if (r.code !== 0) throw new Error(`create-bucket failed: ${r.err}`);
  return url;
}

/** Writes `text` to a new temporary file and returns its path. */
export async function tempFile(text: string, suffix = ".yaml"): Promise<string> {
  const f = await Deno.makeTempFile({ prefix: "podmin-cli-", suffix });
  await Deno.writeTextFile(f, text);
  return f;
}

/** The example Deployment and Service of docs/examples/hello.yaml. */
export const HELLO = `${root}docs/examples/hello.yaml`;

/**
 * Runs OpenTofu (or Terraform) on a saved configuration directory. The binary
 * is `$PODMIN_TOFU`, else `tofu`, else `terraform` on PATH. State lives in the
 * cluster bucket through the S3 backend the configuration declares.
 */

import { PodminError, UsageError } from "../../core/kit/errors.ts";
import { forEachLine } from "../../core/kit/stream_lines.ts";

/** Options of `runTofu`. */
export interface TofuOptions {
  /** The directory holding main.tf.json. */
  workDir: string;
  /** Extra environment (AWS credentials pass through from the caller's environment). */
  env?: Record<string, string>;
  /** Lines of tofu's output as they arrive (stderr of podmin). */
  log?: (line: string) => void;
  /** Explicit binary (tests, or $PODMIN_TOFU). */
  binary?: string;
}

function onPath(name: string): string | undefined {
  for (const dir of (Deno.env.get("PATH") ?? "").split(":")) {
    try {
      const p = `${dir}/${name}`;
      if (Deno.statSync(p).isFile) return p;
    } catch { /* next */ }
  }
  return undefined;
}

/** Finds the OpenTofu/Terraform binary or explains how to get one. */
export function findTofu(explicit?: string): string {
  const chosen = explicit ?? Deno.env.get("PODMIN_TOFU") ?? onPath("tofu") ?? onPath("terraform");
  if (!chosen) {
    throw new UsageError("neither tofu nor terraform is on PATH", {
      hint:
        "install OpenTofu (https://opentofu.org) or set PODMIN_TOFU; --dry-run --out DIR needs neither",
    });
  }
  return chosen;
}

async function run(binary: string, args: string[], o: TofuOptions): Promise<void> {
  const child = new Deno.Command(binary, {
    args,
    cwd: o.workDir,
    env: { TF_IN_AUTOMATION: "1", TF_INPUT: "0", ...o.env },
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const pump = (stream: ReadableStream<Uint8Array>) =>
    forEachLine(stream, (l) => o.log?.(`  ${l}`));
  const [status] = await Promise.all([child.status, pump(child.stdout), pump(child.stderr)]);
  if (!status.success) {
    throw new PodminError(`${binary} ${args[0]} failed (exit ${status.code})`, {
      hint:
        `the configuration is saved in ${o.workDir} and in the bucket under infra/; fix the cause and re-run (podmin teardown removes a partial setup)`,
    });
  }
}

/** `init` then `apply -auto-approve`. */
export async function tofuApply(o: TofuOptions): Promise<void> {
  const binary = findTofu(o.binary);
  await run(binary, ["init", "-input=false", "-no-color"], o);
  await run(binary, ["apply", "-input=false", "-auto-approve", "-no-color"], o);
}

/** `init` then `destroy -auto-approve`. */
export async function tofuDestroy(o: TofuOptions): Promise<void> {
  const binary = findTofu(o.binary);
  await run(binary, ["init", "-input=false", "-no-color"], o);
  await run(binary, ["destroy", "-input=false", "-auto-approve", "-no-color"], o);
}

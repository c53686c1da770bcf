/**
 * Real OpenTofu for the setup tests: the binary, the trimmed AWS provider and the CLI
 * configuration `tests/peers/build_tofu.sh` builds under `$PODMIN_TEST_BIN/tofu/` (cached by
 * version; `tests/setup.sh` runs it), the environment tofu runs with against a moto server, and
 * the requirement a test declares (`REAL_TOFU`: a missing build skips the test locally and fails
 * it under CI=true, through `testWith`).
 *
 * No plugin cache is needed: `tofu init` links a provider of an unpacked filesystem mirror into
 * the working directory (`.terraform/providers/…/linux_amd64` → the mirror) instead of copying it.
 */

import * as path from "node:path";
import { pathToFileURL } from "node:url";
import { TEST_BIN } from "./node_peers.ts";
import type { Requirements } from "./requirements.ts";

/** The AWS provider release the mirror holds (build_tofu.sh's AWS_VERSION). */
export const AWS_PROVIDER_RELEASE = "6.48.0";

/** Where build_tofu.sh puts tofu, the provider mirror and the CLI configuration. */
export const REAL_TOFU_DIR = path.join(TEST_BIN, "tofu");

/** The OpenTofu 1.10.10 binary. */
export const TOFU_BINARY = path.join(REAL_TOFU_DIR, "bin", "tofu");

/** The CLI configuration file (TF_CLI_CONFIG_FILE): providers from the mirror only. */
export const TOFU_CLI_CONFIG = path.join(REAL_TOFU_DIR, "cli.tfrc");

const goArch = Deno.build.arch === "aarch64" ? "arm64" : "amd64";

/** The trimmed AWS provider in the filesystem mirror (unpacked layout). */
export const AWS_PROVIDER_BINARY = path.join(
  REAL_TOFU_DIR,
  "mirror/registry.opentofu.org/hashicorp/aws",
  AWS_PROVIDER_RELEASE,
  `linux_${goArch}`,
  `terraform-provider-aws_v${AWS_PROVIDER_RELEASE}`,
);

/** What a test running real tofu needs (`testWith(name, REAL_TOFU, fn)`). */
export const REAL_TOFU: Requirements = {
  files: [TOFU_BINARY, TOFU_CLI_CONFIG, AWS_PROVIDER_BINARY].map((f) => pathToFileURL(f)),
};

/**
 * The environment of a real tofu (run directly or by `podmin`) talking to the moto at
 * `endpoint`: the CLI configuration (no registry), no prompts, test credentials, and every
 * AWS client (the S3 backend's and the provider's) sent to moto. The S3 backend reads only its
 * own variables (`AWS_ENDPOINT_URL_S3`, `_STS`, `_IAM`), the provider the SDK's
 * `AWS_ENDPOINT_URL`. The backend uses path-style URLs by itself for an IP endpoint.
 */
export function realTofuEnv(endpoint: string, region = "us-east-1"): Record<string, string> {
  return {
    TF_CLI_CONFIG_FILE: TOFU_CLI_CONFIG,
    TF_IN_AUTOMATION: "1",
    TF_INPUT: "0",
    PODMIN_TOFU: TOFU_BINARY,
    AWS_ENDPOINT_URL: endpoint,
    AWS_ENDPOINT_URL_S3: endpoint,
    AWS_ENDPOINT_URL_STS: endpoint,
    AWS_ENDPOINT_URL_IAM: endpoint,
    AWS_ACCESS_KEY_ID: "test",
    AWS_SECRET_ACCESS_KEY: "test",
    AWS_REGION: region,
    AWS_EC2_METADATA_DISABLED: "true",
  };
}

/** The outcome of one tofu command. */
export interface TofuRun {
  code: number;
  stdout: string;
  stderr: string;
}

/** A tofu command that failed; its message holds the command, the directory and tofu's output. */
export class TofuCommandError extends Error {
  /** The failed run. */
  readonly run: TofuRun;
  constructor(args: string[], cwd: string, run: TofuRun) {
    super(
      `tofu ${args.join(" ")} in ${cwd} exited ${run.code}:\n${run.stderr}${run.stdout}`.trimEnd(),
    );
    this.name = "TofuCommandError";
    this.run = run;
  }
}

/** Runs `tofu ARGS…` in `cwd` with `env`; throws `TofuCommandError` unless it succeeds. */
export async function tofu(
  args: string[],
  { cwd, env }: { cwd: string; env: Record<string, string> },
): Promise<TofuRun> {
  const out = await new Deno.Command(TOFU_BINARY, {
    args,
    cwd,
    env,
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  }).output();
  const dec = new TextDecoder();
  const run = { code: out.code, stdout: dec.decode(out.stdout), stderr: dec.decode(out.stderr) };
  if (!out.success) throw new TofuCommandError(args, cwd, run);
  return run;
}

/**
 * Every configuration the schema test checks (tests/support/generated_configs.ts) also passes
 * real OpenTofu: `tofu init -backend=false` with the AWS provider from the test mirror
 * (tests/peers/build_tofu.sh), then `tofu validate -json` with no error and no warning. This is
 * OpenTofu's own reading of the document (its JSON syntax, references, types) and the provider's
 * own validation of every argument it checks without calling AWS (enumerations, ranges,
 * conflicting arguments), which the schema checker does not know.
 */

import assert from "node:assert/strict";
import * as path from "node:path";
import { generateTofu, serializeTofu } from "../../cli/infra/generate_tofu.ts";
import { GENERATED_CONFIGURATIONS } from "../support/generated_configs.ts";
import { REAL_TOFU, realTofuEnv, tofu } from "../support/real_tofu.ts";
import { testWith } from "../support/requirements.ts";

/** What `tofu validate -json` prints. */
interface ValidateReport {
  valid: boolean;
  error_count: number;
  warning_count: number;
  diagnostics: { severity: string; summary: string; detail?: string }[];
}

/** `tofu init -backend=false` then `tofu validate -json` on `bytes`, in a fresh directory. */
async function validate(bytes: Uint8Array): Promise<ValidateReport> {
  const dir = await Deno.makeTempDir({ prefix: "podmin-validate-" });
  try {
    await Deno.writeFile(path.join(dir, "main.tf.json"), bytes);
    // No AWS is asked: neither init without a backend nor validate calls the provider's API.
    const env = realTofuEnv("http://127.0.0.1:9");
    await tofu(["init", "-backend=false", "-input=false", "-no-color"], { cwd: dir, env });
    const out = await tofu(["validate", "-json", "-no-color"], { cwd: dir, env }).catch((err) =>
      err.run ?? Promise.reject(err)
    );
    return JSON.parse(out.stdout);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

const describe = (r: ValidateReport) =>
  r.diagnostics.map((d) => `${d.severity}: ${d.summary}${d.detail ? ` (${d.detail})` : ""}`)
    .join("\n");

for (const [name, inputs] of GENERATED_CONFIGURATIONS) {
  testWith(`generated configuration passes tofu validate: ${name}`, REAL_TOFU, async () => {
    const report = await validate(serializeTofu(generateTofu(inputs)));
    assert.equal(report.error_count, 0, describe(report));
    assert.equal(report.warning_count, 0, describe(report));
    assert.ok(report.valid);
  });
}

testWith(
  "tofu validate rejects what the provider refuses (the check can fail)",
  REAL_TOFU,
  async () => {
    const config = generateTofu(GENERATED_CONFIGURATIONS[0][1]);
    const template = Object.values(config.resource.aws_launch_template)[0] as {
      metadata_options: { http_tokens: string };
    };
    template.metadata_options.http_tokens = "sometimes";
    const report = await validate(serializeTofu(config));
    assert.equal(report.valid, false);
    assert.match(describe(report), /http_tokens/);
  },
);

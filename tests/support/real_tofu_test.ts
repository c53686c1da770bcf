import assert from "node:assert/strict";
import { AWS_PROVIDER_BINARY, AWS_PROVIDER_RELEASE, REAL_TOFU_DIR } from "./real_tofu.ts";

const script = await Deno.readTextFile(new URL("../peers/build_tofu.sh", import.meta.url));

Deno.test("the harness looks for the provider release build_tofu.sh builds", () => {
  const built = script.match(/^AWS_VERSION=(\S+)$/m)?.[1];
  assert.equal(built, AWS_PROVIDER_RELEASE);
  assert.ok(AWS_PROVIDER_BINARY.startsWith(`${REAL_TOFU_DIR}/mirror/registry.opentofu.org/`));
  assert.ok(AWS_PROVIDER_BINARY.endsWith(`/terraform-provider-aws_v${built}`));
});

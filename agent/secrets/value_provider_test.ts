import assert from "node:assert/strict";
import { GetParametersCommand, SSMClient } from "@aws-sdk/client-ssm";
import { GetSecretValueCommand, SecretsManagerClient } from "@aws-sdk/client-secrets-manager";
import { dualStackEndpoint } from "./value_provider.ts";

/** The host the AWS SDK's client would send `command` to, with dual-stack endpoints on. */
async function sdkHost(
  client: SSMClient | SecretsManagerClient,
  command: GetParametersCommand | GetSecretValueCommand,
): Promise<string> {
  let host = "";
  // deno-lint-ignore no-explicit-any
  const stack = client.middlewareStack as any;
  stack.add(() => (args: { request: { hostname: string } }) => {
    host = args.request.hostname;
    throw new Error("resolved");
  }, { step: "finalizeRequest" });
  // deno-lint-ignore no-explicit-any
  await (client as any).send(command).catch(() => {});
  return host;
}

Deno.test("value provider: the dual-stack endpoints are the ones the AWS SDK resolves", async () => {
  const credentials = { accessKeyId: "a", secretAccessKey: "b" };
  // An explicit endpoint in the environment would win over the rules under test.
  const saved = Deno.env.get("AWS_ENDPOINT_URL");
  Deno.env.delete("AWS_ENDPOINT_URL");
  try {
    for (const region of ["us-east-1", "eu-west-1", "ap-southeast-2"]) {
      const o = { region, useDualstackEndpoint: true, credentials };
      assert.equal(
        new URL(dualStackEndpoint("ssm", region)).hostname,
        await sdkHost(new SSMClient(o), new GetParametersCommand({ Names: ["x"] })),
      );
      assert.equal(
        new URL(dualStackEndpoint("secretsmanager", region)).hostname,
        await sdkHost(new SecretsManagerClient(o), new GetSecretValueCommand({ SecretId: "x" })),
      );
    }
  } finally {
    if (saved !== undefined) Deno.env.set("AWS_ENDPOINT_URL", saved);
  }
});

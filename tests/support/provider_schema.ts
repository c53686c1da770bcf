/**
 * The AWS provider's own schema for the tests that check generated configurations against it.
 *
 * `aws-provider-6.48-schema.json` beside this file is a committed copy (pretty-printed by
 * `deno fmt`, otherwise identical) of `shared/tofu/aws-provider-6.48-schema.json`: the output of
 * `tofu providers schema -json` (OpenTofu 1.10.10) for `registry.opentofu.org/hashicorp/aws`
 * 6.48.0, reduced to the networking, EC2, Auto Scaling, IAM, S3, SSM, KMS and Secrets Manager
 * families; `shared/tofu/README.md` says how it was built. The copy makes the check independent
 * of what lies beside the clone; `SHARED_SCHEMA` (the clone's parent directory, as in CI) is
 * compared with it so that a refreshed schema cannot be forgotten.
 */

import { ValidationError } from "../../core/kit/errors.ts";
import { type ProviderSchema, readProviderSchema } from "./provider_schema_reader.ts";

/** The provider the schema describes, as `tofu providers schema -json` names it. */
export const AWS_PROVIDER = "registry.opentofu.org/hashicorp/aws";
/** Provider and OpenTofu versions the schema was produced with. */
export const AWS_PROVIDER_SCHEMA_VERSIONS = { provider: "6.48.0", opentofu: "1.10.10" } as const;

/** The committed copy. */
export const COMMITTED_SCHEMA = new URL("./aws-provider-6.48-schema.json", import.meta.url);
/** The shared original: `<clone>/../shared/tofu/…`. */
export const SHARED_SCHEMA = new URL(
  "../../../shared/tofu/aws-provider-6.48-schema.json",
  import.meta.url,
);

/** Parses a schema file; a missing or malformed file is a ValidationError naming it. */
export async function readSchemaFile(file: URL): Promise<unknown> {
  let text: string;
  try {
    text = await Deno.readTextFile(file);
  } catch (err) {
    throw new ValidationError(`cannot read the provider schema ${file.pathname}`, {
      cause: err,
      hint: "restore tests/support/aws-provider-6.48-schema.json from git " +
        "(a copy of shared/tofu/aws-provider-6.48-schema.json)",
    });
  }
  try {
    return JSON.parse(text);
  } catch (err) {
    throw new ValidationError(`the provider schema ${file.pathname} is not JSON`, { cause: err });
  }
}

let cached: Promise<ProviderSchema> | undefined;

/** The AWS provider schema from the committed copy (read once per test process). */
export function awsProviderSchema(): Promise<ProviderSchema> {
  cached ??= readSchemaFile(COMMITTED_SCHEMA).then((document) =>
    readProviderSchema({ document, provider: AWS_PROVIDER })
  );
  return cached;
}

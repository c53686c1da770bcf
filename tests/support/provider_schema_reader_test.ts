import assert from "node:assert/strict";
import { ValidationError } from "../../core/kit/errors.ts";
import { readProviderSchema } from "./provider_schema_reader.ts";

const PROVIDER = "registry.opentofu.org/hashicorp/aws";

Deno.test("readProviderSchema: picks one provider's blocks out of the document", () => {
  const block = { attributes: { id: { type: "string", computed: true } } };
  const schema = readProviderSchema({
    provider: PROVIDER,
    document: {
      format_version: "1.0",
      provider_schemas: {
        [PROVIDER]: {
          provider: { block: {} },
          resource_schemas: { aws_vpc: { block } },
          data_source_schemas: { aws_vpc: { block } },
        },
      },
    },
  });
  assert.equal(schema.source, PROVIDER);
  assert.deepEqual(schema.resources, { aws_vpc: block });
  assert.deepEqual(schema.dataSources, { aws_vpc: block });
});

Deno.test("readProviderSchema: other formats and missing providers are refused", () => {
  assert.throws(
    () => readProviderSchema({ provider: PROVIDER, document: { format_version: "0.2" } }),
    (e: unknown) => e instanceof ValidationError && /format_version 1.0/.test(e.message),
  );
  assert.throws(
    () =>
      readProviderSchema({
        provider: PROVIDER,
        document: { format_version: "1.0", provider_schemas: { other: {} } },
      }),
    (e: unknown) =>
      e instanceof ValidationError && /no schema for registry/.test(e.message) &&
      /has: other/.test(e.hint ?? ""),
  );
  assert.throws(
    () =>
      readProviderSchema({
        provider: PROVIDER,
        document: {
          format_version: "1.0",
          provider_schemas: { [PROVIDER]: { provider: { block: {} }, resource_schemas: {} } },
        },
      }),
    /no data_source_schemas/,
  );
});

/**
 * The shape of a provider schema as `tofu providers schema -json` prints it (format 1.0), and
 * a reader that picks one provider out of such a document. Only what the schema checker
 * (`provider_schema_check.ts`) needs is typed: blocks, attributes with their flags and cty
 * types, nested block types with their nesting mode and item limits.
 */

import { ValidationError } from "../../core/kit/errors.ts";

/**
 * A cty type in its JSON form: `"string"`, `"number"`, `"bool"`, `"dynamic"`,
 * `["list", T]`, `["set", T]`, `["map", T]`, `["object", {name: T}, optional?]`,
 * `["tuple", [T, …]]`.
 */
export type CtyType =
  | "string"
  | "number"
  | "bool"
  | "dynamic"
  | ["list" | "set" | "map", CtyType]
  | ["object", Record<string, CtyType>, string[]?]
  | ["tuple", CtyType[]];

/** An attribute whose type is a nested object type (plugin protocol 6). */
export interface NestedAttributeType {
  attributes: Record<string, SchemaAttribute>;
  nesting_mode: "single" | "list" | "set" | "map";
  min_items?: number;
  max_items?: number;
}

/** One attribute of a block. */
export interface SchemaAttribute {
  type?: CtyType;
  nested_type?: NestedAttributeType;
  required?: boolean;
  optional?: boolean;
  computed?: boolean;
  sensitive?: boolean;
  deprecated?: boolean;
}

/** A nested block type of a block. */
export interface SchemaBlockType {
  nesting_mode: "single" | "group" | "list" | "set" | "map";
  block: SchemaBlock;
  min_items?: number;
  max_items?: number;
}

/** The body of a resource, data source, provider or nested block. */
export interface SchemaBlock {
  attributes?: Record<string, SchemaAttribute>;
  block_types?: Record<string, SchemaBlockType>;
  deprecated?: boolean;
}

/** One provider's schemas, ready for the checker. */
export interface ProviderSchema {
  /** Where it came from, for messages (e.g. `registry.opentofu.org/hashicorp/aws`). */
  source: string;
  /** The configuration block's schema (`provider "aws" { … }`). */
  provider: SchemaBlock;
  /** Resource type → schema. */
  resources: Record<string, SchemaBlock>;
  /** Data source type → schema. */
  dataSources: Record<string, SchemaBlock>;
}

function isObject(v: unknown): v is Record<string, unknown> {
  return v !== null && typeof v === "object" && !Array.isArray(v);
}

function blockOf(entry: unknown, what: string): SchemaBlock {
  if (!isObject(entry) || !isObject(entry.block)) {
    throw new ValidationError(`provider schema: ${what} has no "block"`, {
      hint: "the file must be the output of `tofu providers schema -json` (format 1.0)",
    });
  }
  return entry.block as SchemaBlock;
}

function blocksOf(entries: unknown, what: string): Record<string, SchemaBlock> {
  if (!isObject(entries)) {
    throw new ValidationError(`provider schema: no ${what}`, {
      hint: "the file must be the output of `tofu providers schema -json` (format 1.0)",
    });
  }
  return Object.fromEntries(
    Object.entries(entries).map(([type, entry]) => [type, blockOf(entry, `${what} ${type}`)]),
  );
}

/**
 * Picks one provider out of a parsed `tofu providers schema -json` document. Throws a
 * ValidationError when the document is not in that format or lacks the provider.
 */
export function readProviderSchema(
  options: { document: unknown; provider: string },
): ProviderSchema {
  const { document, provider } = options;
  if (!isObject(document) || document.format_version !== "1.0") {
    throw new ValidationError("provider schema: expected format_version 1.0", {
      hint: "the file must be the output of `tofu providers schema -json`",
    });
  }
  const schemas = document.provider_schemas;
  const entry = isObject(schemas) ? schemas[provider] : undefined;
  if (!isObject(entry)) {
    const known = isObject(schemas) ? Object.keys(schemas).join(", ") : "none";
    throw new ValidationError(`provider schema: no schema for ${provider}`, {
      hint: `the document has: ${known}`,
    });
  }
  return {
    source: provider,
    provider: blockOf(entry.provider, "the provider configuration"),
    resources: blocksOf(entry.resource_schemas, "resource_schemas"),
    dataSources: blocksOf(entry.data_source_schemas, "data_source_schemas"),
  };
}

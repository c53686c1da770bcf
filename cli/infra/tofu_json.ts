/**
 * The Terraform-language JSON syntax as plain data
 * (https://developer.hashicorp.com/terraform/language/syntax/json), shared by OpenTofu:
 *
 * - top-level keys are block types (`terraform`, `provider`, `data`, `resource`, `output`);
 * - `resource` / `data` nest `TYPE` → `NAME` → body;
 * - inside a body, a nested block is an object (a single block) or an array of objects
 *   (repeated blocks); this module uses objects for blocks that occur once and arrays for
 *   list-like blocks (`network_interfaces`, `tag_specifications`, `tag`, `filter`, …);
 * - every string is a template: `${…}` is an interpolation and `$${` / `%%{` escape a literal
 *   `${` / `%{`. Values from operators always pass through `literal()`.
 */

import { ValidationError } from "../../core/kit/errors.ts";
import { sortKeys } from "../../core/kit/canonical_json.ts";

/** A JSON value as it appears in a configuration. */
export type TfValue = string | number | boolean | null | TfValue[] | { [key: string]: TfValue };

/** The body of a block: arguments and nested blocks. */
export type TfBody = { [key: string]: TfValue };

/** A generated configuration (one `.tf.json` file). */
export interface TofuConfig {
  terraform: TfBody;
  provider: Record<string, TfBody>;
  data: Record<string, Record<string, TfBody>>;
  resource: Record<string, Record<string, TfBody>>;
  output: Record<string, { value: TfValue; description: string }>;
}

/** Escapes a literal string so that Terraform does not read `${` or `%{` as template syntax. */
export function literal(text: string): string {
  // Replacer functions: in a replacement string, "$$" would itself mean one "$".
  return text.replaceAll("${", () => "$${").replaceAll("%{", () => "%%{");
}

/** An interpolation of an expression: `${expression}`. */
export function expr(expression: string): string {
  return `\${${expression}}`;
}

/** A resource attribute reference: `${TYPE.NAME.ATTR}`. */
export function ref(type: string, name: string, attribute: string): string {
  return expr(`${type}.${name}.${attribute}`);
}

/** A data source attribute reference: `${data.TYPE.NAME.ATTR}`. */
export function dataRef(type: string, name: string, attribute: string): string {
  return expr(`data.${type}.${name}.${attribute}`);
}

/** A `depends_on` entry (a bare reference, not a template). */
export function dependsOn(type: string, name: string): string {
  return `${type}.${name}`;
}

/** UTF-8 text as base64 (what EC2 expects in `user_data`). */
export function base64Utf8(text: string): string {
  const bytes = new TextEncoder().encode(text);
  let binary = "";
  for (let i = 0; i < bytes.length; i += 0x8000) {
    binary += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  }
  return btoa(binary);
}

/** Accumulates blocks; refuses to declare the same resource, data source or output twice. */
export class TofuBuilder {
  readonly config: TofuConfig;

  constructor(terraform: TfBody, provider: Record<string, TfBody>) {
    this.config = { terraform, provider, data: {}, resource: {}, output: {} };
  }

  /** Declares `resource "TYPE" "NAME"`. */
  resource(type: string, name: string, body: TfBody): void {
    const byType = this.config.resource[type] ??= {};
    if (name in byType) throw new ValidationError(`duplicate resource ${type}.${name}`);
    byType[name] = body;
  }

  /** Declares `data "TYPE" "NAME"`. */
  data(type: string, name: string, body: TfBody): void {
    const byType = this.config.data[type] ??= {};
    if (name in byType) throw new ValidationError(`duplicate data source ${type}.${name}`);
    byType[name] = body;
  }

  /** Declares `output "NAME"`. */
  output(name: string, value: TfValue, description: string): void {
    if (name in this.config.output) throw new ValidationError(`duplicate output ${name}`);
    this.config.output[name] = { value, description };
  }
}

/**
 * Stable, pretty bytes of a configuration: object keys sorted recursively (array order kept,
 * it is meaningful), two-space indentation, a final newline. Equal configurations always
 * serialize to equal bytes.
 */
export function serializeTofu(config: TofuConfig): Uint8Array {
  return new TextEncoder().encode(`${JSON.stringify(sortKeys(config), null, 2)}\n`);
}

/**
 * Checks a Terraform-language JSON configuration against a provider's own schema (the output
 * of `tofu providers schema -json`), the part of `tofu validate` that needs the provider:
 *
 * - every resource and data source type exists in the schema, and the `provider` block too;
 * - every argument and nested block name exists (meta-arguments aside: `count`, `for_each`,
 *   `depends_on`, `lifecycle`, `provider`, and `provisioner` / `connection` on resources);
 * - required arguments are present (not null), and blocks with `min_items` occur often enough;
 * - computed-only arguments (computed, not optional) are not set; deprecated ones are refused;
 * - literal values have the declared cty type, or one OpenTofu converts to it implicitly (a
 *   number or bool for a string: the provider declares some tri-state booleans of
 *   `aws_launch_template` as strings; "12" for a number; "true" / "false" for a bool); objects
 *   have exactly their declared attributes (optional ones may be left out); a value that is one
 *   whole interpolation (`"${…}"`) has a type known only at plan time and is not checked; a
 *   template with text around an interpolation is a string;
 * - nested blocks follow their nesting mode (single / group: at most one; list / set: an object
 *   or an array of objects, between `min_items` and `max_items`; map: an object of labelled
 *   bodies) and are never expressions (`dynamic` blocks are refused as unsupported);
 * - references in interpolations (`TYPE.NAME.ATTR…`, `data.TYPE.NAME.ATTR…`) and in
 *   `depends_on` name resources and data sources the configuration declares, and an attribute
 *   path that exists in the schema: the first segment always, further segments through object
 *   types, maps and single / group blocks (a list or set needs an index, which ends the check).
 *
 * It does not evaluate expressions, check provider-side validation (enumerations, ranges,
 * conflicting arguments, ARN formats) or anything AWS itself decides at apply time.
 */

import { ValidationError } from "../../core/kit/errors.ts";
import type {
  CtyType,
  NestedAttributeType,
  ProviderSchema,
  SchemaAttribute,
  SchemaBlock,
  SchemaBlockType,
} from "./provider_schema_reader.ts";
import { scanTemplate } from "../../cli/infra/tofu_syntax.ts";

/** The rule a violation breaks. */
export type SchemaRule =
  | "unknown-type"
  | "unknown-name"
  | "required"
  | "computed-only"
  | "deprecated"
  | "type"
  | "nesting"
  | "min-items"
  | "max-items"
  | "reference"
  | "unsupported";

/** One place where the configuration disagrees with the provider schema. */
export interface SchemaViolation {
  /** `aws_subnet.nodes_zone_a`, `data.aws_ami.arm64`, `provider.aws`, `output.vpc_id`. */
  address: string;
  /** Path inside the body (`network_interfaces[1].ipv6_address_count`), "" for the body. */
  path: string;
  rule: SchemaRule;
  /** What is wrong, in words. */
  detail: string;
}

/** A violation as one line: `ADDRESS: PATH: DETAIL [RULE]`. */
export function formatViolation(v: SchemaViolation): string {
  return `${v.address}: ${v.path || "(body)"}: ${v.detail} [${v.rule}]`;
}

/** The configuration disagrees with the provider schema; `violations` lists every place. */
export class ProviderSchemaMismatchError extends ValidationError {
  readonly violations: readonly SchemaViolation[];

  constructor(options: { violations: SchemaViolation[]; source: string }) {
    const { violations, source } = options;
    super(
      `${violations.length} problem(s) against the ${source} schema:\n${
        violations.map((v) => `  - ${formatViolation(v)}`).join("\n")
      }`,
      {
        hint: "fix the generator (cli/infra/) so that main.tf.json matches the provider's " +
          "schema; docs/spec.md (Validation of the generated configuration) lists the rules",
      },
    );
    this.violations = violations;
  }
}

type Json = unknown;
type JsonObject = Record<string, Json>;

const RESOURCE_META = new Set([
  "count",
  "for_each",
  "depends_on",
  "lifecycle",
  "provider",
  "provisioner",
  "connection",
  "//",
]);
const DATA_META = new Set(["count", "for_each", "depends_on", "lifecycle", "provider", "//"]);
/** Roots of references that are not resources (checked by `checkTofuSyntax`, or builtins). */
const NON_RESOURCE_ROOTS = new Set([
  "var",
  "local",
  "module",
  "each",
  "count",
  "self",
  "path",
  "terraform",
]);

function isObject(v: Json): v is JsonObject {
  return v !== null && typeof v === "object" && !Array.isArray(v);
}

/** Index just past the `}` closing an interpolation whose body starts at `i`, or -1. */
function interpolationEnd(s: string, i: number): number {
  let depth = 1;
  while (i < s.length) {
    const ch = s[i];
    if (ch === '"') {
      i++;
      while (i < s.length && s[i] !== '"') i += s[i] === "\\" ? 2 : 1;
    } else if (ch === "{") depth++;
    else if (ch === "}" && --depth === 0) return i + 1;
    i++;
  }
  return -1;
}

/** How a JSON string reads as a template: plain text, one whole interpolation, or mixed. */
function templateKind(s: string): "literal" | "expression" | "template" {
  const unescaped = s.replaceAll("$${", "").replaceAll("%%{", "");
  if (!unescaped.includes("${") && !unescaped.includes("%{")) return "literal";
  if (s.startsWith("${") && interpolationEnd(s, 2) === s.length) return "expression";
  return "template";
}

const NUMBER = /^-?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?$/;

/** OpenTofu's implicit conversion of a literal string to a number or bool. */
function convertsFromString(s: string, type: CtyType): boolean {
  if (type === "number") return NUMBER.test(s);
  if (type === "bool") return s === "true" || s === "false";
  return false;
}

function typeName(t: CtyType): string {
  return typeof t === "string"
    ? t
    : t[0] === "object" || t[0] === "tuple"
    ? t[0]
    : `${t[0]}(${typeName(t[1])})`;
}

function jsonKind(v: Json): string {
  if (Array.isArray(v)) return "an array";
  if (v === null) return "null";
  if (typeof v === "object") return "an object";
  return `a ${typeof v} (${JSON.stringify(v).slice(0, 40)})`;
}

/** Levenshtein distance, for "did you mean" suggestions. */
function distance(a: string, b: string): number {
  let prev = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const row = [i];
    for (let j = 1; j <= b.length; j++) {
      row[j] = Math.min(prev[j] + 1, row[j - 1] + 1, prev[j - 1] + (a[i - 1] === b[j - 1] ? 0 : 1));
    }
    prev = row;
  }
  return prev[b.length];
}

function suggestion(name: string, candidates: Iterable<string>): string {
  let best: string | undefined;
  let bestDistance = Math.max(2, Math.floor(name.length / 3)) + 1;
  for (const c of candidates) {
    const d = distance(name, c);
    if (d < bestDistance) [best, bestDistance] = [c, d];
  }
  return best ? ` (did you mean ${best}?)` : "";
}

function join(path: string, key: string): string {
  return path ? `${path}.${key}` : key;
}

class SchemaChecker {
  readonly violations: SchemaViolation[] = [];
  private address = "";

  constructor(private readonly schema: ProviderSchema, private readonly config: JsonObject) {}

  private report(path: string, rule: SchemaRule, detail: string): void {
    this.violations.push({ address: this.address, path, rule, detail });
  }

  run(): void {
    for (const [name, body] of Object.entries(this.objectAt(this.config.provider))) {
      this.address = `provider.${name}`;
      if (name !== this.localProviderName()) {
        this.report(
          "",
          "unknown-type",
          `no schema for provider ${name} (checking against ${this.schema.source})`,
        );
        continue;
      }
      for (const b of Array.isArray(body) ? body : [body]) {
        this.checkBody({
          body: b,
          block: this.schema.provider,
          path: "",
          where: `provider ${name}`,
          meta: new Set(["alias", "//"]),
        });
        this.checkReferences(b, "");
      }
    }
    this.checkObjects("resource", this.schema.resources);
    this.checkObjects("data", this.schema.dataSources);
    for (const [name, output] of Object.entries(this.objectAt(this.config.output))) {
      this.address = `output.${name}`;
      this.checkReferences(output, "");
    }
  }

  private localProviderName(): string {
    return this.schema.source.split("/").at(-1)!;
  }

  private objectAt(v: Json): JsonObject {
    return isObject(v) ? v : {};
  }

  private checkObjects(kind: "resource" | "data", schemas: Record<string, SchemaBlock>): void {
    for (const [type, byName] of Object.entries(this.objectAt(this.config[kind]))) {
      for (const [name, body] of Object.entries(this.objectAt(byName))) {
        this.address = kind === "data" ? `data.${type}.${name}` : `${type}.${name}`;
        const block = schemas[type];
        if (!block) {
          const known = Object.keys(schemas);
          this.report(
            "",
            "unknown-type",
            `${
              kind === "data" ? "data source" : "resource"
            } type ${type} does not exist in ${this.schema.source}${suggestion(type, known)}`,
          );
          continue;
        }
        if (!isObject(body)) {
          this.report("", "nesting", `the body must be an object, got ${jsonKind(body)}`);
          continue;
        }
        this.checkBody({
          body,
          block,
          path: "",
          where: kind === "data" ? `data source ${type}` : type,
          meta: kind === "data" ? DATA_META : RESOURCE_META,
        });
        for (const dep of Array.isArray(body.depends_on) ? body.depends_on : []) {
          if (typeof dep === "string") this.checkReference(dep.split("."), "depends_on");
        }
        for (const [key, value] of Object.entries(body)) {
          if (key !== "depends_on" && key !== "//") this.checkReferences(value, key);
        }
      }
    }
  }

  private checkBody(
    options: { body: Json; block: SchemaBlock; path: string; where: string; meta?: Set<string> },
  ): void {
    const { body, block, path, where, meta } = options;
    if (!isObject(body)) {
      this.report(path, "nesting", `a block body must be an object, got ${jsonKind(body)}`);
      return;
    }
    const attributes = block.attributes ?? {};
    const blockTypes = block.block_types ?? {};
    for (const [key, value] of Object.entries(body)) {
      if (meta?.has(key)) continue;
      const at = join(path, key);
      const attribute = attributes[key];
      const blockType = blockTypes[key];
      if (attribute) this.checkAttribute({ attribute, value, path: at });
      else if (blockType) {
        this.checkBlocks({ blockType, value, path: at, where: `${where} block ${key}` });
      } else if (key === "dynamic") {
        this.report(at, "unsupported", "dynamic blocks are not checked; write the blocks out");
      } else {
        const names = [...Object.keys(attributes), ...Object.keys(blockTypes)];
        this.report(
          at,
          "unknown-name",
          `${where} has no argument or block ${key}${suggestion(key, names)}`,
        );
      }
    }
    for (const [name, attribute] of Object.entries(attributes)) {
      if (attribute.required && (body[name] === undefined || body[name] === null)) {
        this.report(join(path, name), "required", `the argument ${name} is required`);
      }
    }
    for (const [name, blockType] of Object.entries(blockTypes)) {
      const min = blockType.min_items ?? 0;
      if (min > 0 && body[name] === undefined) {
        this.report(
          join(path, name),
          "min-items",
          `at least ${min} ${name} block(s) required, got 0`,
        );
      }
    }
  }

  private checkAttribute(
    options: { attribute: SchemaAttribute; value: Json; path: string },
  ): void {
    const { attribute, value, path } = options;
    if (value === null) return;
    if (attribute.computed && !attribute.optional && !attribute.required) {
      this.report(
        path,
        "computed-only",
        "the argument is computed by the provider and cannot be set",
      );
      return;
    }
    if (attribute.deprecated) this.report(path, "deprecated", "the argument is deprecated");
    if (attribute.nested_type) this.checkNestedType({ nested: attribute.nested_type, value, path });
    else if (attribute.type) this.checkType({ type: attribute.type, value, path });
  }

  private checkNestedType(
    options: { nested: NestedAttributeType; value: Json; path: string },
  ): void {
    const { nested, value, path } = options;
    if (typeof value === "string" && templateKind(value) === "expression") return;
    const objectType: CtyType = [
      "object",
      Object.fromEntries(
        Object.entries(nested.attributes).map(([k, a]) => [k, a.type ?? "dynamic"]),
      ),
      Object.entries(nested.attributes).filter(([, a]) => !a.required).map(([k]) => k),
    ];
    const elements = nested.nesting_mode === "single"
      ? [[path, value] as const]
      : nested.nesting_mode === "map"
      ? isObject(value)
        ? Object.entries(value).map(([k, v]) => [`${path}["${k}"]`, v] as const)
        : undefined
      : Array.isArray(value)
      ? value.map((v, i) => [`${path}[${i}]`, v] as const)
      : undefined;
    if (!elements) {
      this.report(
        path,
        "type",
        `expected ${nested.nesting_mode} of objects, got ${jsonKind(value)}`,
      );
      return;
    }
    this.checkCount({
      count: elements.length,
      min: nested.min_items,
      max: nested.max_items,
      path,
      what: "element",
    });
    for (const [at, v] of elements) this.checkType({ type: objectType, value: v, path: at });
  }

  private checkType(options: { type: CtyType; value: Json; path: string }): void {
    const { type, value, path } = options;
    if (value === null || type === "dynamic") return;
    const mismatch = () =>
      this.report(path, "type", `expected ${typeName(type)}, got ${jsonKind(value)}`);
    if (typeof value === "string") {
      const kind = templateKind(value);
      if (kind === "expression" || type === "string") return;
      if (kind === "literal" && convertsFromString(value, type)) return;
      this.report(
        path,
        "type",
        kind === "template"
          ? `expected ${typeName(type)}, got a string template (text around an interpolation)`
          : `expected ${typeName(type)}, got ${jsonKind(value)}, which OpenTofu cannot convert`,
      );
      return;
    }
    if (typeof type === "string") {
      const ok = type === "string"
        // OpenTofu converts a literal number or bool to a string ("true", "20").
        ? typeof value === "number" || typeof value === "boolean"
        : type === "number"
        ? typeof value === "number"
        : typeof value === "boolean";
      if (!ok) mismatch();
      return;
    }
    const [kind] = type;
    if (kind === "list" || kind === "set") {
      if (!Array.isArray(value)) return mismatch();
      value.forEach((v, i) =>
        this.checkType({ type: type[1] as CtyType, value: v, path: `${path}[${i}]` })
      );
    } else if (kind === "map") {
      if (!isObject(value)) return mismatch();
      for (const [k, v] of Object.entries(value)) {
        this.checkType({ type: type[1] as CtyType, value: v, path: `${path}["${k}"]` });
      }
    } else if (kind === "tuple") {
      const elements = type[1] as CtyType[];
      if (!Array.isArray(value) || value.length !== elements.length) return mismatch();
      value.forEach((v, i) =>
        this.checkType({ type: elements[i], value: v, path: `${path}[${i}]` })
      );
    } else {
      const [, attributes, optional = []] = type as ["object", Record<string, CtyType>, string[]?];
      if (!isObject(value)) return mismatch();
      for (const [k, v] of Object.entries(value)) {
        if (!(k in attributes)) {
          this.report(
            join(path, k),
            "unknown-name",
            `the object type has no attribute ${k}${suggestion(k, Object.keys(attributes))}`,
          );
        } else this.checkType({ type: attributes[k], value: v, path: join(path, k) });
      }
      for (const k of Object.keys(attributes)) {
        if (!(k in value) && !optional.includes(k)) {
          this.report(join(path, k), "required", `the object type requires attribute ${k}`);
        }
      }
    }
  }

  private checkCount(
    options: { count: number; min?: number; max?: number; path: string; what: string },
  ): void {
    const { count, min = 0, max = 0, path, what } = options;
    if (count < min) {
      this.report(path, "min-items", `at least ${min} ${what}(s) required, got ${count}`);
    }
    if (max > 0 && count > max) {
      this.report(path, "max-items", `at most ${max} ${what}(s) allowed, got ${count}`);
    }
  }

  private checkBlocks(
    options: { blockType: SchemaBlockType; value: Json; path: string; where: string },
  ): void {
    const { blockType, value, path, where } = options;
    const { nesting_mode: mode, block } = blockType;
    if (typeof value === "string") {
      this.report(
        path,
        "nesting",
        `a ${mode} block cannot be an expression; write it as an object`,
      );
      return;
    }
    if (mode === "map") {
      if (!isObject(value)) {
        this.report(
          path,
          "nesting",
          `a map block must be an object of labelled bodies, got ${jsonKind(value)}`,
        );
        return;
      }
      const entries = Object.entries(value);
      this.checkCount({
        count: entries.length,
        min: blockType.min_items,
        max: blockType.max_items,
        path,
        what: "block",
      });
      for (const [label, body] of entries) {
        this.checkBody({ body, block, path: `${path}["${label}"]`, where });
      }
      return;
    }
    const bodies = Array.isArray(value) ? value : [value];
    if ((mode === "single" || mode === "group") && bodies.length > 1) {
      this.report(path, "nesting", `a ${mode} block occurs at most once, got ${bodies.length}`);
    }
    this.checkCount({
      count: bodies.length,
      min: blockType.min_items,
      max: blockType.max_items,
      path,
      what: "block",
    });
    bodies.forEach((body, i) =>
      this.checkBody({ body, block, path: Array.isArray(value) ? `${path}[${i}]` : path, where })
    );
  }

  /** Checks every reference made by the strings inside a value. */
  private checkReferences(value: Json, path: string): void {
    if (typeof value === "string") {
      for (const parts of scanTemplate(value).references) this.checkReference(parts, path);
    } else if (Array.isArray(value)) {
      value.forEach((v, i) => this.checkReferences(v, `${path}[${i}]`));
    } else if (isObject(value)) {
      for (const [k, v] of Object.entries(value)) this.checkReferences(v, join(path, k));
    }
  }

  private checkReference(parts: string[], path: string): void {
    if (parts.length < 2 || NON_RESOURCE_ROOTS.has(parts[0])) return;
    const data = parts[0] === "data";
    const [type, name, ...attributePath] = data ? parts.slice(1) : parts;
    const text = parts.join(".");
    if (name === undefined) return;
    const declared = this.objectAt(this.objectAt(this.config[data ? "data" : "resource"])[type]);
    if (!(name in declared)) {
      this.report(
        path,
        "reference",
        `${text} refers to ${
          data ? "data." : ""
        }${type}.${name}, which the configuration does not declare`,
      );
      return;
    }
    const block = (data ? this.schema.dataSources : this.schema.resources)[type];
    if (!block || attributePath.length === 0) return; // unknown types are reported on their own
    this.checkAttributePath({ block, segments: attributePath, text, path });
  }

  private checkAttributePath(
    options: { block: SchemaBlock; segments: string[]; text: string; path: string },
  ): void {
    const { segments, text, path } = options;
    let block: SchemaBlock | undefined = options.block;
    let type: CtyType | undefined;
    for (const segment of segments) {
      if (block) {
        const attribute: SchemaAttribute | undefined = block.attributes?.[segment];
        const blockType: SchemaBlockType | undefined = block.block_types?.[segment];
        if (attribute) {
          [block, type] = [undefined, attribute.type];
          if (attribute.nested_type) return; // element paths of nested types are not followed
        } else if (blockType) {
          if (blockType.nesting_mode !== "single" && blockType.nesting_mode !== "group") return;
          block = blockType.block;
        } else {
          const names = [
            ...Object.keys(block.attributes ?? {}),
            ...Object.keys(block.block_types ?? {}),
          ];
          this.report(
            path,
            "reference",
            `${text}: no attribute ${segment} in the schema${suggestion(segment, names)}`,
          );
          return;
        }
      } else if (type !== undefined && typeof type !== "string" && type[0] === "object") {
        const attributes = type[1] as Record<string, CtyType>;
        if (!(segment in attributes)) {
          this.report(path, "reference", `${text}: the object has no attribute ${segment}`);
          return;
        }
        type = attributes[segment];
      } else if (type !== undefined && typeof type !== "string" && type[0] === "map") {
        type = type[1] as CtyType;
      } else {
        return; // a list, set or tuple needs an index; a primitive or dynamic value ends here
      }
    }
  }
}

/**
 * Every violation of the provider schema in a configuration (empty when it conforms). The
 * schema's provider is the configuration's provider of the same local name (`aws` for
 * `registry.opentofu.org/hashicorp/aws`).
 */
export function providerSchemaViolations(
  options: { config: unknown; schema: ProviderSchema },
): SchemaViolation[] {
  if (!isObject(options.config)) {
    throw new ValidationError("the configuration must be a JSON object");
  }
  const checker = new SchemaChecker(options.schema, options.config);
  checker.run();
  return checker.violations;
}

/** Throws a ProviderSchemaMismatchError listing every violation, if there is any. */
export function checkProviderSchema(options: { config: unknown; schema: ProviderSchema }): void {
  const violations = providerSchemaViolations(options);
  if (violations.length > 0) {
    throw new ProviderSchemaMismatchError({ violations, source: options.schema.source });
  }
}

/**
 * A structural validator of Terraform-language JSON (the rules of
 * https://developer.hashicorp.com/terraform/language/syntax/json that do not need provider
 * schemas), so that setup can refuse a malformed configuration before saving or applying it:
 *
 * - top-level keys are known block types; `resource` / `data` nest TYPE → NAME → body, with
 *   identifiers as labels; `provider`, `output`, `variable`, `terraform` have their shapes;
 * - meta-arguments are well-formed: `depends_on` holds bare references to declared objects,
 *   `lifecycle` only known keys;
 * - every string (values and object keys) is a well-formed template: interpolations and
 *   directives are closed, non-empty, and `$${` / `%%{` escapes are honoured;
 * - every reference in an interpolation (`TYPE.NAME…`, `data.TYPE.NAME…`, `local.X`,
 *   `var.X`) names something the configuration declares.
 *
 * It does not parse HCL expressions fully (the tests additionally run HashiCorp's own parser
 * over the serialized configuration) and knows no provider schemas (`tofu validate` does; the
 * tests check the provider's schema with `tests/support/provider_schema_check.ts`).
 */

import { ValidationError } from "../../core/kit/errors.ts";

const IDENTIFIER = /^[A-Za-z_][A-Za-z0-9_-]*$/;
const TOP_LEVEL = new Set([
  "terraform",
  "provider",
  "variable",
  "locals",
  "output",
  "module",
  "resource",
  "data",
  "moved",
  "import",
  "removed",
  "check",
  "//",
]);
const TERRAFORM_KEYS = new Set([
  "required_version",
  "required_providers",
  "backend",
  "cloud",
  "experiments",
  "provider_meta",
  "encryption",
  "//",
]);
const OUTPUT_KEYS = new Set([
  "value",
  "description",
  "sensitive",
  "ephemeral",
  "depends_on",
  "precondition",
  "//",
]);
const VARIABLE_KEYS = new Set([
  "type",
  "default",
  "description",
  "validation",
  "sensitive",
  "nullable",
  "ephemeral",
  "//",
]);
const RESOURCE_LIFECYCLE = new Set([
  "create_before_destroy",
  "prevent_destroy",
  "ignore_changes",
  "replace_triggered_by",
  "precondition",
  "postcondition",
]);
const DATA_LIFECYCLE = new Set(["precondition", "postcondition"]);
/** Roots of references that need no declaration. */
const BUILTIN_ROOTS = new Set(["self", "count", "each", "path", "terraform"]);
/** Words that look like references inside expressions but are not. */
const KEYWORDS = new Set(["true", "false", "null", "for", "in", "if", "else", "endif", "endfor"]);

type Json = unknown;

function isObject(v: Json): v is Record<string, Json> {
  return v !== null && typeof v === "object" && !Array.isArray(v);
}

/** One parsed template: the references its interpolations make. */
interface TemplateScan {
  references: string[][];
  error?: string;
}

/** Skips a quoted string inside an expression starting after its opening quote. */
function skipQuoted(s: string, i: number): number {
  while (i < s.length) {
    const ch = s[i];
    if (ch === "\\") {
      i += 2;
      continue;
    }
    if (ch === '"') return i + 1;
    if ((ch === "$" || ch === "%") && s[i + 1] === "{") {
      const end = closeBrace(s, i + 2);
      if (end < 0) return -1;
      i = end + 1;
      continue;
    }
    i++;
  }
  return -1;
}

/** Index of the `}` closing a brace opened just before `i`, or -1. */
function closeBrace(s: string, i: number): number {
  let depth = 1;
  while (i < s.length) {
    const ch = s[i];
    if (ch === '"') {
      i = skipQuoted(s, i + 1);
      if (i < 0) return -1;
      continue;
    }
    if (ch === "{") depth++;
    if (ch === "}" && --depth === 0) return i;
    i++;
  }
  return -1;
}

function stripQuoted(expression: string): string {
  let out = "";
  for (let i = 0; i < expression.length;) {
    if (expression[i] === '"') {
      const end = skipQuoted(expression, i + 1);
      out += '""';
      i = end < 0 ? expression.length : end;
    } else {
      out += expression[i++];
    }
  }
  return out;
}

/** A traversal (`a.b.c`) that is neither part of a longer name nor a function name. */
const TRAVERSAL =
  /(?<![A-Za-z0-9_.\-])[A-Za-z_][A-Za-z0-9_-]*(?:\.[A-Za-z_][A-Za-z0-9_-]*)*(?![A-Za-z0-9_-])(?!\s*\()/g;

function referencesIn(expression: string): string[][] {
  const refs: string[][] = [];
  for (const m of stripQuoted(expression).matchAll(TRAVERSAL)) {
    const parts = m[0].split(".");
    if (KEYWORDS.has(parts[0]) && parts.length === 1) continue;
    refs.push(parts);
  }
  return refs;
}

/** Scans a template string: checks interpolation syntax and collects references. */
export function scanTemplate(s: string): TemplateScan {
  const references: string[][] = [];
  for (let i = 0; i < s.length;) {
    if ((s.startsWith("$${", i) || s.startsWith("%%{", i))) {
      i += 3;
      continue;
    }
    if (s.startsWith("${", i) || s.startsWith("%{", i)) {
      const end = closeBrace(s, i + 2);
      if (end < 0) return { references, error: `unterminated ${s.slice(i, i + 2)} at offset ${i}` };
      let inner = s.slice(i + 2, end).trim();
      if (inner.startsWith("~")) inner = inner.slice(1).trim();
      if (inner.endsWith("~")) inner = inner.slice(0, -1).trim();
      if (inner === "") return { references, error: `empty ${s.slice(i, i + 2)}} at offset ${i}` };
      let open = 0;
      for (const ch of stripQuoted(inner)) {
        if (ch === "(" || ch === "[") open++;
        if (ch === ")" || ch === "]") open--;
        if (open < 0) break;
      }
      if (open !== 0) {
        return { references, error: `unbalanced brackets in ${JSON.stringify(inner)}` };
      }
      references.push(...referencesIn(inner));
      i = end + 1;
      continue;
    }
    i++;
  }
  return { references };
}

class Checker {
  readonly problems: string[] = [];
  readonly resources = new Set<string>();
  readonly dataSources = new Set<string>();
  readonly locals = new Set<string>();
  readonly variables = new Set<string>();
  readonly modules = new Set<string>();
  private readonly pendingRefs: { at: string; ref: string[] }[] = [];

  problem(at: string, message: string): void {
    this.problems.push(`${at}: ${message}`);
  }

  /** Checks every string below `value` as a template (keys included). */
  expression(at: string, value: Json): void {
    if (typeof value === "string") {
      const scan = scanTemplate(value);
      if (scan.error) this.problem(at, scan.error);
      for (const ref of scan.references) this.pendingRefs.push({ at, ref });
    } else if (Array.isArray(value)) {
      value.forEach((v, i) => this.expression(`${at}[${i}]`, v));
    } else if (isObject(value)) {
      for (const [k, v] of Object.entries(value)) {
        this.expression(`${at} (key)`, k);
        this.expression(`${at}.${k}`, v);
      }
    } else if (value !== null && typeof value !== "number" && typeof value !== "boolean") {
      this.problem(at, `not a JSON value: ${typeof value}`);
    }
  }

  /** Objects of a block type that may also be given as an array of objects. */
  bodies(at: string, value: Json): Record<string, Json>[] {
    if (isObject(value)) return [value];
    if (Array.isArray(value) && value.length > 0 && value.every(isObject)) {
      return value as Record<string, Json>[];
    }
    this.problem(at, "expected an object (or an array of objects)");
    return [];
  }

  dependsOn(at: string, value: Json): void {
    if (!Array.isArray(value)) return this.problem(at, "depends_on must be an array");
    value.forEach((v, i) => {
      if (typeof v !== "string" || !/^[A-Za-z_][\w-]*(\.[A-Za-z_][\w-]*)+$/.test(v)) {
        this.problem(
          `${at}[${i}]`,
          `depends_on entries are bare references, got ${JSON.stringify(v)}`,
        );
      } else {
        this.pendingRefs.push({ at: `${at}[${i}]`, ref: v.split(".") });
      }
    });
  }

  lifecycle(at: string, value: Json, allowed: Set<string>): void {
    for (const body of this.bodies(at, value)) {
      for (const [k, v] of Object.entries(body)) {
        if (!allowed.has(k)) this.problem(`${at}.${k}`, "unknown lifecycle argument");
        else if (k === "precondition" || k === "postcondition") {
          for (const cond of this.bodies(`${at}.${k}`, v)) {
            if (typeof cond.condition !== "string" || typeof cond.error_message !== "string") {
              this.problem(`${at}.${k}`, "needs condition and error_message strings");
            }
            this.expression(`${at}.${k}`, cond);
          }
        } else if (k === "ignore_changes" || k === "replace_triggered_by") {
          if (!Array.isArray(v) && v !== "all") this.problem(`${at}.${k}`, "expected an array");
        } else if (typeof v !== "boolean") {
          this.problem(`${at}.${k}`, "expected true or false");
        }
      }
    }
  }

  labelledBlocks(kind: "resource" | "data", value: Json): void {
    if (!isObject(value)) return this.problem(kind, "expected an object of types");
    for (const [type, byName] of Object.entries(value)) {
      const atType = `${kind}.${type}`;
      if (!IDENTIFIER.test(type)) this.problem(atType, "type is not an identifier");
      if (!isObject(byName)) {
        this.problem(atType, "expected an object of names");
        continue;
      }
      for (const [name, bodyValue] of Object.entries(byName)) {
        const at = `${atType}.${name}`;
        if (!IDENTIFIER.test(name)) this.problem(at, "name is not an identifier");
        (kind === "resource" ? this.resources : this.dataSources).add(`${type}.${name}`);
        for (const body of this.bodies(at, bodyValue)) {
          for (const [k, v] of Object.entries(body)) {
            if (k === "depends_on") this.dependsOn(`${at}.depends_on`, v);
            else if (k === "lifecycle") {
              this.lifecycle(
                `${at}.lifecycle`,
                v,
                kind === "resource" ? RESOURCE_LIFECYCLE : DATA_LIFECYCLE,
              );
            } else if (k === "provider") {
              if (typeof v !== "string" || !/^[A-Za-z_][\w-]*(\.[A-Za-z_][\w-]*)?$/.test(v)) {
                this.problem(`${at}.provider`, "expected PROVIDER or PROVIDER.ALIAS");
              }
            } else this.expression(`${at}.${k}`, v);
          }
        }
      }
    }
  }

  keyed(kind: string, value: Json, allowed: Set<string>, required?: string): void {
    if (!isObject(value)) return this.problem(kind, "expected an object of names");
    for (const [name, bodyValue] of Object.entries(value)) {
      const at = `${kind}.${name}`;
      if (!IDENTIFIER.test(name)) this.problem(at, "name is not an identifier");
      if (kind === "variable") this.variables.add(name);
      for (const body of this.bodies(at, bodyValue)) {
        if (required && !(required in body)) this.problem(at, `missing ${required}`);
        for (const [k, v] of Object.entries(body)) {
          if (!allowed.has(k)) this.problem(`${at}.${k}`, `unknown ${kind} argument`);
          else if (k === "depends_on") this.dependsOn(`${at}.depends_on`, v);
          else if (k !== "type") this.expression(`${at}.${k}`, v);
        }
      }
    }
  }

  terraform(value: Json): void {
    for (const body of this.bodies("terraform", value)) {
      for (const [k, v] of Object.entries(body)) {
        if (!TERRAFORM_KEYS.has(k)) this.problem(`terraform.${k}`, "unknown terraform argument");
        if (k === "backend") {
          if (!isObject(v) || Object.keys(v).length !== 1 || !isObject(Object.values(v)[0])) {
            this.problem(
              "terraform.backend",
              "expected exactly one backend type with its settings",
            );
          }
        }
        if (k === "required_version" && typeof v !== "string") {
          this.problem("terraform.required_version", "expected a version constraint string");
        }
        if (k === "required_providers" && isObject(v)) {
          for (const [p, req] of Object.entries(v)) {
            if (!isObject(req) || typeof req.source !== "string") {
              this.problem(`terraform.required_providers.${p}`, "expected { source, version }");
            }
          }
        }
      }
      if (JSON.stringify(body).includes("${")) {
        this.problem("terraform", "the terraform block may not contain interpolations");
      }
    }
  }

  providers(value: Json): void {
    if (!isObject(value)) return this.problem("provider", "expected an object of provider names");
    for (const [name, v] of Object.entries(value)) {
      if (!IDENTIFIER.test(name)) this.problem(`provider.${name}`, "name is not an identifier");
      for (const body of this.bodies(`provider.${name}`, v)) {
        this.expression(`provider.${name}`, body);
      }
    }
  }

  resolveReferences(): void {
    for (const { at, ref } of this.pendingRefs) {
      const [root, a, b] = ref;
      if (BUILTIN_ROOTS.has(root)) continue;
      const ok = root === "data"
        ? b !== undefined && this.dataSources.has(`${a}.${b}`)
        : root === "local"
        ? a !== undefined && this.locals.has(a)
        : root === "var"
        ? a !== undefined && this.variables.has(a)
        : root === "module"
        ? a !== undefined && this.modules.has(a)
        : a !== undefined && this.resources.has(`${root}.${a}`);
      if (!ok) this.problem(at, `reference to undeclared ${ref.join(".")}`);
    }
  }
}

/** Lists the problems of a Terraform JSON document (empty when none). */
export function tofuSyntaxProblems(document: unknown): string[] {
  const ch = new Checker();
  if (!isObject(document)) return ["the document is not a JSON object"];
  for (const key of Object.keys(document)) {
    if (!TOP_LEVEL.has(key)) ch.problem(key, "unknown top-level block type");
  }
  if (isObject(document.locals)) {
    for (const name of Object.keys(document.locals)) ch.locals.add(name);
  }
  if (isObject(document.module)) {
    for (const name of Object.keys(document.module)) ch.modules.add(name);
  }
  if ("terraform" in document) ch.terraform(document.terraform);
  if ("provider" in document) ch.providers(document.provider);
  if ("variable" in document) ch.keyed("variable", document.variable, VARIABLE_KEYS);
  if ("locals" in document) ch.expression("locals", document.locals);
  if ("resource" in document) ch.labelledBlocks("resource", document.resource);
  if ("data" in document) ch.labelledBlocks("data", document.data);
  if ("output" in document) ch.keyed("output", document.output, OUTPUT_KEYS, "value");
  ch.resolveReferences();
  return ch.problems;
}

/** Throws a ValidationError listing every problem of a Terraform JSON document. */
export function checkTofuSyntax(document: unknown): void {
  const problems = tofuSyntaxProblems(document);
  if (problems.length > 0) {
    throw new ValidationError(
      `the generated OpenTofu configuration is malformed:\n  ${problems.join("\n  ")}`,
      { hint: "this is a bug in Podmin's generator; please report it with the configuration" },
    );
  }
}

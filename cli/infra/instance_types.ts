/**
 * EC2 instance type names: syntax check and CPU architecture.
 *
 * An instance type is `FAMILY.SIZE`, the family being a series (`c`, `m`, `inf`, `hpc`, …), a
 * generation number, attribute letters and an optional `-suffix` (`c7i-flex`, `u7i-12tb`).
 * AWS Graviton families carry a `g` among the attribute letters right after the generation
 * (`c8g`, `t4g`, `m7gd`, `c7gn`, `r6gd`, `x2gd`, `g5g`, `is4gen`, `hpc7g`); `a1` is the first
 * Graviton generation. Everything else runs x86-64.
 */

import { ValidationError } from "../../core/kit/errors.ts";

import { type Architecture, ARCHITECTURES } from "../../core/bucket/dependency_manifest.ts";

export { type Architecture, ARCHITECTURES };

const FAMILY = /^([a-z]+)(\d+)([a-z]*)(?:-([a-z0-9]+))?$/;
const LEGACY_HIGH_MEMORY = /^u-\d+tb\d+$/; // u-6tb1.metal and friends (Intel)
const SIZE = /^[a-z0-9]+(?:-[a-z0-9]+)?$/;

interface ParsedType {
  series: string;
  attributes: string;
}

function parse(instanceType: unknown): ParsedType {
  const bad = (rule: string): never => {
    throw new ValidationError(`invalid instance type ${JSON.stringify(instanceType)}: ${rule}`, {
      hint: "use an EC2 instance type such as t4g.small, c8g.large or m7i.xlarge",
    });
  };
  if (typeof instanceType !== "string" || instanceType.length === 0) return bad("empty");
  if (instanceType.length > 64) return bad("longer than 64 characters");
  if (instanceType !== instanceType.toLowerCase()) return bad("instance types are lower-case");
  const dot = instanceType.indexOf(".");
  if (dot <= 0 || dot !== instanceType.lastIndexOf(".")) return bad("expected FAMILY.SIZE");
  const family = instanceType.slice(0, dot);
  const size = instanceType.slice(dot + 1);
  if (!SIZE.test(size)) return bad(`malformed size ${JSON.stringify(size)}`);
  if (LEGACY_HIGH_MEMORY.test(family)) return { series: "u", attributes: "" };
  const m = FAMILY.exec(family);
  if (!m) {
    return bad(
      `malformed family ${JSON.stringify(family)} (expected series letters, a generation)`,
    );
  }
  const [, series, , attributes] = m;
  if (series === "mac") return bad("macOS instance types cannot run Podmin nodes");
  return { series, attributes };
}

/** Checks the syntax of an instance type and returns it. */
export function checkInstanceType(instanceType: unknown): string {
  parse(instanceType);
  return instanceType as string;
}

/**
 * The CPU architecture of an instance type: `arm64` for Graviton families (a `g` among the
 * attribute letters after the generation number, or the `a1` family), `amd64` otherwise.
 * Throws a ValidationError for a malformed instance type.
 */
export function architectureOf(instanceType: string): Architecture {
  const { series, attributes } = parse(instanceType);
  if (series === "a" && instanceType.startsWith("a1.")) return "arm64";
  return attributes.includes("g") ? "arm64" : "amd64";
}

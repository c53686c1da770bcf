/** Canonical JSON: sorted object keys, no whitespace; the basis of content addresses. */

import { sha256Hex } from "./digest.ts";

/** Serialises a JSON value with object keys sorted recursively. */
export function canonicalJson(value: unknown): string {
  return JSON.stringify(sortKeys(value));
}

/** A copy of a JSON value with object keys sorted recursively (array order kept). */
export function sortKeys(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(sortKeys);
  if (value !== null && typeof value === "object") {
    const out: Record<string, unknown> = {};
    for (const k of Object.keys(value).sort()) {
      const v = (value as Record<string, unknown>)[k];
      if (v !== undefined) out[k] = sortKeys(v);
    }
    return out;
  }
  return value;
}

/** Canonical bytes of a value and their sha256 hex. */
export function contentAddress(value: unknown): { bytes: Uint8Array; sha256: string } {
  const bytes = new TextEncoder().encode(canonicalJson(value));
  return { bytes, sha256: sha256Hex(bytes) };
}

/** Locale-independent string order (UTF-16 code units), for anything that must be reproducible. */
export function compareCodeUnits(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/**
 * kubectl's `-l` label selectors: `k=v`, `k==v`, `k!=v`, `k`, `!k`, `k in (a,b)` and
 * `k notin (a,b)`, joined by commas (all must hold).
 */

import { UsageError } from "../core/kit/errors.ts";

/** One requirement of a selector. */
type Requirement =
  | { key: string; op: "in" | "notin"; values: string[] }
  | { key: string; op: "exists" | "absent" };

/** A parsed selector: a predicate over a label map. */
export type LabelSelector = (labels: Record<string, string>) => boolean;

const KEY = /^([a-z0-9]([-a-z0-9.]*[a-z0-9])?\/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$/;
const VALUE = /^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$/;

/** Splits on commas outside parentheses. */
function terms(text: string): string[] {
  const out: string[] = [];
  let depth = 0, start = 0;
  for (let i = 0; i < text.length; i++) {
    if (text[i] === "(") depth++;
    else if (text[i] === ")") depth--;
    else if (text[i] === "," && depth === 0) {
      out.push(text.slice(start, i));
      start = i + 1;
    }
  }
  out.push(text.slice(start));
  return out.map((t) => t.trim());
}

function requirement(term: string): Requirement | undefined {
  let m = /^(\S+?)\s*(==|!=|=)\s*(\S*)$/.exec(term);
  if (m) {
    if (!KEY.test(m[1]) || !VALUE.test(m[3])) return undefined;
    return { key: m[1], op: m[2] === "!=" ? "notin" : "in", values: [m[3]] };
  }
  m = /^(\S+)\s+(in|notin)\s*\(([^()]*)\)$/.exec(term);
  if (m) {
    const values = m[3].split(",").map((v) => v.trim());
    if (!KEY.test(m[1]) || values.some((v) => !VALUE.test(v))) return undefined;
    return { key: m[1], op: m[2] as "in" | "notin", values };
  }
  m = /^(!?)\s*(\S+)$/.exec(term);
  if (m && KEY.test(m[2])) return { key: m[2], op: m[1] ? "absent" : "exists" };
  return undefined;
}

/** Parses a selector; a usage error names the flag and echoes the text. */
export function parseLabelSelector(text: string): LabelSelector {
  const reqs = terms(text).map(requirement);
  if (text.trim() === "" || reqs.some((r) => r === undefined)) {
    throw new UsageError(`-l: invalid label selector ${JSON.stringify(text)}`, {
      hint: "e.g. -l app=web, -l 'tier!=backend', -l 'env in (prod,staging)', -l '!canary'",
    });
  }
  return (labels) =>
    (reqs as Requirement[]).every((r) => {
      const has = Object.hasOwn(labels, r.key);
      switch (r.op) {
        case "exists":
          return has;
        case "absent":
          return !has;
        case "in":
          return has && r.values.includes(labels[r.key]);
        case "notin":
          return !has || !r.values.includes(labels[r.key]);
      }
    });
}

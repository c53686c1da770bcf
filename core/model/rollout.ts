/**
 * A Deployment's `spec.rollout`: how a new spec replaces the running one (spec §5.1, "Rollout").
 * This module owns the fields, their validation, their defaults and the budget's arithmetic;
 * `resources.ts` calls `checkRollout` while it validates a Deployment, the agent reads the effective
 * settings through `rolloutSettings`.
 *
 * Normalization stores only what differs from the defaults (an empty block is not stored), so a
 * Deployment that never set `spec.rollout` keeps its digest.
 */

import type { Problem } from "../kit/errors.ts";

/** `spec.rollout` as stored: only the fields that differ from `ROLLOUT_DEFAULTS`. */
export interface Rollout {
  /** Nodes of the NodeGroup that may be in transition at once: a count ≥ 1 or `"N%"` (1–100). */
  maxUnavailable?: number | string;
  /** Seconds the new Pod must stay Ready before the old one is removed. */
  minReadySeconds?: number;
  /** Seconds the new Pod has to become Ready (for `minReadySeconds`) before the node halts. */
  progressDeadlineSeconds?: number;
  /** Restore the previous spec when the new one fails its progress deadline. */
  autoRevert?: boolean;
  /** Start the new Pod beside the old one on each node (false: replace in place). */
  surge?: boolean;
}

/** The effective rollout settings: every field filled. */
export interface RolloutSettings {
  maxUnavailable: number | string;
  minReadySeconds: number;
  progressDeadlineSeconds: number;
  autoRevert: boolean;
  surge: boolean;
}

/** The defaults (not stored in a spec). */
export const ROLLOUT_DEFAULTS: Readonly<RolloutSettings> = {
  maxUnavailable: "25%",
  minReadySeconds: 5,
  progressDeadlineSeconds: 600,
  autoRevert: false,
  surge: true,
};

/** Largest `minReadySeconds` (1 h). */
export const MAX_MIN_READY_SECONDS = 3600;
/** Largest `progressDeadlineSeconds` (1 day). */
export const MAX_PROGRESS_DEADLINE_SECONDS = 86_400;

const FIELDS = Object.keys(ROLLOUT_DEFAULTS);
const PERCENT = /^([1-9][0-9]?|100)%$/;

type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => v !== null && typeof v === "object" && !Array.isArray(v);

/**
 * Validates `spec.rollout` (absent is fine). Returns the normalized block (undefined when every
 * field is a default) and the problems, each with its field path under `spec.rollout`.
 */
export function checkRollout(value: unknown): { rollout?: Rollout; problems: Problem[] } {
  const problems: Problem[] = [];
  if (value === undefined) return { problems };
  const add = (field: string, message: string) =>
    problems.push({ path: field ? `spec.rollout.${field}` : "spec.rollout", message });
  if (!isObj(value)) {
    add("", `must be a mapping with any of ${FIELDS.join(", ")}`);
    return { problems };
  }
  for (const k of Object.keys(value)) {
    if (!FIELDS.includes(k)) add(k, `unknown field (allowed: ${FIELDS.join(", ")})`);
  }
  const out: Rollout = {};
  const mu = value.maxUnavailable;
  if (mu !== undefined) {
    if (typeof mu === "number" && Number.isSafeInteger(mu) && mu >= 1) out.maxUnavailable = mu;
    else if (typeof mu === "string" && PERCENT.test(mu)) out.maxUnavailable = mu;
    else {
      add(
        "maxUnavailable",
        `invalid value ${JSON.stringify(mu)}; a whole number of nodes ≥ 1 (e.g. 1) or a ` +
          `percentage of the NodeGroup from 1% to 100% (e.g. "25%"); default ` +
          `"${ROLLOUT_DEFAULTS.maxUnavailable}"`,
      );
    }
  }
  const seconds = (
    field: "minReadySeconds" | "progressDeadlineSeconds",
    min: number,
    max: number,
  ) => {
    const v = value[field];
    if (v === undefined) return;
    if (typeof v === "number" && Number.isSafeInteger(v) && v >= min && v <= max) out[field] = v;
    else {
      add(
        field,
        `invalid value ${JSON.stringify(v)}; whole seconds from ${min} to ${max} ` +
          `(default ${ROLLOUT_DEFAULTS[field]})`,
      );
    }
  };
  seconds("minReadySeconds", 0, MAX_MIN_READY_SECONDS);
  seconds("progressDeadlineSeconds", 1, MAX_PROGRESS_DEADLINE_SECONDS);
  for (const field of ["autoRevert", "surge"] as const) {
    const v = value[field];
    if (v === undefined) continue;
    if (typeof v === "boolean") out[field] = v;
    else add(field, `invalid value ${JSON.stringify(v)}; true or false`);
  }
  const minReady = out.minReadySeconds ?? ROLLOUT_DEFAULTS.minReadySeconds;
  const deadline = out.progressDeadlineSeconds ?? ROLLOUT_DEFAULTS.progressDeadlineSeconds;
  if (problems.length === 0 && deadline <= minReady) {
    add(
      "progressDeadlineSeconds",
      `${deadline} s leaves no time to start: it must exceed minReadySeconds (${minReady} s)`,
    );
  }
  const stored = Object.fromEntries(
    Object.entries(out).filter(([k, v]) => ROLLOUT_DEFAULTS[k as keyof RolloutSettings] !== v),
  ) as Rollout;
  return { rollout: Object.keys(stored).length ? stored : undefined, problems };
}

/** The effective settings of a stored (already validated) `spec.rollout`. */
export function rolloutSettings(rollout: Rollout | undefined): RolloutSettings {
  return { ...ROLLOUT_DEFAULTS, ...(rollout ?? {}) };
}

/**
 * How many of a NodeGroup's `nodes` may be in transition at once: a count as given (at most the
 * NodeGroup), a percentage rounded down, and never less than 1 (a rollout always progresses).
 */
export function maxUnavailableNodes(setting: number | string, nodes: number): number {
  const n = typeof setting === "number"
    ? setting
    : Math.floor((nodes * Number(setting.slice(0, -1))) / 100);
  return Math.max(1, Math.min(n, Math.max(nodes, 1)));
}

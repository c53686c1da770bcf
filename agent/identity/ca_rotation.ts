/**
 * The workload CA rotation planner (spec §8.5): from the checked state, the time and the policy it
 * decides the one next change of `identity/workload-ca.json`, if any. Every CA certificate is for
 * the same fixed key; what rotates is the certificate (its name and validity window).
 *
 * One change per call, in this order (the maintainer writes each, publishes, and asks again):
 * 1. drop: an expired certificate, or a retired one no leaf can still need
 *    (now ≥ retiredAt + trust window + leaf lifetime + skew);
 * 2. create `next` when there is none and the active one has less than a third of its life left
 *    (or there is no valid active: bootstrap or expiry), `promoteAfter` = now + trust window
 *    (= now when there is no valid active: no leaf can exist that needs the old trust);
 * 3. promote `next` → `active` (the old active becomes `retired`, retiredAt = now) once
 *    now ≥ promoteAfter (or there is no valid active) AND, when publication is configured, the
 *    state records a successful publication of exactly the current trust bundle (which holds
 *    `next`) to the configured target.
 *
 * The trust window is how long an agent may keep using a state it read: its state refresh
 * interval plus one request bound and the clock-skew bound (`trustWindowMs`). Every agent trusts
 * `next` before any leaf it signs exists, and keeps trusting a retired certificate while a leaf it
 * signed (possibly by an agent still holding the older state) can be valid.
 */

import {
  createCaCertificate,
  fingerprint,
  type KeyPair,
  LIFETIMES,
} from "../../core/crypto/certificates.ts";
import type { CaEntry, WorkloadCaState } from "../../core/bucket/workload_ca_state.ts";

const HOUR_MS = 3600_000;
const DAY_MS = 24 * HOUR_MS;

/** How the workload CA rotates. */
export interface RotationPolicy {
  /** Lifetime of a new CA certificate (default 365 d). */
  caLifetimeMs: number;
  /** How long agents may use a state they read before they must have re-read it (default 1 h). */
  trustWindowMs: number;
  /** Lifetime of leaves the CA signs (default 24 h, `LIFETIMES.leafMs`). */
  leafLifetimeMs: number;
  /** Clock-skew bound between nodes; certificates are backdated by it (default 5 min). */
  skewMs: number;
  /** `s3://bucket/key` when publication is configured: promotion then waits for it. */
  publicationTarget?: string;
}

/** The default policy (no publication). */
export const DEFAULT_ROTATION_POLICY: RotationPolicy = {
  caLifetimeMs: 365 * DAY_MS,
  trustWindowMs: HOUR_MS,
  leafLifetimeMs: LIFETIMES.leafMs,
  skewMs: LIFETIMES.backdateMs,
};

/**
 * The trust window for agents that re-read the state every `refreshMs`, with requests bounded by
 * `requestMs` and clocks within `skewMs`: at least that sum, at least the 1 h default.
 */
export function trustWindowMs(options: { refreshMs: number; requestMs: number; skewMs: number }) {
  return Math.max(HOUR_MS, options.refreshMs + options.requestMs + options.skewMs);
}

/**
 * Problems of a policy (empty when sound): the CA must outlive the renewal point by more than a
 * trust window plus a leaf lifetime, or a rotation could not finish before the active expires.
 */
export function policyProblems(policy: RotationPolicy): string[] {
  const problems: string[] = [];
  for (const k of ["caLifetimeMs", "trustWindowMs", "leafLifetimeMs", "skewMs"] as const) {
    if (!Number.isSafeInteger(policy[k]) || policy[k] < 0) problems.push(`${k} must be ≥ 0`);
  }
  if (policy.caLifetimeMs / 3 <= policy.trustWindowMs + policy.skewMs) {
    problems.push(
      `a third of the CA lifetime (${policy.caLifetimeMs / 3} ms) must exceed the trust window ` +
        `plus skew (${policy.trustWindowMs + policy.skewMs} ms)`,
    );
  }
  return problems;
}

/** One change of the state. */
export type RotationStep =
  | { kind: "drop"; fingerprints: string[]; reason: string }
  | { kind: "create-next"; promoteAfter: Date; reason: string }
  | { kind: "promote"; fingerprint: string; reason: string };

/** The planner's answer. */
export interface RotationPlan {
  step?: RotationStep;
  /** Why a due promotion waits (e.g. publication), for status and logs. */
  waiting?: string;
}

/** Input of `planRotation`. */
export interface PlanInput {
  /** A state whose certificates passed `checkCaState`. */
  state: WorkloadCaState;
  now: Date;
  policy: RotationPolicy;
  /** `sha256:<hex>` of `trustBundlePem` of this state (what a publication must have written). */
  bundleSha256: string;
}

/** Decides the next change (pure). */
export function planRotation(input: PlanInput): RotationPlan {
  const { state, policy } = input;
  const now = input.now.getTime();
  const t = (iso: string | undefined) => (iso === undefined ? NaN : Date.parse(iso));

  const drop = state.certificates.filter((c) => {
    if (now > t(c.notAfter)) return true; // a leaf is valid through its (capped) notAfter
    if (c.role !== "retired") return false;
    const retiredAt = t(c.retiredAt);
    return Number.isNaN(retiredAt) ||
      now >= retiredAt + policy.trustWindowMs + policy.leafLifetimeMs + policy.skewMs;
  });
  if (drop.length) {
    return {
      step: {
        kind: "drop",
        fingerprints: drop.map((c) => c.fingerprint),
        reason: drop.map((c) =>
          now > t(c.notAfter)
            ? `${c.role} ${short(c)} expired`
            : `retired ${short(c)} can no longer have valid leaves`
        ).join("; "),
      },
    };
  }

  const active = state.certificates.find((c) => c.role === "active");
  const next = state.certificates.find((c) => c.role === "next");
  const validActive = active && t(active.notBefore) <= now + policy.skewMs;

  if (!next) {
    if (!validActive) {
      return {
        step: {
          kind: "create-next",
          promoteAfter: new Date(now),
          reason: active ? `active ${short(active)} not yet valid` : "no active CA certificate",
        },
      };
    }
    const life = t(active.notAfter) - t(active.notBefore);
    if (t(active.notAfter) - now < life / 3) {
      return {
        step: {
          kind: "create-next",
          promoteAfter: new Date(now + policy.trustWindowMs),
          reason: `active ${short(active)} has less than a third of its life left`,
        },
      };
    }
    return {};
  }

  if (validActive && now < t(next.promoteAfter)) return {};
  if (policy.publicationTarget !== undefined) {
    const p = state.publication;
    if (!p || p.target !== policy.publicationTarget || p.publishedSha256 !== input.bundleSha256) {
      const why = p?.error && p.target === policy.publicationTarget
        ? `publication to ${policy.publicationTarget} failed: ${p.error}`
        : `the bundle with next ${short(next)} is not yet published to ${policy.publicationTarget}`;
      return { waiting: `promotion of next ${short(next)} waits: ${why}` };
    }
  }
  return {
    step: {
      kind: "promote",
      fingerprint: next.fingerprint,
      reason: validActive
        ? `next ${short(next)} trusted by every agent since ${next.promoteAfter}`
        : `no valid active: next ${short(next)} promoted at once`,
    },
  };
}

function short(c: CaEntry): string {
  return c.fingerprint.slice(0, 12);
}

/** Input of `applyRotation`. */
export interface ApplyInput {
  state: WorkloadCaState;
  step: RotationStep;
  now: Date;
  policy: RotationPolicy;
  /** The fixed workload CA key (signs a new certificate). */
  keys: KeyPair;
  cluster: string;
}

/**
 * The state after `step`: certificates only (the maintainer sets generation, leaderTerm and
 * updatedAt when it writes).
 */
export async function applyRotation(input: ApplyInput): Promise<WorkloadCaState> {
  const { state, step, now, policy } = input;
  const nowIso = now.toISOString();
  let certificates = state.certificates.map((c) => ({ ...c }));
  switch (step.kind) {
    case "drop":
      certificates = certificates.filter((c) => !step.fingerprints.includes(c.fingerprint));
      break;
    case "create-next": {
      const notBefore = new Date(now.getTime() - policy.skewMs);
      const cert = await createCaCertificate({
        keys: input.keys,
        commonName: caCommonName(input.cluster, now),
        notBefore,
        notAfter: new Date(now.getTime() + policy.caLifetimeMs),
      });
      certificates.push({
        role: "next",
        pem: cert.toString("pem").trim() + "\n",
        fingerprint: await fingerprint(cert),
        notBefore: cert.notBefore.toISOString(),
        notAfter: cert.notAfter.toISOString(),
        addedAt: nowIso,
        promoteAfter: step.promoteAfter.toISOString(),
      });
      break;
    }
    case "promote":
      for (const c of certificates) {
        if (c.role === "active") {
          c.role = "retired";
          c.retiredAt = nowIso;
        } else if (c.fingerprint === step.fingerprint) {
          c.role = "active";
          delete c.promoteAfter;
        }
      }
      break;
  }
  return { ...state, certificates };
}

/**
 * A CA certificate's subject CN: unique per certificate (all share one key, so the issuer name is
 * what tells a verifier which retained certificate signed a leaf).
 */
export function caCommonName(cluster: string, now: Date): string {
  const stamp = now.toISOString().replace(/[-:]/g, "").replace(/\.\d+Z$/, "Z");
  const rand = Array.from(
    crypto.getRandomValues(new Uint8Array(3)),
    (b) => b.toString(16).padStart(2, "0"),
  ).join("");
  return `podmin workload CA ${cluster} ${stamp} ${rand}`;
}

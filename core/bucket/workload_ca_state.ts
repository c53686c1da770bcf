/**
 * `identity/workload-ca.json`: the retained workload CA certificates (all made for the one fixed
 * workload CA key), their roles and validity windows, and the state of the external publication
 * (spec §8.5). The elected agent writes it by CAS; every agent reads it, as untrusted input, to
 * pick the certificate that signs leaves (`active`) and the trust bundle (every retained one).
 */

import type { X509Certificate } from "@peculiar/x509";
import { WORKLOAD_CA_STATE } from "./bucket_layout.ts";
import type { CasObject } from "../store/cas_update.ts";
import {
  caProblems,
  CertificateError,
  certificatesPem,
  fingerprint,
  parseCertificatesPem,
  samePublicKey,
} from "../crypto/certificates.ts";
import { API_VERSION } from "../model/resources.ts";
import { ValidationError } from "../kit/errors.ts";
import { checkNodeId } from "../model/names.ts";

/** Largest accepted state object (a handful of certificates). */
export const WORKLOAD_CA_STATE_MAX_BYTES = 256 * 1024;

/** The role of a retained CA certificate. */
export type CaRole = "active" | "next" | "retired";

/** One retained CA certificate. */
export interface CaEntry {
  role: CaRole;
  /** One PEM certificate. */
  pem: string;
  /** Hex SHA-256 of the DER. */
  fingerprint: string;
  notBefore: string;
  notAfter: string;
  /** When it entered the bundle. */
  addedAt: string;
  /** `next` only: the earliest promotion (every agent has had time to trust it). */
  promoteAfter?: string;
  /** `retired` only: when it stopped signing; dropped once no leaf it signed can be valid. */
  retiredAt?: string;
}

/** The last external publication attempt (only with `--workload-ca-publish`). */
export interface CaPublication {
  /** `s3://bucket/key`. */
  target: string;
  /** `sha256:<hex>` of the PEM bundle last written successfully to the target. */
  publishedSha256?: string;
  publishedAt?: string;
  /** The last failure, cleared by a success. */
  error?: string;
  failedAt?: string;
}

/** The state document. */
export interface WorkloadCaState {
  apiVersion: typeof API_VERSION;
  kind: "WorkloadCaState";
  /** +1 on every write. */
  generation: number;
  /** The lease term of the leader that wrote it; a writer with a lower term must not write. */
  leaderTerm: number;
  /** The node id of the agent that wrote it (status and audits). */
  writtenBy?: string;
  certificates: CaEntry[];
  publication?: CaPublication;
  updatedAt: string;
}

/** A state with no certificate (before the first leader bootstraps it). */
export function emptyWorkloadCaState(): WorkloadCaState {
  return {
    apiVersion: API_VERSION,
    kind: "WorkloadCaState",
    generation: 0,
    leaderTerm: 0,
    certificates: [],
    updatedAt: new Date(0).toISOString(),
  };
}

const ROLES = new Set<CaRole>(["active", "next", "retired"]);
const ISO = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$/;

/**
 * Parses and validates the document's shape (not the certificates' key: see `checkCaState`).
 * Throws `ValidationError` naming the first problem.
 */
export function parseWorkloadCaState(bytes: Uint8Array): WorkloadCaState {
  let doc: unknown;
  try {
    doc = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(bytes));
  } catch (err) {
    throw new ValidationError(`${WORKLOAD_CA_STATE}: not JSON: ${(err as Error).message}`);
  }
  const bad = (why: string) => new ValidationError(`${WORKLOAD_CA_STATE}: ${why}`);
  const d = doc as Record<string, unknown>;
  if (!d || typeof d !== "object" || Array.isArray(d)) throw bad("not an object");
  if (d.apiVersion !== API_VERSION || d.kind !== "WorkloadCaState") {
    throw bad(`expected apiVersion ${API_VERSION}, kind WorkloadCaState`);
  }
  for (const k of ["generation", "leaderTerm"]) {
    if (!Number.isSafeInteger(d[k]) || (d[k] as number) < 0) {
      throw bad(`${k} must be an integer ≥ 0`);
    }
  }
  if (typeof d.updatedAt !== "string" || !ISO.test(d.updatedAt)) throw bad("updatedAt: not ISO");
  if (!Array.isArray(d.certificates)) throw bad("certificates must be an array");
  const certs = d.certificates.map((c, i) => parseEntry(c, `certificates[${i}]`, bad));
  if (certs.filter((c) => c.role === "active").length > 1) throw bad("more than one active");
  if (certs.filter((c) => c.role === "next").length > 1) throw bad("more than one next");
  if (new Set(certs.map((c) => c.fingerprint)).size !== certs.length) {
    throw bad("a certificate is listed twice");
  }
  const state: WorkloadCaState = {
    apiVersion: API_VERSION,
    kind: "WorkloadCaState",
    generation: d.generation as number,
    leaderTerm: d.leaderTerm as number,
    certificates: certs,
    updatedAt: d.updatedAt,
  };
  if (d.writtenBy !== undefined) {
    try {
      state.writtenBy = checkNodeId(d.writtenBy);
    } catch {
      throw bad("writtenBy is not a node id");
    }
  }
  if (d.publication !== undefined) state.publication = parsePublication(d.publication, bad);
  return state;
}

function parseEntry(
  value: unknown,
  where: string,
  bad: (why: string) => ValidationError,
): CaEntry {
  const e = value as Record<string, unknown>;
  if (!e || typeof e !== "object") throw bad(`${where}: not an object`);
  if (!ROLES.has(e.role as CaRole)) throw bad(`${where}.role must be active, next or retired`);
  if (typeof e.pem !== "string" || e.pem.length > 16_384) throw bad(`${where}.pem: not a PEM`);
  if (typeof e.fingerprint !== "string" || !/^[0-9a-f]{64}$/.test(e.fingerprint)) {
    throw bad(`${where}.fingerprint: not a hex SHA-256`);
  }
  const entry: CaEntry = {
    role: e.role as CaRole,
    pem: e.pem,
    fingerprint: e.fingerprint,
    notBefore: "",
    notAfter: "",
    addedAt: "",
  };
  for (const k of ["notBefore", "notAfter", "addedAt"] as const) {
    if (typeof e[k] !== "string" || !ISO.test(e[k] as string)) throw bad(`${where}.${k}: not ISO`);
    entry[k] = e[k] as string;
  }
  for (const k of ["promoteAfter", "retiredAt"] as const) {
    if (e[k] === undefined) continue;
    if (typeof e[k] !== "string" || !ISO.test(e[k] as string)) throw bad(`${where}.${k}: not ISO`);
    entry[k] = e[k] as string;
  }
  return entry;
}

function parsePublication(value: unknown, bad: (why: string) => ValidationError): CaPublication {
  const p = value as Record<string, unknown>;
  if (!p || typeof p !== "object" || typeof p.target !== "string") {
    throw bad("publication.target must be a string");
  }
  const out: CaPublication = { target: p.target };
  if (p.publishedSha256 !== undefined) {
    if (typeof p.publishedSha256 !== "string" || !/^sha256:[0-9a-f]{64}$/.test(p.publishedSha256)) {
      throw bad("publication.publishedSha256: not sha256:<hex>");
    }
    out.publishedSha256 = p.publishedSha256;
  }
  for (const k of ["publishedAt", "failedAt"] as const) {
    if (p[k] === undefined) continue;
    if (typeof p[k] !== "string" || !ISO.test(p[k] as string)) {
      throw bad(`publication.${k}: not ISO`);
    }
    out[k] = p[k] as string;
  }
  if (p.error !== undefined) {
    if (typeof p.error !== "string") throw bad("publication.error must be a string");
    out.error = p.error.slice(0, 1024);
  }
  return out;
}

/** Canonical bytes of the state. */
export function serializeWorkloadCaState(state: WorkloadCaState): Uint8Array {
  return new TextEncoder().encode(JSON.stringify(state, null, 2) + "\n");
}

/** The state object for `casUpdate`. */
export const workloadCaStateObject: CasObject<WorkloadCaState> = {
  key: WORKLOAD_CA_STATE,
  parse: parseWorkloadCaState,
  serialize: serializeWorkloadCaState,
  empty: emptyWorkloadCaState,
  contentType: "application/json",
  maxBytes: WORKLOAD_CA_STATE_MAX_BYTES,
};

/** A retained CA certificate, parsed and checked. */
export interface CheckedCa {
  entry: CaEntry;
  certificate: X509Certificate;
}

/** The state's certificates, parsed and checked against the fixed key. */
export interface CheckedCaState {
  state: WorkloadCaState;
  /** Every retained certificate (the trust bundle), in document order. */
  retained: CheckedCa[];
  /** The certificate that signs leaves, when there is one valid at the time of the check. */
  active?: CheckedCa;
}

/**
 * Checks every certificate of `state` as untrusted input: it parses, its fingerprint and window
 * match the entry, it is a CA certificate made for `caPublicKey` (the fixed workload CA key) and
 * self-signed by it. A certificate that fails any check makes the whole state unusable
 * (`CertificateError`): trust is never partially taken from a tampered document.
 */
export async function checkCaState(
  state: WorkloadCaState,
  caPublicKey: CryptoKey,
): Promise<CheckedCaState> {
  const retained: CheckedCa[] = [];
  for (const [i, entry] of state.certificates.entries()) {
    const where = `${WORKLOAD_CA_STATE} certificates[${i}] (${entry.role})`;
    const certs = parseCertificatesPem(entry.pem, where);
    if (certs.length !== 1) {
      throw new CertificateError(`${where}: holds ${certs.length} certificates`);
    }
    const cert = certs[0];
    if (await fingerprint(cert) !== entry.fingerprint) {
      throw new CertificateError(`${where}: fingerprint does not match the certificate`);
    }
    if (
      cert.notBefore.toISOString() !== entry.notBefore ||
      cert.notAfter.toISOString() !== entry.notAfter
    ) {
      throw new CertificateError(`${where}: validity window does not match the certificate`);
    }
    const key = await cert.publicKey.export({ name: "ECDSA", namedCurve: "P-256" }, ["verify"])
      .catch(() => undefined);
    if (!key || !await samePublicKey(key, caPublicKey)) {
      throw new CertificateError(`${where}: not made for the workload CA key`, {
        hint: "the state object was written by something that does not hold the key; " +
          "delete identity/workload-ca.json to let the elected agent rebuild it",
      });
    }
    if (!await cert.verify({ publicKey: caPublicKey, signatureOnly: true })) {
      throw new CertificateError(`${where}: not self-signed by the workload CA key`);
    }
    const constraints = caProblems(cert, cert.notBefore).filter((p) => !p.includes("valid"));
    if (constraints.length) throw new CertificateError(`${where}: ${constraints.join("; ")}`);
    retained.push({ entry, certificate: cert });
  }
  return { state, retained, active: retained.find((c) => c.entry.role === "active") };
}

/** PEM trust bundle: every retained certificate, active first, then next, then retired. */
export function trustBundlePem(checked: CheckedCaState): string {
  const order: Record<CaRole, number> = { active: 0, next: 1, retired: 2 };
  const sorted = [...checked.retained].sort((a, b) => order[a.entry.role] - order[b.entry.role]);
  return certificatesPem(sorted.map((c) => c.certificate));
}

/**
 * Pod certificates: per local Pod, `tls.crt`, `tls.key` and `ca.crt` (every retained workload CA
 * certificate) in an immutable generation under `<tls-dir>/<namespace>_<name>/`, swapped like
 * values (spec §7.5) and mounted read-only at `/var/run/secrets/podmin.dev/tls` (spec §8.5).
 *
 * - Issued with the fixed workload CA key (`CaKeySource`, held in memory) under the `active`
 *   certificate of `identity/workload-ca.json` (polled; checked against the key).
 * - Renewed at half-life with jitter (45–55 % of the lifetime, derived from the serial so every
 *   pass and every restart agrees), at once when the Pod's Service DNS names change, when the
 *   signing certificate is no longer active, or when the current one fails validation.
 * - `ca.crt` follows the trust bundle: a bundle change writes a new generation with the same key
 *   and certificate.
 * - Failure (key unreadable, state unreadable, no active certificate): the current generation
 *   keeps serving until it expires and the reason is reported; a Pod without a valid certificate
 *   is not ready, so a new Pod is held back like one without its values.
 */

import * as path from "node:path";
import type { X509Certificate } from "@peculiar/x509";
import {
  certificatesPem,
  generateKeyPair,
  identityUri,
  importPrivateKeyPem,
  issueLeaf,
  type LeafIdentity,
  LIFETIMES,
  parseCertificatesPem,
  privateKeyPem,
  sanValues,
  validateLeaf,
} from "../../core/crypto/certificates.ts";
import type { Logger } from "../../core/kit/log.ts";
import type { ObjectStore } from "../../core/store/object_store.ts";
import type { Deployment } from "../../core/model/resources.ts";
import type { CheckedCaState } from "../../core/bucket/workload_ca_state.ts";
import { podDirName } from "../pod_dir.ts";
import {
  ensurePrivateRoot,
  prunePodDirs,
  readGeneration,
  writeGeneration,
} from "../pod_generations.ts";
import type { CaKeySource } from "./ca_key.ts";
import { CaView, type Issuer } from "./ca_view.ts";
import { ServicesView } from "../services/services_view.ts";

/** File names of a Pod's certificate generation. */
export const TLS_FILES = { cert: "tls.crt", key: "tls.key", ca: "ca.crt" } as const;

/** Options of `PodCertificates`. */
export interface PodCertificatesOptions {
  cluster: string;
  tlsDir: string;
  store: ObjectStore;
  caKey: CaKeySource;
  /** A Services view shared with other loops (default: its own over `store`). */
  services?: ServicesView;
  /** A CA view shared with other issuers (default: its own over `store` and `caKey`). */
  ca?: CaView;
  /**
   * Each sync refreshes the Services (default true); false where one Services loop refreshes them
   * (`podmin-agent run` without `--once`): the sync reports that loop's last error.
   */
  refreshServices?: boolean;
  /** Re-read interval of the CA state and the Service index (default 30 s). */
  refreshMs?: number;
  /** Leaf lifetime (default `LIFETIMES.leafMs`). */
  lifetimeMs?: number;
  clusterDomain?: string;
  log: Logger;
}

/** The outcome of one sync. */
export interface IdentityResult {
  /** `namespace/name` of Deployments whose current certificate is valid now. */
  ready: Set<string>;
  errors: string[];
  /** Deployments that got a new generation in this sync. */
  rotated: string[];
}

/** What the agent knows of one Pod's current certificate. */
interface Current {
  /** The `..data` target it was read from or written to. */
  generation: string;
  certificate: X509Certificate;
  keyPem: string;
  bundlePem: string;
  /** When it is due for renewal (ms). */
  renewAt: number;
  issuerFingerprint?: string;
  /**
   * The checked CA state it was last validated against: while that state and the generation stay
   * the same, a pass re-checks only the time window (no signature verification per Pod and pass).
   */
  validatedWith?: CheckedCaState;
}

/** Per-Pod status for the agent's status file. */
export interface PodCertificateStatus {
  deployment: string;
  notAfter: string;
  renewAt: string;
  issuer: string;
}

/** Keeps the certificates of local Pods valid. */
export class PodCertificates {
  readonly #o: PodCertificatesOptions;
  readonly #ca: CaView;
  readonly #services: ServicesView;
  readonly #current = new Map<string, Current>();

  constructor(options: PodCertificatesOptions) {
    this.#o = options;
    const intervalMs = options.refreshMs ?? 30_000;
    this.#ca = options.ca ??
      new CaView({ store: options.store, caKey: options.caKey, refreshMs: intervalMs });
    this.#services = options.services ?? new ServicesView({
      store: options.store,
      intervalMs,
      clusterDomain: options.clusterDomain,
    });
  }

  /** The current certificates, for status. */
  status(): PodCertificateStatus[] {
    return [...this.#current].map(([deployment, c]) => ({
      deployment,
      notAfter: c.certificate.notAfter.toISOString(),
      renewAt: new Date(c.renewAt).toISOString(),
      issuer: c.certificate.issuer,
    })).sort((a, b) => a.deployment < b.deployment ? -1 : 1);
  }

  /** Brings every Deployment's certificate up to date; never throws. */
  async sync(deployments: Deployment[], now = new Date()): Promise<IdentityResult> {
    const result: IdentityResult = { ready: new Set(), errors: [], rotated: [] };
    if (!deployments.length) return result;
    try {
      await ensurePrivateRoot({ dir: this.#o.tlsDir, what: "certificates", log: this.#o.log });
    } catch (err) {
      result.errors.push(`certificates directory ${this.#o.tlsDir}: ${(err as Error).message}`);
      return result;
    }
    const issuer = await this.#ca.issuer(now);
    if ("error" in issuer) result.errors.push(`workload identity: ${issuer.error}`);
    else if (issuer.warning) {
      result.errors.push(
        `workload identity: ${issuer.warning} (the last good CA state stays in use)`,
      );
    }
    const servicesError = this.#o.refreshServices === false
      ? this.#services.lastError
      : await this.#services.refresh(now.getTime());
    if (servicesError) result.errors.push(`Service names: ${servicesError}`);
    await Promise.all(deployments.map((d) => this.#syncOne({ d, now, issuer, result })));
    return result;
  }

  /** Removes certificate directories of Pods that no longer run here. */
  async prune(keep: Set<string>): Promise<void> {
    await prunePodDirs(this.#o.tlsDir, keep);
    for (const ref of [...this.#current.keys()]) if (!keep.has(ref)) this.#current.delete(ref);
  }

  async #syncOne(options: {
    d: Deployment;
    now: Date;
    issuer: Issuer;
    result: IdentityResult;
  }): Promise<void> {
    const { d, now, issuer, result } = options;
    const { namespace, name } = d.metadata;
    const ref = `${namespace}/${name}`;
    const dir = path.join(this.#o.tlsDir, podDirName(namespace, name));
    const uri = identityUri({ profile: "pod", cluster: this.#o.cluster, namespace, name });
    const dnsNames = this.#services.namesFor(d);
    try {
      let current = await this.#load(ref, dir);
      const trust = "error" in issuer
        ? (current ? parseCertificatesPem(current.bundlePem, `${dir}/${TLS_FILES.ca}`) : [])
        : issuer.checked.retained.map((c) => c.certificate);
      const checkedState = "error" in issuer ? undefined : issuer.checked;
      let problems: string[];
      if (!current) problems = ["no certificate yet"];
      else if (checkedState && current.validatedWith === checkedState) {
        // Validated against this very state before: only time can have changed.
        problems = now > current.certificate.notAfter
          ? [`expired at ${current.certificate.notAfter.toISOString()}`]
          : [];
      } else {
        problems = await validateLeaf({
          certificate: current.certificate,
          trust,
          profile: "pod",
          now,
          uri,
        });
        if (!problems.length && checkedState) current.validatedWith = checkedState;
      }
      const reason = renewalReason({ current, problems, now, dnsNames, issuer });
      if (reason && !("error" in issuer)) {
        current = await this.#issue({ ref, dir, uri, dnsNames, issuer, now });
        result.rotated.push(ref);
        this.#o.log.info("certificate issued", {
          deployment: ref,
          reason,
          notAfter: current.certificate.notAfter.toISOString(),
        });
        result.ready.add(ref);
        return;
      }
      if (current && !("error" in issuer) && current.bundlePem !== issuer.bundlePem) {
        current = await this.#write(ref, dir, { ...current, bundlePem: issuer.bundlePem });
        result.rotated.push(ref);
        this.#o.log.info("certificate trust bundle updated", { deployment: ref });
      }
      if (current && !problems.length) {
        result.ready.add(ref);
        if (reason) {
          result.errors.push(
            `certificate of ${ref}: renewal due (${reason}) but not possible; the current one ` +
              `serves until ${current.certificate.notAfter.toISOString()}`,
          );
        }
      } else {
        result.errors.push(`certificate of ${ref}: ${problems.join("; ")}`);
      }
    } catch (err) {
      result.errors.push(`certificate of ${ref}: ${(err as Error).message}`);
    }
  }

  /** The Pod's current generation: from memory while `..data` still points at it, else disk. */
  async #load(ref: string, dir: string): Promise<Current | undefined> {
    let generation: string;
    try {
      generation = path.basename(await Deno.readLink(path.join(dir, "..data")));
    } catch (err) {
      if (err instanceof Deno.errors.NotFound) {
        this.#current.delete(ref);
        return undefined;
      }
      throw err;
    }
    const cached = this.#current.get(ref);
    if (cached?.generation === generation) return cached;
    const files = await readGeneration(dir);
    const text = (n: string) => files?.get(n) && new TextDecoder().decode(files.get(n));
    const certPem = text(TLS_FILES.cert), keyPem = text(TLS_FILES.key), bundle = text(TLS_FILES.ca);
    if (!certPem || !keyPem || !bundle) return undefined;
    try {
      const [certificate] = parseCertificatesPem(certPem, `${dir}/${TLS_FILES.cert}`);
      await importPrivateKeyPem(keyPem); // a damaged key means a new certificate
      const current = {
        generation,
        certificate,
        keyPem,
        bundlePem: bundle,
        renewAt: renewAt(certificate),
      };
      this.#current.set(ref, current);
      return current;
    } catch {
      return undefined;
    }
  }

  async #issue(options: {
    ref: string;
    dir: string;
    uri: string;
    dnsNames: string[];
    issuer: Exclude<Issuer, { error: string }>;
    now: Date;
  }): Promise<Current> {
    const { ref, dir, issuer, now } = options;
    const [namespace, name] = ref.split("/");
    const active = issuer.checked.active!;
    const { certificate, keyPem } = await issueWithActive({
      issuer,
      identity: {
        profile: "pod",
        cluster: this.#o.cluster,
        namespace,
        name,
        dnsNames: options.dnsNames,
      },
      now,
      lifetimeMs: this.#o.lifetimeMs,
    });
    return await this.#write(ref, dir, {
      generation: "",
      certificate,
      keyPem,
      bundlePem: issuer.bundlePem,
      renewAt: renewAt(certificate),
      issuerFingerprint: active.entry.fingerprint,
    });
  }

  async #write(ref: string, dir: string, next: Current): Promise<Current> {
    await writeTlsFiles(dir, next);
    const generation = path.basename(await Deno.readLink(path.join(dir, "..data")));
    const current = { ...next, generation };
    this.#current.set(ref, current);
    return current;
  }
}

/** A workload CA state that can sign: its active certificate and the key. */
type SigningIssuer = Exclude<Issuer, { error: string }>;

/** A new key and a leaf certificate for `identity`, signed by the issuer's active certificate. */
export async function issueWithActive(options: {
  issuer: SigningIssuer;
  identity: LeafIdentity;
  now: Date;
  /** Default `LIFETIMES.leafMs`. */
  lifetimeMs?: number;
}): Promise<{ certificate: X509Certificate; keyPem: string }> {
  const { issuer } = options;
  const keys = await generateKeyPair();
  const certificate = await issueLeaf({
    ca: { certificate: issuer.checked.active!.certificate, privateKey: issuer.key.privateKey },
    identity: options.identity,
    publicKey: keys.publicKey,
    now: options.now,
    lifetimeMs: options.lifetimeMs ?? LIFETIMES.leafMs,
  });
  return { certificate, keyPem: await privateKeyPem(keys.privateKey) };
}

/** Writes `tls.crt`, `tls.key` and `ca.crt` as one generation under `dir`; false: unchanged. */
export async function writeTlsFiles(
  dir: string,
  files: { certificate: X509Certificate; keyPem: string; bundlePem: string },
): Promise<boolean> {
  const enc = new TextEncoder();
  return await writeGeneration(
    dir,
    new Map([
      [TLS_FILES.cert, enc.encode(certificatesPem([files.certificate]))],
      [TLS_FILES.key, enc.encode(files.keyPem)],
      [TLS_FILES.ca, enc.encode(files.bundlePem)],
    ]),
  );
}

/**
 * When a certificate is due: at 45–55 % of its lifetime, the point fixed by its serial number (so
 * renewals of many Pods spread out, and every pass and restart agrees on each one's time). The
 * lifetime counts from `issuedAt` when given (a certificate backdated for clock skew whose life is
 * short: node certificates of a few seconds in tests), else from `notBefore`.
 */
export function renewAt(cert: X509Certificate, issuedAt?: number): number {
  const start = Math.max(cert.notBefore.getTime(), issuedAt ?? -Infinity);
  const life = cert.notAfter.getTime() - start;
  const u = parseInt(cert.serialNumber.slice(-4), 16) / 0x10000;
  return start + life * (0.45 + 0.1 * (Number.isFinite(u) ? u : 0.5));
}

/** Why a new certificate is needed, or undefined. */
function renewalReason(options: {
  current?: Current;
  problems: string[];
  now: Date;
  dnsNames: string[];
  issuer: { checked: CheckedCaState } | { error: string };
}): string | undefined {
  const { current, problems, now, dnsNames, issuer } = options;
  if (!current) return "first certificate";
  if (problems.length) return problems.join("; ");
  if (now.getTime() >= current.renewAt) return "half-life reached";
  if (sanValues(current.certificate, "dns").join(",") !== dnsNames.join(",")) {
    return "Service names changed";
  }
  if ("checked" in issuer && issuer.checked.active) {
    const activeSubject = issuer.checked.active.certificate.subject;
    if (current.certificate.issuer !== activeSubject) {
      return "signed by a CA certificate that is no longer active";
    }
  }
  return undefined;
}

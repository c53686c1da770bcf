/**
 * Telemetry identity (spec §8.5): under the telemetry-owned tmpfs subtree (`--telemetry-dir`,
 * default `/run/podmin/telemetry`)
 *
 *   client/{tls.crt,tls.key,ca.crt}   the client-only Fluent Bit identity (a generation, §7.5)
 *   otel-ca/ca.crt                    the OTLP server CA bundle from `--otel-logs …,ca=`
 *
 * Every maintenance pass validates the client identity (chain, window, client-only EKU, URI, key
 * match, layout) and repairs or renews it (half-life) by swapping in a new generation; the OTel CA
 * bundle is re-read (If-None-Match), validated, and swapped; a failed read or an invalid bundle keeps
 * the last good one. Any swap asks systemd to restart Fluent Bit (it reads its files only at
 * start); a failed restart is retried on the next pass.
 */

import * as path from "node:path";
import {
  caProblems,
  identityUri,
  importPrivateKeyPem,
  parseCertificatesPem,
  validateLeaf,
} from "../../core/crypto/certificates.ts";
import type { Logger } from "../../core/kit/log.ts";
import type { ObjectStore } from "../../core/store/object_store.ts";
import { readGeneration, repairLayout, writeGeneration } from "../pod_generations.ts";
import { PolledObject } from "../polled_object.ts";
import type { CaView, Issuer } from "./ca_view.ts";
import { issueWithActive, renewAt, TLS_FILES, writeTlsFiles } from "./pod_certificates.ts";

/** Largest accepted OTel CA bundle. */
const OTEL_CA_MAX_BYTES = 256 * 1024;

/** The Fluent Bit client's identity (the certificate's URI). */
type FluentBitIdentity = {
  profile: "fluent-bit";
  cluster: string;
  nodeGroup: string;
  node: string;
};

/** Options of `TelemetryIdentity`. */
export interface TelemetryOptions {
  cluster: string;
  nodeGroup: string;
  nodeId: string;
  /** The telemetry tmpfs subtree. */
  dir: string;
  /** Issues the client identity; undefined when the Fluent Bit identity is off. */
  ca?: CaView;
  /** The `ca=` object of `--otel-logs`: a store opened on its bucket, and its key. */
  otelCa?: { store: ObjectStore; key: string; refreshMs: number };
  /** Asks systemd to restart Fluent Bit. */
  restartFluentBit(): Promise<void>;
  lifetimeMs?: number;
  log: Logger;
}

/** What one pass found and did (the agent writes it to `<state-dir>/telemetry.json`). */
export interface TelemetryStatus {
  client?: { notAfter?: string; renewAt?: string; action: string };
  otelCa?: { certificates: number; notAfter?: string; action: string };
  restartPending: boolean;
  errors: string[];
}

/** The Fluent Bit identity and the OTel CA bundle of one node. */
export class TelemetryIdentity {
  readonly #o: TelemetryOptions;
  readonly #otel?: PolledObject<string>;
  #restartPending = false;

  constructor(options: TelemetryOptions) {
    this.#o = options;
    if (options.otelCa) {
      this.#otel = new PolledObject({
        store: options.otelCa.store,
        key: options.otelCa.key,
        parse: (bytes) => validOtelBundle(new TextDecoder().decode(bytes)),
        absent: () => "",
        intervalMs: options.otelCa.refreshMs,
        maxBytes: OTEL_CA_MAX_BYTES,
      });
    }
  }

  /** One maintenance pass; never throws. */
  async pass(now = new Date()): Promise<TelemetryStatus> {
    const status: TelemetryStatus = { restartPending: false, errors: [] };
    try {
      await Deno.mkdir(this.#o.dir, { recursive: true, mode: 0o700 });
      await Deno.chmod(this.#o.dir, 0o700);
    } catch (err) {
      status.errors.push(`telemetry directory ${this.#o.dir}: ${(err as Error).message}`);
      return status;
    }
    let swapped = false;
    if (this.#o.ca) {
      const client = await this.#client(now, status.errors);
      status.client = client.status;
      swapped ||= client.swapped;
    }
    if (this.#otel) {
      const otel = await this.#otelCa(now, status.errors);
      status.otelCa = otel.status;
      swapped ||= otel.swapped;
    }
    if (swapped) this.#restartPending = true;
    if (this.#restartPending) {
      try {
        await this.#o.restartFluentBit();
        this.#restartPending = false;
        this.#o.log.info("fluent bit restarted", {});
      } catch (err) {
        status.errors.push(`restarting Fluent Bit: ${(err as Error).message}`);
      }
    }
    status.restartPending = this.#restartPending;
    return status;
  }

  /** Validates, repairs or renews the client identity; true when a new generation was swapped. */
  async #client(
    now: Date,
    errors: string[],
  ): Promise<{ swapped: boolean; status: NonNullable<TelemetryStatus["client"]> }> {
    const dir = path.join(this.#o.dir, "client");
    const identity: FluentBitIdentity = {
      profile: "fluent-bit",
      cluster: this.#o.cluster,
      nodeGroup: this.#o.nodeGroup,
      node: this.#o.nodeId,
    };
    const uri = identityUri(identity);
    const issuer = await this.#o.ca!.issuer(now);
    if ("error" in issuer) errors.push(`Fluent Bit identity: ${issuer.error}`);
    else if (issuer.warning) errors.push(`Fluent Bit identity: ${issuer.warning}`);

    const { problems, notAfter, due, bundleStale } = await this.#onDisk({ dir, issuer, now, uri });
    const reason = problems.length
      ? problems.join("; ")
      : due
      ? "half-life reached"
      : bundleStale
      ? "trust bundle changed"
      : undefined;
    if (!reason) {
      return { swapped: false, status: { notAfter: notAfter?.toISOString(), action: "valid" } };
    }
    if ("error" in issuer) {
      errors.push(`Fluent Bit identity needs renewal (${reason}) but cannot be issued now`);
      return { swapped: false, status: { notAfter: notAfter?.toISOString(), action: "stale" } };
    }
    return await this.#issue({ dir, issuer, identity, now, reason, notAfter, errors });
  }

  /** Validates what is on disk: layout, files, chain, window, EKU, URI, key. */
  async #onDisk(o: { dir: string; issuer: Issuer; now: Date; uri: string }): Promise<{
    problems: string[];
    notAfter?: Date;
    due: boolean;
    bundleStale: boolean;
  }> {
    const { dir, issuer, now, uri } = o;
    const problems: string[] = [];
    let notAfter: Date | undefined;
    let due = false;
    let bundleStale = false;
    try {
      await Deno.mkdir(dir, { recursive: true, mode: 0o755 });
      const repaired = await repairLayout(dir);
      if (repaired.length) problems.push(`layout repaired (${repaired.join(", ")})`);
      const files = await readGeneration(dir);
      const text = (n: string) => files?.get(n) && new TextDecoder().decode(files.get(n));
      const certPem = text(TLS_FILES.cert), keyPem = text(TLS_FILES.key), ca = text(TLS_FILES.ca);
      if (!certPem || !keyPem || !ca) {
        problems.push("no complete identity");
      } else {
        const [cert] = parseCertificatesPem(certPem, `${dir}/${TLS_FILES.cert}`);
        const key = await importPrivateKeyPem(keyPem);
        const trust = "error" in issuer
          ? parseCertificatesPem(ca, `${dir}/${TLS_FILES.ca}`)
          : issuer.checked.retained.map((c) => c.certificate);
        problems.push(
          ...await validateLeaf({
            certificate: cert,
            trust,
            profile: "fluent-bit",
            now,
            uri,
            privateKey: key.privateKey,
          }),
        );
        notAfter = cert.notAfter;
        due = now.getTime() >= renewAt(cert);
        bundleStale = !("error" in issuer) && ca !== issuer.bundlePem;
        if (!("error" in issuer) && cert.issuer !== issuer.checked.active!.certificate.subject) {
          due = true;
        }
      }
    } catch (err) {
      problems.push((err as Error).message);
    }

    return { problems, notAfter, due, bundleStale };
  }

  /** Issues and writes a new client identity generation. */
  async #issue(o: {
    dir: string;
    issuer: Exclude<Issuer, { error: string }>;
    identity: FluentBitIdentity;
    now: Date;
    reason: string;
    notAfter?: Date;
    errors: string[];
  }): Promise<{ swapped: boolean; status: NonNullable<TelemetryStatus["client"]> }> {
    const { dir, issuer, identity, now, reason, notAfter, errors } = o;
    try {
      const { certificate: cert, keyPem } = await issueWithActive({
        issuer,
        identity,
        now,
        lifetimeMs: this.#o.lifetimeMs,
      });
      await writeTlsFiles(dir, { certificate: cert, keyPem, bundlePem: issuer.bundlePem });
      this.#o.log.info("fluent bit identity issued", { reason, notAfter: cert.notAfter });
      return {
        swapped: true,
        status: {
          notAfter: cert.notAfter.toISOString(),
          renewAt: new Date(renewAt(cert)).toISOString(),
          action: `renewed: ${reason}`,
        },
      };
    } catch (err) {
      errors.push(`Fluent Bit identity: ${(err as Error).message}`);
      return { swapped: false, status: { notAfter: notAfter?.toISOString(), action: "failed" } };
    }
  }

  /** Refreshes the OTel CA bundle; true when a new one was swapped in. */
  async #otelCa(
    now: Date,
    errors: string[],
  ): Promise<{ swapped: boolean; status: NonNullable<TelemetryStatus["otelCa"]> }> {
    const dir = path.join(this.#o.dir, "otel-ca");
    const read = await this.#otel!.read({ now: now.getTime() });
    if (read.error) errors.push(`OTel CA bundle (keeping the last good one): ${read.error}`);
    try {
      await Deno.mkdir(dir, { recursive: true, mode: 0o755 });
      const current = (await readGeneration(dir))?.get(TLS_FILES.ca);
      const currentPem = current && new TextDecoder().decode(current);
      const wanted = read.value || undefined; // "" means absent
      if (read.value === "" && !read.error) {
        errors.push(
          `OTel CA bundle ${this.#o.otelCa!.key} does not exist (keeping the last good one)`,
        );
      }
      let swapped = false;
      if (wanted && wanted !== currentPem) {
        swapped = await writeGeneration(
          dir,
          new Map([[TLS_FILES.ca, new TextEncoder().encode(wanted)]]),
        );
        if (swapped) this.#o.log.info("otel ca bundle updated", {});
      } else {
        await repairLayout(dir);
      }
      const inUse = wanted ?? currentPem;
      const certs = inUse ? parseCertificatesPem(inUse) : [];
      const notAfter = certs.length
        ? new Date(Math.min(...certs.map((c) => c.notAfter.getTime()))).toISOString()
        : undefined;
      return {
        swapped,
        status: {
          certificates: certs.length,
          notAfter,
          action: swapped ? "updated" : inUse ? "kept" : "none yet",
        },
      };
    } catch (err) {
      errors.push(`OTel CA bundle: ${(err as Error).message}`);
      return { swapped: false, status: { certificates: 0, action: "failed" } };
    }
  }
}

/**
 * Checks an OTel server CA bundle as untrusted input: PEM certificates only, at least one, each a
 * CA certificate that is not expired. Returns the PEM unchanged.
 */
export function validOtelBundle(pem: string, now = new Date()): string {
  const certs = parseCertificatesPem(pem, "OTel CA bundle");
  for (const c of certs) {
    const constraints = caProblems(c, now).filter((p) => !/valid before|expired/.test(p));
    if (constraints.length) throw new Error(`OTel CA bundle: ${constraints.join("; ")}`);
  }
  const expired = certs.filter((c) => c.notAfter < now);
  if (expired.length === certs.length) {
    throw new Error(`every certificate of the bundle has expired (${expired[0].subject})`);
  }
  return pem;
}

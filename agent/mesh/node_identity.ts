/**
 * The node certificate of the endpoint mesh while the agent runs (spec §7.9): issued from the
 * cluster CA in memory when the mesh starts, renewed at half-life (45–55 % of its life: a new key
 * and certificate), and swapped into the server's credentials for new handshakes without ending
 * an established session; new client channels take the current one (`current`). A renewal that
 * fails leaves the current certificate serving until it expires and is retried with backoff (the
 * `Loop`'s); `status()` says when the certificate expires and why renewal failed.
 */

import { parseDuration } from "../../core/kit/duration.ts";
import { UsageError } from "../../core/kit/errors.ts";
import type { Logger } from "../../core/kit/log.ts";
import { Loop } from "../loop.ts";
import {
  type ClusterCa,
  issueNodeTls,
  type IssueNodeTlsOptions,
  NodeServerCredentials,
  type NodeTls,
} from "./node_tls.ts";

/** `--node-cert-lifetime`: its default and bounds. */
export const NODE_CERT_LIFETIME = {
  default: "24h",
  /** Below this, renewal and its retries have no room before expiry. */
  minMs: 2_000,
  /** A node certificate is short-lived: at most 30 days. */
  maxMs: 30 * 24 * 3_600_000,
} as const;

/** Parses and checks a node certificate lifetime (`--node-cert-lifetime`). */
export function parseNodeCertLifetime(text: string, flag = "--node-cert-lifetime"): number {
  const ms = parseDuration(text, flag);
  if (ms < NODE_CERT_LIFETIME.minMs || ms > NODE_CERT_LIFETIME.maxMs) {
    throw new UsageError(`${flag} ${JSON.stringify(text)} is outside 2s..720h`, {
      hint:
        `the mesh node certificate's lifetime, renewed at half of it (default ${NODE_CERT_LIFETIME.default})`,
    });
  }
  return ms;
}

/** What the agent's status says of its node certificate (`mesh.json` `nodeCertificate`). */
export interface NodeCertificateStatus {
  serial: string;
  /** When it expires (ISO): after this, no new handshake succeeds with it. */
  notAfter: string;
  /** When renewal is due (ISO). */
  renewAt: string;
  /** True once `notAfter` passed without a renewal. */
  expired: boolean;
  /** Certificates issued since the mesh started, the first included. */
  issued: number;
  /** Consecutive failed renewals (0 after a good one). */
  failures: number;
  /** Why the last renewal failed, while it has not succeeded since. */
  lastError?: string;
  /** When it failed (ISO). */
  lastFailureAt?: string;
}

/** Options of `NodeIdentity`. */
export interface NodeIdentityOptions {
  ca: ClusterCa;
  cluster: string;
  nodeGroup: string;
  nodeId: string;
  /** Lifetime of each certificate (default 24 h). */
  lifetimeMs?: number;
  /** The clock (default the system's): renewal is due by it, and certificates start at it. */
  now?: () => Date;
  /** Issues a certificate (default `issueNodeTls`; tests make it fail). */
  issue?: (options: IssueNodeTlsOptions) => Promise<NodeTls>;
  /** Jitter of the retry backoff in [0, 1) (default Math.random). */
  random?: () => number;
  /** After each renewal or failed renewal. */
  onChange?: (status: NodeCertificateStatus) => void;
  log: Logger;
}

/** The mesh node certificate, renewed while the agent runs. `start()`, then `stop()`. */
export class NodeIdentity {
  readonly #o: NodeIdentityOptions;
  readonly #lifetimeMs: number;
  readonly #now: () => Date;
  readonly #loop: Loop;
  #tls?: NodeTls;
  #credentials?: NodeServerCredentials;
  #issued = 0;
  #failures = 0;
  #lastError?: string;
  #lastFailureAt?: Date;

  constructor(options: NodeIdentityOptions) {
    this.#o = options;
    this.#lifetimeMs = options.lifetimeMs ?? 24 * 3_600_000;
    this.#now = options.now ?? (() => new Date());
    // Checks are a clock comparison: every 1/40 of the lifetime (at most a minute). A failed
    // renewal is retried from that interval on, doubling, up to a tenth of the lifetime (at most
    // 5 minutes): renewal at half-life leaves at least five attempts before expiry.
    const checkMs = clamp(this.#lifetimeMs / 40, 50, 60_000);
    this.#loop = new Loop({
      name: "mesh-node-certificate",
      intervalMs: checkMs,
      maxBackoffMs: clamp(this.#lifetimeMs / 10, checkMs, 300_000),
      random: options.random,
      pass: () => this.#pass(),
      log: options.log,
    });
  }

  /** Issues the first certificate (a failure throws: the mesh does not start) and starts renewal. */
  async start(): Promise<void> {
    this.#tls = await this.#issue();
    this.#issued = 1;
    this.#credentials = new NodeServerCredentials(this.#tls);
    this.#loop.start();
  }

  /** Stops renewal (the current certificate stays until the server closes). */
  async stop(): Promise<void> {
    await this.#loop.stop();
  }

  /** The current certificate and key: what new client channels present. */
  get current(): NodeTls {
    if (!this.#tls) throw new Error("NodeIdentity: not started");
    return this.#tls;
  }

  /** The server's credentials: bind once, every renewal reaches new handshakes. */
  get serverCredentials(): NodeServerCredentials {
    if (!this.#credentials) throw new Error("NodeIdentity: not started");
    return this.#credentials;
  }

  /** The wait before the next check: the check interval, or the backoff after failures. */
  nextCheckMs(): number {
    return this.#loop.nextDelayMs();
  }

  /** Checks now whether renewal is due (e.g. after the clock jumped). */
  check(): void {
    this.#loop.hint({ delayMs: 0 });
  }

  /** The status of the current certificate and of its renewal (undefined before `start`). */
  status(): NodeCertificateStatus | undefined {
    const t = this.#tls;
    if (!t) return undefined;
    return {
      serial: t.serial,
      notAfter: t.notAfter.toISOString(),
      renewAt: new Date(t.renewAt).toISOString(),
      expired: this.#now().getTime() >= t.notAfter.getTime(),
      issued: this.#issued,
      failures: this.#failures,
      lastError: this.#lastError,
      lastFailureAt: this.#lastFailureAt?.toISOString(),
    };
  }

  async #issue(): Promise<NodeTls> {
    return await (this.#o.issue ?? issueNodeTls)({
      ca: this.#o.ca,
      cluster: this.#o.cluster,
      nodeGroup: this.#o.nodeGroup,
      nodeId: this.#o.nodeId,
      now: this.#now(),
      lifetimeMs: this.#lifetimeMs,
    });
  }

  /** One check: renews when due; a failure keeps the current certificate and backs off. */
  async #pass(): Promise<{ backOff?: boolean }> {
    if (this.#now().getTime() < this.current.renewAt) return {};
    const old = this.current;
    try {
      const next = await this.#issue();
      // Checked and swapped in for new handshakes; established sessions keep their keys.
      this.serverCredentials.update(next);
      this.#tls = next;
      this.#issued++;
    } catch (err) {
      this.#failures++;
      this.#lastError = (err as Error).message;
      this.#lastFailureAt = this.#now();
      this.#o.log.warn("mesh node certificate not renewed", {
        error: this.#lastError,
        failures: this.#failures,
        notAfter: old.notAfter.toISOString(),
      });
      this.#o.onChange?.(this.status()!);
      return { backOff: true };
    }
    this.#failures = 0;
    this.#lastError = this.#lastFailureAt = undefined;
    this.#o.log.info("mesh node certificate renewed", {
      serial: this.current.serial,
      notAfter: this.current.notAfter.toISOString(),
    });
    this.#o.onChange?.(this.status()!);
    return {};
  }
}

function clamp(value: number, min: number, max: number): number {
  return Math.min(max, Math.max(min, Math.floor(value)));
}

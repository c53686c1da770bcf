/**
 * The agent's "identity-ca" loop: a `CaMaintainer` pass every interval, its status written to
 * `<state-dir>/identity.json`, and the lease released on shutdown.
 */

import { UsageError } from "../../core/kit/errors.ts";
import type { Logger } from "../../core/kit/log.ts";
import type { ObjectStore } from "../../core/store/object_store.ts";
import type { RetryPolicy } from "../../core/kit/retry.ts";
import { openStore } from "../../core/store/store_url.ts";
import { Loop } from "../loop.ts";
import type { CaKeySource } from "./ca_key.ts";
import { CaMaintainer, type IdentityStatus } from "./ca_maintainer.ts";
import type { S3Object } from "../../core/store/object_url.ts";
import { DEFAULT_ROTATION_POLICY, policyProblems, type RotationPolicy } from "./ca_rotation.ts";
import { writeIdentityStatus } from "./identity_status.ts";

/** Defaults of the identity flags. */
export const IDENTITY_DEFAULTS = {
  interval: "30s",
  lease: "90s",
  caLifetime: "8760h",
  trustWindow: "1h",
  clockSkew: "5m",
} as const;

/** Options of `identityCaLoop`. */
export interface IdentityLoopOptions {
  store: ObjectStore;
  cluster: string;
  nodeId: string;
  keySource: CaKeySource;
  /** `--workload-ca-publish`, when set (parsed once, by the flags). */
  publish?: S3Object;
  region: string;
  /** Retry policy of the external bucket's store (the agent's: the loop is the retry). */
  retry: RetryPolicy;
  intervalMs: number;
  leaseMs: number;
  caLifetimeMs: number;
  trustWindowMs: number;
  clockSkewMs: number;
  stateDir: string;
  /** Whether this agent contends for the CA lease now (`CaMaintainerOptions.contend`). */
  contend?: () => boolean;
  log: Logger;
}

/** The loop and the shutdown step that releases the lease. */
export interface IdentityLoop {
  loop: Loop<IdentityStatus>;
  /** After the loop stopped: gives the lease up so another agent takes over at once. */
  release(): Promise<void>;
  /** One pass outside the loop (`run --once`), its status written. */
  once(): Promise<void>;
}

/** Builds the identity-ca loop; a policy that cannot rotate safely is a `UsageError`. */
export function identityCaLoop(options: IdentityLoopOptions): IdentityLoop {
  const target = options.publish &&
    { url: `s3://${options.publish.bucket}/${options.publish.key}`, ...options.publish };
  const policy: RotationPolicy = {
    ...DEFAULT_ROTATION_POLICY,
    caLifetimeMs: options.caLifetimeMs,
    trustWindowMs: options.trustWindowMs,
    skewMs: options.clockSkewMs,
    publicationTarget: target?.url,
  };
  const problems = policyProblems(policy);
  if (options.intervalMs * 3 > options.leaseMs) {
    problems.push("--identity-interval must be at most a third of --identity-lease");
  }
  if (problems.length) {
    throw new UsageError(`workload CA settings: ${problems.join("; ")}`, {
      hint: "check --workload-ca-lifetime, --workload-ca-trust-window, --clock-skew, " +
        "--identity-interval and --identity-lease",
    });
  }
  const maintainer = new CaMaintainer({
    store: options.store,
    cluster: options.cluster,
    nodeId: options.nodeId,
    keySource: options.keySource,
    policy,
    publication: target && {
      target,
      store: openStore(`s3://${target.bucket}`, { region: options.region, retry: options.retry }),
    },
    leaseDurationMs: options.leaseMs,
    contend: options.contend,
    log: options.log,
  });
  const loop = new Loop<IdentityStatus>({
    name: "identity-ca",
    intervalMs: options.intervalMs,
    // Never back off past the lease: a leader that waits longer loses it.
    maxBackoffMs: Math.max(options.intervalMs, Math.floor(options.leaseMs / 3)),
    log: options.log,
    pass: async () => await maintainer.pass(),
    status: (status) => writeIdentityStatus(options.stateDir, status),
  });
  return {
    loop,
    async release() {
      if (await maintainer.release()) options.log.info("CA leader lease released");
    },
    async once() {
      const { status } = await maintainer.pass();
      await writeIdentityStatus(options.stateDir, status);
    },
  };
}

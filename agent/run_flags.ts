/** The flags of `podmin-agent run`: defaults, parsing and checks (usage errors name the flag). */

import {
  booleanFlag,
  type CommandContext,
  requireString,
  stringFlag,
} from "../core/kit/cli_kit.ts";
import { parseDuration } from "../core/kit/duration.ts";
import { UsageError } from "../core/kit/errors.ts";
import { formatIpv6, parseIpv6, parseIpv6Prefix } from "../core/model/ipv6.ts";
import { checkClusterId, checkNodeGroup, checkNodeId } from "../core/model/names.ts";
import { defaultRegion } from "../core/store/store_url.ts";
import {
  REGISTRY_LISTEN,
  REGISTRY_REDIRECT_MIN_BYTES,
  REGISTRY_REDIRECT_TTL,
} from "../registry/defaults.ts";
import { parseListen, parseRedirect } from "../registry/server.ts";
import { PODS_API_SOCKET } from "./discovery/pods_api.ts";
import { kubeletMinor } from "./discovery/pods_api_problem.ts";
import { IDENTITY_DEFAULTS } from "./identity/identity_loop.ts";
import { NODE_CERT_LIFETIME, parseNodeCertLifetime } from "./mesh/node_identity.ts";

/** Default locations and intervals on a node. */
export const DEFAULTS = {
  manifestDir: "/etc/podmin/manifests",
  secretsDir: "/run/podmin/secrets",
  tlsDir: "/run/podmin/tls",
  telemetryDir: "/run/podmin/telemetry",
  fluentBitUnit: "podmin-fluent-bit.service",
  stateDir: "/run/podmin/agent",
  interval: "2s",
  secretsInterval: "60s",
} as const;

/** `--kubelet-version`: empty (an unset unit variable) is unknown; otherwise X.Y.Z. */
function kubeletVersionFlag(v: string | undefined): string | undefined {
  if (v === undefined || v === "") return undefined;
  if (!kubeletMinor(v)) {
    throw new UsageError(`--kubelet-version: ${JSON.stringify(v)} is not a version`, {
      hint: "the kubelet's version as X.Y.Z, e.g. --kubelet-version 1.36.3",
    });
  }
  return v.replace(/^v/, "");
}

/** The flags of `run`, typed and checked. */
export function runFlags(ctx: CommandContext) {
  const cluster = checkClusterId(
    requireString(ctx, "cluster", "the cluster id, e.g. --cluster prod"),
  );
  const nodeGroup = checkNodeGroup(requireString(ctx, "nodegroup", "e.g. --nodegroup workers"));
  const provider = stringFlag(ctx, "provider") ?? "aws";
  if (provider !== "aws") {
    throw new UsageError(`unsupported provider ${JSON.stringify(provider)}`, {
      hint: "use --provider aws",
    });
  }
  const secretsInterval = stringFlag(ctx, "secrets-interval") ?? DEFAULTS.secretsInterval;
  const registryListen = stringFlag(ctx, "registry-listen") ?? REGISTRY_LISTEN;
  // Checked here, so a refused address fails the command instead of being only logged.
  if (registryListen !== "off") {
    parseListen(registryListen, {
      allowNonLoopback: booleanFlag(ctx, "registry-allow-non-loopback"),
      flag: "--registry-listen",
      allowFlag: "--registry-allow-non-loopback",
    });
  }
  const registryRedirect = parseRedirect({
    minBytes: stringFlag(ctx, "registry-redirect-min-bytes") ??
      String(REGISTRY_REDIRECT_MIN_BYTES),
    ttl: stringFlag(ctx, "registry-redirect-ttl") ?? REGISTRY_REDIRECT_TTL,
    minBytesFlag: "--registry-redirect-min-bytes",
    ttlFlag: "--registry-redirect-ttl",
  });
  // The delegated Pod prefix (the dataplane's input): refused when it is not an IPv6 prefix.
  const ipv6Prefix = stringFlag(ctx, "ipv6-prefix");
  if (ipv6Prefix !== undefined) {
    try {
      parseIpv6Prefix(ipv6Prefix);
    } catch (err) {
      throw new UsageError(`--ipv6-prefix: ${(err as Error).message}`, {
        hint: "the node's delegated Pod prefix, e.g. --ipv6-prefix 2600:1f18:4b2:aa00:1234::/80",
      });
    }
  }
  const dataplane = stringFlag(ctx, "dataplane") ?? "auto";
  if (dataplane !== "auto" && dataplane !== "off") {
    throw new UsageError(`--dataplane must be auto or off, not ${JSON.stringify(dataplane)}`, {
      hint: "auto runs the eBPF Service dataplane whenever --mesh-listen is given",
    });
  }
  return {
    cluster,
    nodeGroup,
    dataplane: dataplane === "auto" && stringFlag(ctx, "mesh-listen") !== undefined,
    nodeId: checkNodeId(stringFlag(ctx, "node-id") ?? defaultNodeId()),
    nodeAddress: optionalIpv6(stringFlag(ctx, "node-address")),
    workloadCaKey: parseCaKeyFlag(stringFlag(ctx, "workload-ca-key") ?? "ssm"),
    workloadCaPublish: optionalS3ObjectUrl(ctx, "workload-ca-publish"),
    telemetryDir: stringFlag(ctx, "telemetry-dir") ?? DEFAULTS.telemetryDir,
    fluentBitIdentity: booleanFlag(ctx, "fluent-bit-identity"),
    otelCa: optionalS3ObjectUrl(ctx, "otel-ca"),
    fluentBitUnit: stringFlag(ctx, "fluent-bit-unit") ?? DEFAULTS.fluentBitUnit,
    dnsDir: stringFlag(ctx, "dns-dir"),
    meshListen: stringFlag(ctx, "mesh-listen"),
    meshAdvertise: stringFlag(ctx, "mesh-advertise"),
    clusterCa: parseCaKeyFlag(stringFlag(ctx, "cluster-ca") ?? "ssm", "--cluster-ca"),
    nodeCertLifetimeMs: parseNodeCertLifetime(
      stringFlag(ctx, "node-cert-lifetime") ?? NODE_CERT_LIFETIME.default,
    ),
    podsApiSocket: stringFlag(ctx, "pods-api-socket") ?? PODS_API_SOCKET,
    kubeletVersion: kubeletVersionFlag(stringFlag(ctx, "kubelet-version")),
    ipv6Prefix,
    identity: identityFlags(ctx),
    intervalMs: parseDuration(stringFlag(ctx, "interval") ?? DEFAULTS.interval, "--interval"),
    region: stringFlag(ctx, "region") ?? defaultRegion(),
    manifestDir: stringFlag(ctx, "manifest-dir") ?? DEFAULTS.manifestDir,
    secretsDir: stringFlag(ctx, "secrets-dir") ?? DEFAULTS.secretsDir,
    tlsDir: stringFlag(ctx, "tls-dir") ?? DEFAULTS.tlsDir,
    stateDir: stringFlag(ctx, "state-dir") ?? DEFAULTS.stateDir,
    secretsIntervalMs: parseDuration(secretsInterval, "--secrets-interval"),
    once: booleanFlag(ctx, "once"),
    registryListen,
    registryRedirect,
  };
}

/** An optional IPv6 address flag, canonical. */
function optionalIpv6(value: string | undefined): string | undefined {
  if (value === undefined || value === "") return undefined;
  try {
    return formatIpv6(parseIpv6(value));
  } catch (err) {
    throw new UsageError(`--node-address: ${(err as Error).message}`, {
      hint: "the node's IPv6 address, e.g. --node-address 2600:1f18:4b2:aa00::10",
    });
  }
}

/** The host name as a node id (lowercase, first label). */
function defaultNodeId(): string {
  return Deno.hostname().toLowerCase().split(".")[0];
}

/** The durations of the identity-ca loop. */
function identityFlags(ctx: CommandContext) {
  const d = (flag: string, fallback: string) =>
    parseDuration(stringFlag(ctx, flag) ?? fallback, `--${flag}`);
  return {
    intervalMs: d("identity-interval", IDENTITY_DEFAULTS.interval),
    leaseMs: d("identity-lease", IDENTITY_DEFAULTS.lease),
    caLifetimeMs: d("workload-ca-lifetime", IDENTITY_DEFAULTS.caLifetime),
    trustWindowMs: d("workload-ca-trust-window", IDENTITY_DEFAULTS.trustWindow),
    clockSkewMs: d("clock-skew", IDENTITY_DEFAULTS.clockSkew),
  };
}

/** `--workload-ca-key`: where the workload CA key comes from. */
export type CaKeyFlag = { kind: "ssm" } | { kind: "file"; path: string } | { kind: "off" };

function parseCaKeyFlag(value: string, flag = "--workload-ca-key"): CaKeyFlag {
  if (value === "ssm" || value === "off") return { kind: value };
  if (value.startsWith("file:") && value.length > 5 && value.slice(5).startsWith("/")) {
    return { kind: "file", path: value.slice(5) };
  }
  throw new UsageError(`${flag} ${JSON.stringify(value)} is not a key source`, {
    hint: 'use "ssm", "file:/run/…/<name>.pem" (an absolute path on tmpfs) or "off"',
  });
}

/** An optional exact `s3://BUCKET/KEY` flag. */
function optionalS3ObjectUrl(ctx: CommandContext, flag: string): string | undefined {
  const value = stringFlag(ctx, flag);
  if (value === undefined) return undefined;
  const m = /^s3:\/\/([a-z0-9][a-z0-9.-]{1,61}[a-z0-9])\/(.+)$/.exec(value);
  if (!m || m[2].endsWith("/")) {
    throw new UsageError(`--${flag} ${JSON.stringify(value)} is not an exact s3://BUCKET/KEY`, {
      hint: "name one object, e.g. s3://my-trust-bundles/podmin/prod.pem",
    });
  }
  return value;
}

/** The checked flags of `run`. */
export type RunFlags = ReturnType<typeof runFlags>;

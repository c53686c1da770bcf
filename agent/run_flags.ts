/** The flags of `podmin-agent run`: defaults, parsing and checks (usage errors name the flag). */

import { type CommandContext, requireString, stringFlag } from "../core/kit/cli_kit.ts";
import { parseDuration } from "../core/kit/duration.ts";
import { UsageError } from "../core/kit/errors.ts";
import { formatIpv6, parseIpv6, parseIpv6Prefix } from "../core/model/ipv6.ts";
import { checkClusterId, checkNodeGroup, checkNodeId } from "../core/model/names.ts";
import { defaultRegion } from "../core/store/store_url.ts";
import { parseS3ObjectUrl, type S3Object } from "../core/store/object_url.ts";
import { parseListen, parseRedirect } from "../registry/server.ts";
import { DATAPLANE_FLAGS } from "./dataplane/part.ts";
import { DEPLOYMENTS_FLAGS } from "./deployments/part.ts";
import { DISCOVERY_FLAGS } from "./discovery/part.ts";
import { DNS_FLAGS } from "./dns/part.ts";
import { kubeletMinor } from "./discovery/pods_api_problem.ts";
import type { CaKeyFlag } from "./identity/ca_key.ts";
import { IDENTITY_FLAGS, TELEMETRY_FLAGS } from "./identity/part.ts";
import { MESH_FLAGS } from "./mesh/part.ts";
import { parseNodeCertLifetime } from "./mesh/node_identity.ts";
import { NODE_FLAGS } from "./node/part.ts";
import { flagHelp, type FlagSpecs, readFlags, STATE_DIR_FLAG } from "./part.ts";
import { REGISTRY_FLAGS } from "./registry_host.ts";
import { SECRETS_FLAGS } from "./secrets/part.ts";

/**
 * The flags of `run`, in help order: its own, then each part's (name, type, default and help,
 * each written once, by the part that reads it).
 */
export const RUN_FLAGS = {
  cluster: { type: "string", arg: "ID", help: "cluster id (parameter names /<cluster>/…)" },
  nodegroup: { type: "string", arg: "NAME", help: "this node's NodeGroup" },
  ...DEPLOYMENTS_FLAGS,
  ...SECRETS_FLAGS,
  "state-dir": STATE_DIR_FLAG,
  interval: {
    type: "string",
    default: "2s",
    arg: "DURATION",
    help: "index poll interval (default {default})",
  },
  once: {
    type: "boolean",
    help: "one full pass; exit 0 when converged, 1 with the reasons otherwise",
  },
  provider: { type: "string", default: "aws", arg: "aws", help: "cloud provider (only aws)" },
  "node-id": {
    type: "string",
    arg: "ID",
    help: "this node's id, a DNS label (default: the host name; the\n" +
      "EC2 instance id on nodes); names it in leases and records",
  },
  ...NODE_FLAGS,
  ...IDENTITY_FLAGS,
  ...TELEMETRY_FLAGS,
  ...MESH_FLAGS,
  ...DISCOVERY_FLAGS,
  ...DATAPLANE_FLAGS,
  ...DNS_FLAGS,
  ...REGISTRY_FLAGS,
} as const satisfies FlagSpecs;

/** The help of `run`: its flags' lines come from `RUN_FLAGS`. */
export const RUN_HELP = `Usage: podmin-agent run --bucket URL --cluster ID --nodegroup NAME [flags]

Polls deployments/index.json, writes this NodeGroup's Pods as kubelet static
Pod manifests and keeps their declared Parameter Store / Secrets Manager values
in tmpfs. A failed or invalid read never removes a running Pod.

Flags:
${flagHelp(RUN_FLAGS)}

Example:
  podmin-agent run --bucket s3://my-cluster --cluster prod --nodegroup workers --once`;

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
  const v = readFlags(ctx, RUN_FLAGS);
  const cluster = checkClusterId(
    requireString(ctx, "cluster", "the cluster id, e.g. --cluster prod"),
  );
  const nodeGroup = checkNodeGroup(requireString(ctx, "nodegroup", "e.g. --nodegroup workers"));
  if (v.provider !== "aws") {
    throw new UsageError(`unsupported provider ${JSON.stringify(v.provider)}`, {
      hint: "use --provider aws",
    });
  }
  // Checked here, so a refused address fails the command instead of being only logged.
  if (v["registry-listen"] !== "off") {
    parseListen(v["registry-listen"], {
      allowNonLoopback: v["registry-allow-non-loopback"],
      flag: "--registry-listen",
      allowFlag: "--registry-allow-non-loopback",
    });
  }
  const registryRedirect = parseRedirect({
    minBytes: v["registry-redirect-min-bytes"],
    ttl: v["registry-redirect-ttl"],
    minBytesFlag: "--registry-redirect-min-bytes",
    ttlFlag: "--registry-redirect-ttl",
  });
  // The delegated Pod prefix (the dataplane's input): refused when it is not an IPv6 prefix.
  const ipv6Prefix = v["ipv6-prefix"];
  if (ipv6Prefix !== undefined) {
    try {
      parseIpv6Prefix(ipv6Prefix);
    } catch (err) {
      throw new UsageError(`--ipv6-prefix: ${(err as Error).message}`, {
        hint: "the node's delegated Pod prefix, e.g. --ipv6-prefix 2600:1f18:4b2:aa00:1234::/80",
      });
    }
  }
  if (v.dataplane !== "auto" && v.dataplane !== "off") {
    throw new UsageError(`--dataplane must be auto or off, not ${JSON.stringify(v.dataplane)}`, {
      hint: "auto runs the eBPF Service dataplane whenever --mesh-listen is given",
    });
  }
  const nodeId = checkNodeId(v["node-id"] ?? defaultNodeId());
  const nodeAddress = optionalIpv6(v["node-address"]);
  const duration = (flag: keyof typeof RUN_FLAGS & DurationFlag) =>
    parseDuration(v[flag], `--${flag}`);
  return {
    cluster,
    nodeGroup,
    dataplane: v.dataplane === "auto" && v["mesh-listen"] !== undefined,
    nodeId,
    /** The node part's addresses. */
    node: { address: nodeAddress, podPrefix: ipv6Prefix },
    workloadCaKey: parseCaKeyFlag(v["workload-ca-key"]),
    workloadCaPublish: optionalS3Object(v["workload-ca-publish"], "--workload-ca-publish"),
    telemetry: {
      dir: v["telemetry-dir"],
      fluentBitIdentity: v["fluent-bit-identity"],
      otelCa: optionalS3Object(v["otel-ca"], "--otel-ca"),
      fluentBitUnit: v["fluent-bit-unit"],
    },
    dnsDir: v["dns-dir"],
    meshListen: v["mesh-listen"],
    mesh: {
      listen: v["mesh-listen"],
      advertiseHost: v["mesh-advertise"] ?? nodeAddress ?? "127.0.0.1",
      clusterCa: parseCaKeyFlag(v["cluster-ca"], "--cluster-ca"),
      nodeCertLifetimeMs: parseNodeCertLifetime(v["node-cert-lifetime"]),
      podsApiSocket: v["pods-api-socket"],
      kubeletVersion: kubeletVersionFlag(v["kubelet-version"]),
    },
    ipv6Prefix,
    identity: {
      intervalMs: duration("identity-interval"),
      leaseMs: duration("identity-lease"),
      caLifetimeMs: duration("workload-ca-lifetime"),
      trustWindowMs: duration("workload-ca-trust-window"),
      clockSkewMs: duration("clock-skew"),
    },
    intervalMs: duration("interval"),
    region: stringFlag(ctx, "region") ?? defaultRegion(),
    /** The deployments part's directories. */
    dirs: { manifestDir: v["manifest-dir"], secretsDir: v["secrets-dir"], tlsDir: v["tls-dir"] },
    stateDir: v["state-dir"],
    secretsIntervalMs: duration("secrets-interval"),
    once: v.once,
    registry: { listen: v["registry-listen"], redirect: registryRedirect },
  };
}

/** The duration flags of `run` (all with a default). */
type DurationFlag =
  | "interval"
  | "secrets-interval"
  | "identity-interval"
  | "identity-lease"
  | "workload-ca-lifetime"
  | "workload-ca-trust-window"
  | "clock-skew";

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

function parseCaKeyFlag(value: string, flag = "--workload-ca-key"): CaKeyFlag {
  if (value === "ssm" || value === "off") return { kind: value };
  if (value.startsWith("file:") && value.length > 5 && value.slice(5).startsWith("/")) {
    return { kind: "file", path: value.slice(5) };
  }
  throw new UsageError(`${flag} ${JSON.stringify(value)} is not a key source`, {
    hint: 'use "ssm", "file:/run/…/<name>.pem" (an absolute path on tmpfs) or "off"',
  });
}

/** An optional exact `s3://BUCKET/KEY` flag, parsed once. */
function optionalS3Object(value: string | undefined, flag: string): S3Object | undefined {
  return value === undefined ? undefined : parseS3ObjectUrl(value, flag);
}

/** The checked flags of `run`. */
export type RunFlags = ReturnType<typeof runFlags>;

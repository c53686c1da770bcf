/** The flags of `podmin-agent run`: defaults, parsing and checks (usage errors name the flag). */

import { type CommandContext, requireString, stringFlag } from "../core/kit/cli_kit.ts";
import { parseDuration } from "../core/kit/duration.ts";
import { UsageError } from "../core/kit/errors.ts";
import { formatIpv6, parseIpv6, parseIpv6Prefix } from "../core/model/ipv6.ts";
import { checkClusterId, checkNodeGroup, checkNodeId } from "../core/model/names.ts";
import { defaultRegion } from "../core/store/store_url.ts";
import { parseS3ObjectUrl, type S3Object } from "../core/store/object_url.ts";
import {
  REGISTRY_LISTEN,
  REGISTRY_REDIRECT_MIN_BYTES,
  REGISTRY_REDIRECT_TTL,
} from "../registry/defaults.ts";
import { parseListen, parseRedirect } from "../registry/server.ts";
import { PODS_API_SOCKET } from "./discovery/pods_api.ts";
import { kubeletMinor } from "./discovery/pods_api_problem.ts";
import type { CaKeyFlag } from "./identity/ca_key.ts";
import { IDENTITY_DEFAULTS } from "./identity/identity_loop.ts";
import { NODE_CERT_LIFETIME, parseNodeCertLifetime } from "./mesh/node_identity.ts";
import { flagHelp, type FlagSpecs, readFlags, STATE_DIR_FLAG } from "./part.ts";

/** The flags of `run`, in help order: name, type, default and help, each written once. */
export const RUN_FLAGS = {
  cluster: { type: "string", arg: "ID", help: "cluster id (parameter names /<cluster>/…)" },
  nodegroup: { type: "string", arg: "NAME", help: "this node's NodeGroup" },
  "manifest-dir": {
    type: "string",
    default: "/etc/podmin/manifests",
    arg: "DIR",
    help: "kubelet static Pod directory (default {default})",
  },
  "secrets-dir": {
    type: "string",
    default: "/run/podmin/secrets",
    arg: "DIR",
    help: "tmpfs root of per-Pod values (default {default})",
  },
  "tls-dir": {
    type: "string",
    default: "/run/podmin/tls",
    arg: "DIR",
    help: "tmpfs root of per-Pod certificates (default {default})",
  },
  "state-dir": STATE_DIR_FLAG,
  interval: {
    type: "string",
    default: "2s",
    arg: "DURATION",
    help: "index poll interval (default {default})",
  },
  "secrets-interval": {
    type: "string",
    default: "60s",
    arg: "DUR",
    help: "value refresh interval (default {default})",
  },
  once: {
    type: "boolean",
    help: "one full pass; exit 0 when converged, 1 with the reasons otherwise",
  },
  provider: { type: "string", default: "aws", arg: "aws", help: "cloud provider (only aws)" },
  "ipv6-prefix": {
    type: "string",
    arg: "PREFIX",
    help: "the node's delegated Pod prefix (used by the dataplane)",
  },
  "node-address": {
    type: "string",
    arg: "ADDR",
    help: "this node's IPv6 address, for its record under dns/nodes/",
  },
  "node-id": {
    type: "string",
    arg: "ID",
    help: "this node's id, a DNS label (default: the host name; the\n" +
      "EC2 instance id on nodes); names it in leases and records",
  },
  "workload-ca-key": {
    type: "string",
    default: "ssm",
    arg: "SOURCE",
    help: 'the workload CA key: "{default}" (default,\n' +
      '/<cluster>/_system/workload-ca-key), "file:PATH" (a PEM on\n' +
      'tmpfs, as podmin local uses) or "off" (no Pod certificates)',
  },
  "telemetry-dir": {
    type: "string",
    default: "/run/podmin/telemetry",
    arg: "DIR",
    help: "tmpfs subtree of the Fluent Bit identity and the OTel CA\nbundle (default {default})",
  },
  "fluent-bit-identity": {
    type: "boolean",
    help: "keep a client-only Fluent Bit certificate in\n" +
      "<telemetry-dir>/client (validated every pass, renewed at\n" +
      "half-life; Fluent Bit restarted after each swap)",
  },
  "otel-ca": {
    type: "string",
    arg: "URL",
    help: "keep the OTLP server CA bundle s3://BUCKET/KEY in\n" +
      "<telemetry-dir>/otel-ca (last good kept on failures)",
  },
  "mesh-listen": {
    type: "string",
    arg: "ADDR",
    help: "join the endpoint mesh: serve it on ADDR (e.g. [::]:7443), watch\n" +
      "kubelet's Pods API, report this node's ready endpoints and keep\n" +
      "the cluster snapshot in <state-dir>/mesh.json; off by default",
  },
  "mesh-advertise": {
    type: "string",
    arg: "HOST",
    help: "the address peers reach this node at (default --node-address)",
  },
  "cluster-ca": {
    type: "string",
    default: "ssm",
    arg: "SOURCE",
    help: 'the cluster CA of mesh certificates: "{default}" (default,\n' +
      '/<cluster>/_system/cluster-ca) or "file:PATH" (PEM on tmpfs)',
  },
  "node-cert-lifetime": {
    type: "string",
    default: NODE_CERT_LIFETIME.default,
    arg: "DUR",
    help: "lifetime of the mesh node certificate (default\n" +
      "{default}, 2s..720h); renewed at half of it while\n" +
      "the agent runs, retried with backoff when renewal fails",
  },
  "pods-api-socket": {
    type: "string",
    default: PODS_API_SOCKET,
    arg: "PATH",
    help: "kubelet's Pods API (default {default})",
  },
  "kubelet-version": {
    type: "string",
    arg: "X.Y.Z",
    help: "the node's kubelet (vmconfig passes it): one without the Pods API\n" +
      "(before 1.36) is reported at once by the status and the node record",
  },
  dataplane: {
    type: "string",
    default: "auto",
    arg: "auto|off",
    help: 'the eBPF Service dataplane: "{default}" (default) runs it with\n' +
      "--mesh-listen (its input is the mesh snapshot joined with the\n" +
      "Services); it loads while there are Services, detaches when\n" +
      "there are none; needs root (CAP_BPF, CAP_NET_ADMIN)",
  },
  "dns-dir": {
    type: "string",
    arg: "DIR",
    help: "write the cluster zone (<svc>.<ns>.svc.cluster.local AAAA\n" +
      "the Service VIP) here for CoreDNS's file plugin; off by default",
  },
  "fluent-bit-unit": {
    type: "string",
    default: "podmin-fluent-bit.service",
    arg: "UNIT",
    help: "systemd unit restarted after a swap (default\n{default})",
  },
  "workload-ca-publish": {
    type: "string",
    arg: "URL",
    help: "publish every retained workload CA certificate as PEM to\n" +
      "this exact s3://BUCKET/KEY before CA promotion",
  },
  "identity-interval": {
    type: "string",
    default: IDENTITY_DEFAULTS.interval,
    arg: "DUR",
    help: "workload CA maintenance pass interval (default {default})",
  },
  "identity-lease": {
    type: "string",
    default: IDENTITY_DEFAULTS.lease,
    arg: "DUR",
    help: "CA leader lease duration (default {default}; at\nleast 3 intervals)",
  },
  "workload-ca-lifetime": {
    type: "string",
    default: IDENTITY_DEFAULTS.caLifetime,
    arg: "DUR",
    help: "lifetime of a new workload CA certificate (default\n" +
      "{default}); rotation starts at a third left",
  },
  "workload-ca-trust-window": {
    type: "string",
    default: IDENTITY_DEFAULTS.trustWindow,
    arg: "DUR",
    help: "how long agents may use a CA state they read before\n" +
      "promotion may rely on it (default {default})",
  },
  "clock-skew": {
    type: "string",
    default: IDENTITY_DEFAULTS.clockSkew,
    arg: "DUR",
    help: "bound on clock differences between nodes (default {default})",
  },
  "registry-listen": {
    type: "string",
    default: REGISTRY_LISTEN,
    arg: "ADDR",
    help: "serve the loopback registry here (default {default});\n" +
      '"off" disables it; not started with --once; loopback only',
  },
  "registry-allow-non-loopback": {
    type: "boolean",
    help: "\nallow a non-loopback --registry-listen (no authentication:\n" +
      "only where a firewall restricts who reaches it)",
  },
  "registry-redirect-min-bytes": {
    type: "string",
    default: String(REGISTRY_REDIRECT_MIN_BYTES),
    arg: "N|off",
    help: "\non an S3 bucket, answer a registry GET of a blob of at least N\n" +
      "bytes (KiB/MiB/GiB suffixes; default 1MiB) with a 307 to a\n" +
      'presigned URL of its key at the store\'s endpoint; "off" serves\n' +
      "every blob through the registry, verified",
  },
  "registry-redirect-ttl": {
    type: "string",
    default: REGISTRY_REDIRECT_TTL,
    arg: "DUR",
    help: "\nlifetime of those URLs, 1s to 1h (default {default})",
  },
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

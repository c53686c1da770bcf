/**
 * The flags of `podmin-agent run`: its own and its parts' (each part declares and checks its own;
 * usage errors name the flag).
 */

import { type CommandContext, requireString, stringFlag } from "../core/kit/cli_kit.ts";
import { parseDuration } from "../core/kit/duration.ts";
import { UsageError } from "../core/kit/errors.ts";
import { checkClusterId, checkNodeGroup, checkNodeId } from "../core/model/names.ts";
import { defaultRegion } from "../core/store/store_url.ts";
import { DATAPLANE_FLAGS, dataplaneFlags } from "./dataplane/part.ts";
import { DEPLOYMENTS_FLAGS } from "./deployments/part.ts";
import { DISCOVERY_FLAGS, discoveryFlags } from "./discovery/part.ts";
import { DNS_FLAGS } from "./dns/part.ts";
import { IDENTITY_FLAGS, identityFlags, TELEMETRY_FLAGS, telemetryFlags } from "./identity/part.ts";
import { MESH_FLAGS, meshFlags } from "./mesh/part.ts";
import { NODE_FLAGS, nodeFlags } from "./node/part.ts";
import { flagHelp, type FlagSpecs, readFlags, STATE_DIR_FLAG } from "./part.ts";
import { REGISTRY_FLAGS, registryFlags } from "./registry_host.ts";
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

/** The flags of `run`, typed and checked (each part checks its own). */
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
  const registry = registryFlags(v);
  const node = nodeFlags(v);
  const dataplane = dataplaneFlags(v, v["mesh-listen"] !== undefined);
  const nodeId = checkNodeId(v["node-id"] ?? defaultNodeId());
  const { workloadCaKey, publish, durations } = identityFlags(v);
  return {
    cluster,
    nodeGroup,
    dataplane,
    nodeId,
    /** The node part's addresses. */
    node,
    workloadCaKey,
    workloadCaPublish: publish,
    telemetry: telemetryFlags(v),
    dnsDir: v["dns-dir"],
    meshListen: v["mesh-listen"],
    mesh: { ...meshFlags(v, node.address), ...discoveryFlags(v) },
    identity: durations,
    intervalMs: parseDuration(v.interval, "--interval"),
    region: stringFlag(ctx, "region") ?? defaultRegion(),
    /** The deployments part's directories. */
    dirs: { manifestDir: v["manifest-dir"], secretsDir: v["secrets-dir"], tlsDir: v["tls-dir"] },
    stateDir: v["state-dir"],
    secretsIntervalMs: parseDuration(v["secrets-interval"], "--secrets-interval"),
    once: v.once,
    registry,
  };
}

/** The host name as a node id (lowercase, first label). */
function defaultNodeId(): string {
  return Deno.hostname().toLowerCase().split(".")[0];
}

/** The checked flags of `run`. */
export type RunFlags = ReturnType<typeof runFlags>;

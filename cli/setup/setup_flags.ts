/**
 * `podmin setup` flags exactly as the product documents them, validated with
 * precise messages:
 *
 *   --vpc-cidr 10.0.0.0/16
 *   --nat64 | --nat64=instance-type=TYPE
 *   --nodegroup NAME[,size=N,disk-size=GIB,instance-type=TYPE,zone=ZONE,nat64=TYPE]  (repeatable)
 *   --workload-ca-publish s3://BUCKET/KEY
 *   --otel-logs ENDPOINT[,ca=s3://BUCKET/KEY]
 *   --kms-key-arn ARN                 (repeatable)
 *   --kubernetes-version X.Y.Z, --crictl-version X.Y.Z, --containerd-version X.Y.Z
 */

import { UsageError, type ValidationError } from "../../core/kit/errors.ts";
import { architectureOf } from "../infra/instance_types.ts";
import { KMS_KEY_ARN } from "../infra/infra_inputs.ts";
import { checkClusterId, isDnsLabel } from "../../core/model/names.ts";
import type { Architecture } from "../../core/bucket/dependency_manifest.ts";
import { parseS3ObjectUrl, type S3Object } from "../../core/store/object_url.ts";
import { SETUP_DEFAULTS } from "./setup_defaults.ts";
import {
  checkReleaseVersion,
  type ReleaseVersions,
  VERSION_FLAGS,
  VERSIONED_PROGRAMS,
} from "./vendor_releases.ts";

/** An exact S3 object (`parseS3ObjectUrl`'s result). */
export type { S3Object };

/** One NodeGroup as the operator asked for it. */
export interface NodeGroupFlags {
  name: string;
  size: number;
  diskSizeGiB: number;
  instanceType: string;
  architecture: Architecture;
  /** A full zone name, a one-letter suffix, or undefined for the region's first available zone. */
  zone?: string;
  /** Instance type of a dedicated NAT64 instance. */
  nat64?: string;
}

/** Everything setup was asked to do. */
export interface SetupFlags {
  cluster: string;
  region: string;
  vpcCidr: string;
  /** Shared NAT64 per zone, with its instance type; undefined = no shared NAT64. */
  nat64?: { instanceType: string };
  nodeGroups: NodeGroupFlags[];
  workloadCaPublish?: S3Object;
  otelLogs?: { endpoint: string; ca?: S3Object };
  /** Customer-managed KMS keys of SecureStrings and secrets: the node role may decrypt with them. */
  kmsKeyArns: string[];
  /** Vendor releases chosen by version (`--kubernetes-version` sets `kubelet`). */
  releaseVersions: ReleaseVersions;
}

/** The architecture of an instance type, as a usage error for bad flags. */
function archOf(instanceType: string, where: string): Architecture {
  try {
    return architectureOf(instanceType);
  } catch (err) {
    throw new UsageError(`${where}: ${(err as Error).message}`, {
      hint: (err as ValidationError).hint,
    });
  }
}

function parseIpv4Cidr(text: string): string {
  const m = /^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})\/(\d{1,2})$/.exec(text);
  const octets = m ? m.slice(1, 5).map(Number) : [];
  const len = m ? Number(m[5]) : -1;
  if (!m || octets.some((o) => o > 255) || len < 16 || len > 28) {
    throw new UsageError(
      `--vpc-cidr: expected an IPv4 CIDR from /16 to /28, got ${JSON.stringify(text)}`,
      {
        hint: "e.g. --vpc-cidr 10.0.0.0/16",
      },
    );
  }
  const value = octets.reduce((v, o) => (v << 8) + o, 0) >>> 0;
  const mask = len === 0 ? 0 : (0xffffffff << (32 - len)) >>> 0;
  if ((value & mask) >>> 0 !== value) {
    throw new UsageError(`--vpc-cidr ${text} has host bits set`, {
      hint: "use the network address",
    });
  }
  return text;
}

function checkInstanceType(value: string, where: string): string {
  archOf(value, where);
  return value;
}

/** Parses one --nodegroup value. */
export function parseNodeGroup(text: string): NodeGroupFlags {
  const [name, ...pairs] = text.split(",");
  const where = `--nodegroup ${text}`;
  if (!isDnsLabel(name)) {
    throw new UsageError(`${where}: NodeGroup name must be a DNS label`, {
      hint: "e.g. --nodegroup workers,size=3",
    });
  }
  const ng: NodeGroupFlags = {
    name,
    size: SETUP_DEFAULTS.nodeGroupSize,
    diskSizeGiB: SETUP_DEFAULTS.diskSizeGiB,
    instanceType: SETUP_DEFAULTS.instanceType,
    architecture: archOf(SETUP_DEFAULTS.instanceType, "default instance type"),
  };
  const seen = new Set<string>();
  for (const pair of pairs) {
    const eq = pair.indexOf("=");
    const key = eq < 0 ? pair : pair.slice(0, eq);
    const value = eq < 0 ? "" : pair.slice(eq + 1);
    if (seen.has(key)) throw new UsageError(`${where}: ${key} given twice`);
    seen.add(key);
    if (value === "") throw new UsageError(`${where}: ${key} needs a value (${key}=…)`);
    switch (key) {
      case "size":
        if (!/^\d+$/.test(value) || Number(value) > 1000) {
          throw new UsageError(`${where}: size must be a whole number from 0 to 1000`);
        }
        ng.size = Number(value);
        break;
      case "disk-size":
        if (!/^\d+$/.test(value) || Number(value) < 8 || Number(value) > 16384) {
          throw new UsageError(`${where}: disk-size must be 8-16384 (GiB), got ${value}`);
        }
        ng.diskSizeGiB = Number(value);
        break;
      case "instance-type":
        ng.instanceType = checkInstanceType(value, where);
        ng.architecture = archOf(value, where);
        break;
      case "zone":
        if (!/^[a-z]$/.test(value) && !/^[a-z]{2}(-[a-z]+)+-\d+[a-z]$/.test(value)) {
          throw new UsageError(
            `${where}: zone must be a full zone (us-east-1b) or one suffix letter (b)`,
          );
        }
        ng.zone = value;
        break;
      case "nat64":
        ng.nat64 = checkInstanceType(value, where);
        break;
      default:
        throw new UsageError(`${where}: unknown key ${JSON.stringify(key)}`, {
          hint: "keys: size, disk-size, instance-type, zone, nat64",
        });
    }
  }
  return ng;
}

/** Options the command line hands over (raw flag values). */
export interface RawSetupFlags {
  cluster?: string;
  region: string;
  vpcCidr?: string;
  /** undefined: flag absent; "": bare --nat64; else "instance-type=TYPE". */
  nat64?: string;
  nodeGroups: string[];
  workloadCaPublish?: string;
  otelLogs?: string;
  kmsKeyArns?: string[];
  /** --kubernetes-version, --crictl-version, --containerd-version (by program). */
  releaseVersions?: ReleaseVersions;
}

/** `--nat64` (bare: the default instance type) or `--nat64=instance-type=TYPE`; absent: none. */
function parseNat64Flag(value: string | undefined): SetupFlags["nat64"] {
  if (value === undefined) return undefined;
  if (value === "" || value === "true") {
    return { instanceType: SETUP_DEFAULTS.nat64InstanceType };
  } else {
    const m = /^instance-type=(.+)$/.exec(value);
    if (!m) {
      throw new UsageError(
        `--nat64: expected --nat64 or --nat64=instance-type=TYPE, got ${JSON.stringify(value)}`,
      );
    }
    return { instanceType: checkInstanceType(m[1], "--nat64") };
  }
}

/** `--kms-key-arn` values: key ARNs (no aliases), duplicates dropped. */
function checkKmsKeyArnFlags(given: string[] | undefined): string[] {
  const kmsKeyArns = [...new Set(given ?? [])];
  for (const arn of kmsKeyArns) {
    if (!KMS_KEY_ARN.test(arn)) {
      throw new UsageError(`--kms-key-arn: expected a KMS key ARN, got ${JSON.stringify(arn)}`, {
        hint: "arn:aws:kms:REGION:ACCOUNT:key/KEY-ID (aliases and wildcards are not accepted)",
      });
    }
  }
  return kmsKeyArns;
}

/** `--otel-logs ENDPOINT[,ca=s3://BUCKET/KEY]`. */
function parseOtelLogsFlag(value: string): NonNullable<SetupFlags["otelLogs"]> {
  const [endpoint, ...rest] = value.split(",");
  let url: URL;
  try {
    url = new URL(endpoint.replace(/^endpoint=/, ""));
  } catch {
    throw new UsageError(
      `--otel-logs: the first item must be the OTLP endpoint URL, got ${JSON.stringify(endpoint)}`,
    );
  }
  if (url.protocol !== "https:" && url.protocol !== "http:") {
    throw new UsageError("--otel-logs: endpoint must be http(s)");
  }
  const otelLogs: NonNullable<SetupFlags["otelLogs"]> = { endpoint: url.toString() };
  for (const item of rest) {
    if (item.startsWith("ca=")) otelLogs.ca = parseS3ObjectUrl(item.slice(3), "--otel-logs ca=");
    else {throw new UsageError(`--otel-logs: unknown item ${JSON.stringify(item)}`, {
        hint: "only ca=s3://BUCKET/KEY",
      });}
  }
  return otelLogs;
}

/** Validates everything and returns the setup request. */
export function parseSetupFlags(raw: RawSetupFlags): SetupFlags {
  const cluster = (() => {
    try {
      return checkClusterId(raw.cluster ?? SETUP_DEFAULTS.cluster);
    } catch (err) {
      throw new UsageError(`--cluster: ${(err as Error).message}`);
    }
  })();
  if (!/^[a-z]{2}(-[a-z]+)+-\d+$/.test(raw.region)) {
    throw new UsageError(`--region: invalid AWS region ${JSON.stringify(raw.region)}`, {
      hint: "e.g. --region us-east-1",
    });
  }
  if (!raw.vpcCidr) {
    throw new UsageError("--vpc-cidr is required", { hint: "e.g. --vpc-cidr 10.0.0.0/16" });
  }
  const vpcCidr = parseIpv4Cidr(raw.vpcCidr);
  const nat64 = parseNat64Flag(raw.nat64);
  if (!raw.nodeGroups.length) {
    throw new UsageError("at least one --nodegroup is required", {
      hint: "e.g. --nodegroup default",
    });
  }
  const nodeGroups = raw.nodeGroups.map(parseNodeGroup);
  const names = new Set<string>();
  for (const ng of nodeGroups) {
    if (names.has(ng.name)) throw new UsageError(`--nodegroup ${ng.name} is given twice`);
    names.add(ng.name);
  }
  const kmsKeyArns = checkKmsKeyArnFlags(raw.kmsKeyArns);
  const releaseVersions: ReleaseVersions = {};
  for (const program of VERSIONED_PROGRAMS) {
    const v = raw.releaseVersions?.[program];
    if (v !== undefined) releaseVersions[program] = checkReleaseVersion(v, VERSION_FLAGS[program]);
  }
  const flags: SetupFlags = {
    cluster,
    region: raw.region,
    vpcCidr,
    nat64,
    nodeGroups,
    kmsKeyArns,
    releaseVersions,
  };
  if (raw.workloadCaPublish) {
    flags.workloadCaPublish = parseS3ObjectUrl(raw.workloadCaPublish, "--workload-ca-publish");
  }
  if (raw.otelLogs) flags.otelLogs = parseOtelLogsFlag(raw.otelLogs);
  return flags;
}

/** Resolves each NodeGroup's zone: a suffix letter or nothing → a full zone of the region. */
export function resolveZones(flags: SetupFlags, available: string[]): Map<string, string> {
  if (!available.length) throw new UsageError(`no available zone in ${flags.region}`);
  const out = new Map<string, string>();
  for (const ng of flags.nodeGroups) {
    const zone = ng.zone === undefined
      ? available[0]
      : ng.zone.length === 1
      ? `${flags.region}${ng.zone}`
      : ng.zone;
    if (!available.includes(zone)) {
      throw new UsageError(
        `--nodegroup ${ng.name}: zone ${zone} is not an available zone of ${flags.region}`,
        {
          hint: `available: ${available.join(", ")}`,
        },
      );
    }
    out.set(ng.name, zone);
  }
  return out;
}

/**
 * Renders the cloud-init user-data of a NodeGroup (kind `node`) or of a NAT64 VM (kind `nat`)
 * from the embedded template: the pinned dependency list (name, version, sha256, size, bucket
 * key) and the immutable `user-data.env`. The result must fit EC2's 16 KiB user-data limit and
 * changes whenever a pinned dependency changes (its digest is part of the text).
 */

import { gzipSync } from "node:zlib";
import { dependencyBlobKey } from "../core/bucket/bucket_layout.ts";
import { sha256Hex } from "../core/kit/digest.ts";
import { ValidationError } from "../core/kit/errors.ts";
import { mirroredImageRef, parseUpstreamRef, REGISTRY_HOSTNAME } from "../core/model/image_ref.ts";
import { parseS3ObjectUrl } from "../core/store/object_url.ts";
import {
  checkClusterId,
  checkDnsSubdomain,
  checkNodeGroup,
  checkSha256Hex,
} from "../core/model/names.ts";
import { VERSION } from "../core/kit/version.ts";
import { VMCONFIG_ASSETS } from "./assets.ts";

/** EC2's limit on user-data bytes (before base64). */
export const USER_DATA_LIMIT = 16384;

/** The upstream Pod sandbox image; nodes pull it from `<registry-hostname>/mirror/…`. */
export const DEFAULT_SANDBOX_IMAGE = "registry.k8s.io/pause:3.10";

/** The default NAT64 prefix (RFC 6052 well-known prefix). */
export const DEFAULT_NAT64_PREFIX = "64:ff9b::/96";

/** The VM kinds vmconfig configures. */
export type VmKind = "node" | "nat";

/** Dependencies each kind needs. */
export const REQUIRED_DEPENDENCIES: Readonly<Record<VmKind, readonly string[]>> = {
  node: ["vmconfig", "containerd", "runc", "cni-plugins", "crictl", "kubelet", "coredns"],
  nat: ["vmconfig"],
};

/**
 * The two ways a node gets its agent, exactly one of them: the compiled `podmin-agent`, or the
 * pinned Deno runtime `deno` plus the single-file `podmin-agent-bundle` (install.sh then puts a
 * launcher at /usr/local/bin/podmin-agent, so the unit starts the agent the same way).
 */
export const AGENT_DISTRIBUTIONS: readonly (readonly string[])[] = [
  ["podmin-agent"],
  ["deno", "podmin-agent-bundle"],
];

/**
 * Dependencies each kind may pin. Without a pinned `jool` (a tar.gz with `bin/jool` and
 * `modules/<kernel-release>/{jool_common,jool}.ko` for the AMI's kernel), a NAT VM with NAT64
 * installs Debian's `jool-dkms` and `jool-tools` with apt-get at boot. `fluent-bit` is the
 * vendor's `.deb` (`opt/fluent-bit/bin/fluent-bit`); a node installs `podmin-fluent-bit.service`
 * only with it, and setup refuses `--otel-logs` without it.
 */
export const OPTIONAL_DEPENDENCIES: Readonly<Record<VmKind, readonly string[]>> = {
  node: ["amazon-ssm-agent", "fluent-bit", ...AGENT_DISTRIBUTIONS.flat()],
  nat: ["amazon-ssm-agent", "jool"],
};

/**
 * `NatOptions.nat64.pool4Address` value for VMs whose address is not known when the user-data is
 * rendered (one user-data for every NAT64 instance): at first boot the VM attaches the stable
 * ENI named by its instance tag `podmin:nat64-eni` as device 1 and uses that ENI's private IPv4.
 */
export const POOL4_DETECT = "detect";

/**
 * `NatOptions.nat64.sourceIpv6Cidrs` value `[SOURCES_DETECT]` for a VPC whose IPv6 block is not
 * known when the user-data is rendered (a new VPC gets it during apply): at first boot the VM
 * reads the VPC's IPv6 CIDR blocks from its instance metadata (`vpc-ipv6-cidr-blocks`) and
 * admits exactly those sources to NAT64. It cannot be combined with explicit CIDRs.
 */
export const SOURCES_DETECT = "detect";

/** One pinned dependency file (an entry of dependencies/manifest.json). */
export interface Dependency {
  name: string;
  version: string;
  sha256: string;
  size: number;
  /** `dependencyBlobKey(sha256)`. */
  key: string;
}

/** Settings of the NAT kind (validated as vmconfig validates them on the VM). */
export interface NatOptions {
  /** IPv4 sources allowed to use IPv4 source NAT (comma-joined into NAT_IPV4_SOURCE_CIDRS). */
  ipv4SourceCidrs: string[];
  conntrackMax?: number;
  nat64?: {
    /** IPv6 sources allowed to use NAT64, or `[SOURCES_DETECT]`: see there. */
    sourceIpv6Cidrs: string[];
    /** The Jool pool4 IPv4 address, or `"detect"` (`POOL4_DETECT`): see there. */
    pool4Address: string;
    prefix?: string;
    blockedIpv6Cidrs?: string[];
  };
}

/** What user-data needs to boot one VM kind. */
export interface UserDataOptions {
  kind?: VmKind;
  cluster: string;
  bucket: string;
  region: string;
  /** Required for `node`. */
  nodeGroup?: string;
  architecture: "amd64" | "arm64";
  dependencies: Dependency[];
  /** Default `registry.podmin.internal`. */
  registryHostname?: string;
  /** Upstream reference of the Pod sandbox image, default `registry.k8s.io/pause:3.10`. */
  sandboxImage?: string;
  /** How long bootstrap waits for the Pod ENI's address and prefix (default 300 s). */
  podEniWaitSeconds?: number;
  /** Node: `s3://BUCKET/KEY` the elected agent publishes the workload CA bundle to. */
  workloadCaPublish?: string;
  /** `--otel-logs`: the OTLP/HTTP endpoint and, with `ca=`, the server CA bundle object. */
  otelLogs?: { endpoint: string; ca?: string };
  nat?: NatOptions;
  /** Base URL objects are fetched from (`<base>/<key>`); default the dual-stack S3 endpoint. */
  s3BaseUrl?: string;
  /** Gzip the script (cloud-init inflates gzip user-data itself). Default false. */
  gzip?: boolean;
  /**
   * A preview for `podmin setup --dry-run`: dependencies whose size is not known yet
   * (size 0) are allowed, and the script is marked as not deployable.
   */
  preview?: boolean;
}

/** Rendered user-data. */
export interface UserData {
  /** The user-data bytes to hand to EC2 (UTF-8 script, or its gzip when `gzip` is set). */
  bytes: Uint8Array;
  /** The script text. */
  text: string;
  size: number;
  sha256: string;
}

/** A dependency entry for bytes uploaded to `dependencies/` (key from the bucket layout). */
export function dependency(name: string, version: string, bytes: Uint8Array): Dependency {
  const sha256 = sha256Hex(bytes);
  return { name, version, sha256, size: bytes.length, key: dependencyBlobKey(sha256) };
}

function fail(message: string, hint?: string): never {
  throw new ValidationError(message, { hint });
}

const REGION = /^[a-z]{2}(-[a-z]+)+-[0-9]{1,2}$/;
const BUCKET = /^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/;
const VERSION_RE = /^[A-Za-z0-9][A-Za-z0-9._+~-]{0,63}$/;
const IPV4 =
  /^(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])(\.(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])){3}$/;

function checkIpv4Cidr(v: string): string {
  const [a, len, ...rest] = v.split("/");
  if (rest.length || !IPV4.test(a ?? "") || !/^([0-9]|[12][0-9]|3[0-2])$/.test(len ?? "")) {
    fail(`invalid IPv4 CIDR ${JSON.stringify(v)}`);
  }
  return v;
}

function checkIpv6Cidr(v: string): string {
  // Shape only; the VM checks host bits and containment with the same rules as the CLI docs.
  if (!/^[0-9a-f:.]{2,45}\/([0-9]|[1-9][0-9]|1[01][0-9]|12[0-8])$/.test(v) || !v.includes(":")) {
    fail(`invalid IPv6 CIDR ${JSON.stringify(v)}`);
  }
  return v;
}

/** The node-local reference of the mirrored sandbox image (the path `podmin mirror` writes). */
function sandboxImageRef(upstream: string, registryHostname: string): string {
  let ref;
  try {
    ref = parseUpstreamRef(upstream);
  } catch (err) {
    fail(`invalid sandbox image ${JSON.stringify(upstream)}: ${(err as Error).message}`);
  }
  return mirroredImageRef(ref, registryHostname);
}

/** Every dependency name some VM kind accepts (a catalogue entry with another name is refused). */
export const KNOWN_DEPENDENCIES: ReadonlySet<string> = new Set(
  (["node", "nat"] as const).flatMap((k) => [
    ...REQUIRED_DEPENDENCIES[k],
    ...OPTIONAL_DEPENDENCIES[k],
  ]),
);

/** The entries of `deps` (e.g. one architecture's manifest entries) that `kind` can pin. */
export function dependenciesForKind(kind: VmKind, deps: readonly Dependency[]): Dependency[] {
  const allowed = new Set([...REQUIRED_DEPENDENCIES[kind], ...OPTIONAL_DEPENDENCIES[kind]]);
  return deps.filter((d) => allowed.has(d.name));
}

function checkDependencies(kind: VmKind, deps: Dependency[], preview = false): Dependency[] {
  const allowed = new Set([...REQUIRED_DEPENDENCIES[kind], ...OPTIONAL_DEPENDENCIES[kind]]);
  const seen = new Set<string>();
  for (const d of deps) {
    if (!allowed.has(d.name)) fail(`unknown dependency ${JSON.stringify(d.name)} for kind ${kind}`);
    if (seen.has(d.name)) fail(`duplicate dependency ${d.name}`);
    seen.add(d.name);
    if (!VERSION_RE.test(d.version)) fail(`invalid version of ${d.name}: ${d.version}`);
    checkSha256Hex(d.sha256);
    if (!Number.isSafeInteger(d.size) || d.size < 0 || (d.size === 0 && !preview)) {
      fail(`invalid size of ${d.name}`);
    }
    if (d.key !== dependencyBlobKey(d.sha256)) {
      fail(`dependency ${d.name}: key ${d.key} is not the content address of its sha256`);
    }
  }
  for (const n of REQUIRED_DEPENDENCIES[kind]) {
    if (!seen.has(n)) fail(`missing dependency ${n} for kind ${kind}`);
  }
  if (kind === "node") {
    const complete = AGENT_DISTRIBUTIONS.filter((d) => d.every((n) => seen.has(n)));
    const touched = AGENT_DISTRIBUTIONS.filter((d) => d.some((n) => seen.has(n)));
    if (complete.length !== 1 || touched.length !== 1) {
      fail(
        "a node needs exactly one agent distribution: podmin-agent, or deno and podmin-agent-bundle",
      );
    }
  }
  return [...deps].sort((a, b) => a.name < b.name ? -1 : 1);
}

/** The immutable user-data.env lines (sorted, validated). */
export function userDataEnv(o: UserDataOptions): string[] {
  const kind = o.kind ?? "node";
  if (!REGION.test(o.region)) fail(`invalid region ${JSON.stringify(o.region)}`);
  if (!BUCKET.test(o.bucket) || o.bucket.includes("..")) {
    fail(`invalid bucket name ${JSON.stringify(o.bucket)}`);
  }
  const env: Record<string, string> = {
    PODMIN_KIND: kind,
    PODMIN_CLUSTER: checkClusterId(o.cluster),
    PODMIN_BUCKET: o.bucket,
    PODMIN_REGION: o.region,
    PODMIN_ARCH: o.architecture === "arm64"
      ? "arm64"
      : o.architecture === "amd64"
      ? "amd64"
      : fail(`invalid architecture ${JSON.stringify(o.architecture)}`),
  };
  if (o.nodeGroup !== undefined) env.PODMIN_NODEGROUP = checkNodeGroup(o.nodeGroup);
  if (kind === "node") {
    if (o.nodeGroup === undefined) fail("a node's user-data needs its NodeGroup");
    const host = checkDnsSubdomain("registry hostname", o.registryHostname ?? REGISTRY_HOSTNAME);
    env.REGISTRY_HOSTNAME = host;
    env.SANDBOX_IMAGE = sandboxImageRef(o.sandboxImage ?? DEFAULT_SANDBOX_IMAGE, host);
    if (o.podEniWaitSeconds !== undefined) {
      const s = o.podEniWaitSeconds;
      if (!Number.isInteger(s) || s < 1 || s > 3600) fail("podEniWaitSeconds must be 1-3600");
      env.POD_ENI_WAIT_SECONDS = String(s);
    }
    if (o.workloadCaPublish !== undefined) {
      env.WORKLOAD_CA_PUBLISH = checkS3Object(o.workloadCaPublish, "workload CA publication");
    }
    if (o.otelLogs !== undefined) {
      env.TELEMETRY_OTLP_ENDPOINT = checkOtlpUrl(o.otelLogs.endpoint);
      if (o.otelLogs.ca !== undefined) {
        env.TELEMETRY_OTLP_CA = checkS3Object(o.otelLogs.ca, "OTel CA bundle");
      }
    }
  } else {
    const nat = o.nat ?? fail("a NAT VM's user-data needs its NAT settings");
    if (!nat.ipv4SourceCidrs.length) fail("NAT needs at least one IPv4 source CIDR");
    env.NAT_IPV4_SOURCE_CIDRS = nat.ipv4SourceCidrs.map(checkIpv4Cidr).join(",");
    if (nat.conntrackMax !== undefined) {
      const c = nat.conntrackMax;
      if (!Number.isInteger(c) || c < 1024 || c > 67108864) fail("conntrackMax out of range");
      env.NAT_CONNTRACK_MAX = String(c);
    }
    if (nat.nat64) {
      const n = nat.nat64;
      env.NAT64_ENABLED = "true";
      if (!n.sourceIpv6Cidrs.length) fail("NAT64 needs at least one IPv6 source CIDR");
      if (n.sourceIpv6Cidrs.includes(SOURCES_DETECT)) {
        if (n.sourceIpv6Cidrs.length !== 1) {
          fail(
            `NAT64 sources: "${SOURCES_DETECT}" cannot be combined with explicit CIDRs`,
            `either ["${SOURCES_DETECT}"] (the VPC's IPv6 blocks, read at boot) or IPv6 CIDRs`,
          );
        }
        env.NAT64_SOURCE_IPV6_CIDRS = SOURCES_DETECT;
      } else {
        env.NAT64_SOURCE_IPV6_CIDRS = n.sourceIpv6Cidrs.map(checkIpv6Cidr).join(",");
      }
      if (n.pool4Address !== POOL4_DETECT && !IPV4.test(n.pool4Address)) {
        fail(
          `invalid NAT64 pool4 address ${JSON.stringify(n.pool4Address)}`,
          `an IPv4 address, or "${POOL4_DETECT}" (the stable NAT64 ENI's address, found at boot)`,
        );
      }
      env.NAT64_POOL4_ADDRESS = n.pool4Address;
      const prefix = checkIpv6Cidr(n.prefix ?? DEFAULT_NAT64_PREFIX);
      if (!prefix.endsWith("/96")) fail("the NAT64 prefix must be a /96");
      env.NAT64_PREFIX = prefix;
      if (n.blockedIpv6Cidrs?.length) {
        env.NAT64_BLOCKED_IPV6_CIDRS = n.blockedIpv6Cidrs.map(checkIpv6Cidr).join(",");
      } else if (prefix !== DEFAULT_NAT64_PREFIX) {
        fail("a custom NAT64 prefix requires matching blockedIpv6Cidrs");
      }
    } else {
      env.NAT64_ENABLED = "false";
    }
  }
  return Object.keys(env).sort().map((k) => `${k}=${env[k]}`);
}

/** The default base URL of the cluster bucket: the regional dual-stack S3 endpoint. */
export function defaultS3BaseUrl(bucket: string, region: string): string {
  // Virtual-hosted style, except for bucket names with dots (TLS wildcard certificates).
  return bucket.includes(".")
    ? `https://s3.dualstack.${region}.amazonaws.com/${bucket}`
    : `https://${bucket}.s3.dualstack.${region}.amazonaws.com`;
}

function asset(name: string): string {
  const text = VMCONFIG_ASSETS[name];
  if (text === undefined) throw new Error(`vmconfig asset ${name} is missing`);
  return text;
}

/** Renders the user-data; throws ValidationError on bad options or when it exceeds 16 KiB. */
export function renderUserData(o: UserDataOptions): UserData {
  const kind = o.kind ?? "node";
  if (kind !== "node" && kind !== "nat") fail(`invalid kind ${JSON.stringify(kind)}`);
  const env = userDataEnv(o);
  const deps = checkDependencies(kind, o.dependencies, o.preview);
  const base = o.s3BaseUrl ?? defaultS3BaseUrl(o.bucket, o.region);
  if (!/^https?:\/\/[A-Za-z0-9.:[\]-]+(\/[a-z0-9.-]+)?$/.test(base)) {
    fail(`invalid S3 base URL ${JSON.stringify(base)}`);
  }
  const depLines = deps.map((d) => `${d.name} ${d.version} ${d.sha256} ${d.size} ${d.key}`);
  const pins = sha256Hex(depLines.join("\n")).slice(0, 16);
  const awsLib = asset("lib/aws.sh").replace(/^# shellcheck shell=bash\n/, "");
  const values: Record<string, string> = {
    SUMMARY: `podmin ${VERSION}, kind ${kind}, ${o.architecture}, pins ${pins}`,
    KIND: kind,
    REGION: o.region,
    S3_BASE_URL: base,
    AWS_LIB: awsLib.trimEnd(),
    DEPENDENCIES: depLines.join("\n"),
    USER_DATA_ENV: env.join("\n"),
  };
  const text = asset("user-data.sh.tmpl").replace(/@@([A-Z0-9_]+)@@/g, (_, k: string) => {
    const v = values[k];
    if (v === undefined) throw new Error(`user-data template: unknown placeholder ${k}`);
    return v;
  });
  const marked = o.preview
    ? text.replace(
      /\n/,
      "\n# PREVIEW (podmin setup --dry-run): sizes of 0 are not known yet; not deployable.\n",
    )
    : text;
  const raw = new TextEncoder().encode(marked);
  const bytes = o.gzip ? new Uint8Array(gzipSync(raw, { level: 9 })) : raw;
  if (bytes.length > USER_DATA_LIMIT) {
    fail(
      `user-data is ${bytes.length} bytes, over EC2's ${USER_DATA_LIMIT}-byte limit`,
      o.gzip ? "pin fewer dependencies" : "render with gzip: true (cloud-init inflates gzip)",
    );
  }
  return { bytes, text: marked, size: bytes.length, sha256: sha256Hex(bytes) };
}

/**
 * An exact `s3://BUCKET/KEY` the node's env layer accepts (`is_s3_object` in validate.sh): key
 * segments of [A-Za-z0-9._~+=,@-], none empty, "." or "..", at most 1024 characters.
 */
function checkS3Object(url: string, what: string): string {
  let key = "";
  try {
    key = parseS3ObjectUrl(url).key;
  } catch { /* refused below */ }
  if (!/^[A-Za-z0-9._~+=,@\/-]{1,1024}$/.test(key)) {
    fail(
      `invalid ${what} ${JSON.stringify(url)}: an exact s3://BUCKET/KEY whose key uses only ` +
        "letters, digits and ._~+=,@-/ (it becomes one argument of the node agent)",
    );
  }
  return url;
}

/** The OTLP endpoint as vmconfig's `otlp_url` type accepts it (same rule, checked at setup). */
function checkOtlpUrl(url: string): string {
  const m =
    /^https?:\/\/([A-Za-z0-9.-]{1,253}|\[[0-9A-Fa-f:.]{2,45}\])(:[0-9]{1,5})?(\/[A-Za-z0-9._~\/-]{0,512})?$/
      .exec(url);
  const port = m?.[2] ? Number(m[2].slice(1)) : 443;
  if (!m || port < 1 || port > 65535) {
    fail(
      `--otel-logs endpoint ${JSON.stringify(url)} is not one vmconfig accepts`,
      "use http(s)://HOST[:PORT][/PATH] (letters, digits and . _ ~ / - in the path)",
    );
  }
  return url;
}

/**
 * Inputs of the infrastructure generator (`generateTofu`): what the operator asked for
 * (`ClusterSpec`, built by `podmin setup` from its flags) plus what setup looked up or rendered
 * (`InfraInputs`: the reused VPC, the zones, rendered user-data, AMI ids).
 *
 * `checkInfraInputs` validates everything once, with actionable messages, and returns the
 * inputs with defaults applied; the generator never sees unchecked values.
 */

import { PREFIXES } from "../../core/bucket/bucket_layout.ts";
import { ValidationError } from "../../core/kit/errors.ts";
import { checkClusterId, checkNodeGroup } from "../../core/model/names.ts";
import { type Cidr, parseIpv4Cidr, parseIpv6Cidr } from "./cidr.ts";
import { type Architecture, architectureOf, checkInstanceType } from "./instance_types.ts";

/** Root volume size of a NodeGroup when `disk-size` is not given. */
export const DEFAULT_DISK_SIZE_GIB = 20;
/** Smallest and largest root volume a NodeGroup may ask for (gp3 limits, seed: 8-16384). */
export const MIN_DISK_SIZE_GIB = 8;
/** See MIN_DISK_SIZE_GIB. */
export const MAX_DISK_SIZE_GIB = 16384;
/** Instance type of the shared per-zone NAT64 instances when `--nat64` names none. */
export const DEFAULT_NAT64_INSTANCE_TYPE = "t4g.nano";
/** Largest NodeGroup the generator accepts. */
export const MAX_NODEGROUP_SIZE = 1000;
/** EC2's limit on user-data, counted before base64 encoding. */
export const MAX_USER_DATA_BYTES = 16384;

/** One NodeGroup: a set of identical VMs in one zone, behind one Auto Scaling Group. */
export interface NodeGroupSpec {
  /** NodeGroup name (DNS label). */
  name: string;
  /** Number of VMs (the ASG's min, max and desired capacity). */
  size: number;
  /** Root volume size in GiB (gp3, encrypted); default DEFAULT_DISK_SIZE_GIB. */
  diskSizeGiB?: number;
  /** EC2 instance type. */
  instanceType: string;
  /** CPU architecture; must equal `architectureOf(instanceType)`. */
  architecture: Architecture;
  /** The availability zone, already resolved to its full name (`eu-west-1b`). */
  zone: string;
  /** Instance type of a NAT64 instance dedicated to this NodeGroup (`nat64=TYPE`). */
  nat64?: string;
}

/** An exact S3 object outside Podmin's own layout (`s3://BUCKET/KEY`). */
export interface S3ObjectRef {
  bucket: string;
  key: string;
}

/** What the operator asked `podmin setup` for. */
export interface ClusterSpec {
  /** Cluster id (DNS label); prefixes parameter and secret names, tags every resource. */
  cluster: string;
  /** AWS region, e.g. `eu-west-1`. */
  region: string;
  /** The cluster bucket (control plane and OpenTofu state). */
  bucket: string;
  /** Primary IPv4 CIDR of the VPC to reuse or create (`--vpc-cidr`). */
  vpcCidr: string;
  /** `--nat64`: one shared NAT64 instance per zone (default DEFAULT_NAT64_INSTANCE_TYPE). */
  nat64?: { instanceType?: string };
  /** The NodeGroups, at least one. */
  nodeGroups: NodeGroupSpec[];
  /** `--workload-ca-publish s3://BUCKET/KEY`: the node role may read and write this object. */
  workloadCaPublish?: S3ObjectRef;
  /** `--otel-logs …,ca=s3://BUCKET/KEY`: the node role may read this object. */
  otelLogsCa?: S3ObjectRef;
  /** Customer-managed KMS keys (key ARNs) protecting the cluster's SecureStrings or secrets. */
  kmsKeyArns?: string[];
}

/** A VPC that setup found by its primary IPv4 CIDR and that Podmin reuses (never deletes). */
export interface ExistingVpc {
  /** `vpc-…` */
  id: string;
  /** Its IPv6 block (/56 or shorter); when absent Podmin associates an Amazon-provided /56. */
  ipv6CidrBlock?: string;
  /** Its internet gateway, when it has one (a VPC has at most one); else Podmin creates one. */
  internetGatewayId?: string;
  /**
   * CIDRs (either family) of subnets in this VPC that are not Podmin's own (not tagged with
   * this cluster): the planned subnets must not overlap them.
   */
  foreignSubnetCidrs?: string[];
}

/**
 * Everything the generator needs. AMIs are explicit ids (setup resolves them, e.g. from a
 * public SSM parameter) so that the configuration is reproducible and an AMI change is a
 * visible launch-template change that rolls the VMs like any other.
 */
export interface InfraInputs {
  spec: ClusterSpec;
  /** The VPC to reuse; absent: the configuration creates one. */
  existingVpc?: ExistingVpc;
  /** The zones in use (full names); every NodeGroup's zone must be among them. */
  zones: string[];
  /** Rendered cloud-init user-data per NodeGroup name (plain text, not base64). */
  userData: Record<string, string>;
  /** Rendered user-data of the NAT64 instances; required when any NAT64 instance exists. */
  nat64UserData?: string;
  /** AMI id per architecture; required for every architecture in use. */
  amiIds: Partial<Record<Architecture, string>>;
}

/** A NodeGroup after validation, with defaults applied. */
export interface CheckedNodeGroup extends Required<Omit<NodeGroupSpec, "nat64">> {
  nat64?: string;
}

/** InfraInputs after validation, with defaults applied and CIDRs parsed. */
export interface CheckedInputs {
  spec: Omit<ClusterSpec, "nodeGroups" | "kmsKeyArns"> & {
    nodeGroups: CheckedNodeGroup[];
    kmsKeyArns: string[];
  };
  existingVpc?: ExistingVpc & { foreignSubnetCidrs: string[] };
  vpcCidr: Cidr;
  /** Parsed existing IPv6 block, when known. */
  vpcIpv6?: Cidr;
  zones: string[];
  userData: Record<string, string>;
  nat64UserData?: string;
  amiIds: Partial<Record<Architecture, string>>;
}

const REGION = /^[a-z]{2}(-[a-z]+)+-\d+$/;
const BUCKET = /^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/;
const AMI = /^ami-[0-9a-f]{8}(?:[0-9a-f]{9})?$/;
const VPC_ID = /^vpc-[0-9a-f]{8}(?:[0-9a-f]{9})?$/;
const IGW_ID = /^igw-[0-9a-f]{8}(?:[0-9a-f]{9})?$/;
/** A KMS key named by key ARN (no alias, no wildcard). */
export const KMS_KEY_ARN =
  /^arn:aws[a-z-]*:kms:[a-z]{2}(-[a-z]+)+-\d+:\d{12}:key\/[A-Za-z0-9-]{1,128}$/;

function invalid(message: string, hint?: string): never {
  throw new ValidationError(message, { hint });
}

/** Checks an S3 bucket name (general purpose bucket rules). */
export function checkBucketName(what: string, value: unknown): string {
  if (
    typeof value !== "string" || !BUCKET.test(value) || value.includes("..") ||
    /^\d+\.\d+\.\d+\.\d+$/.test(value) || value.startsWith("xn--")
  ) {
    invalid(
      `invalid ${what} ${JSON.stringify(value)}`,
      "S3 bucket names are 3-63 lower-case letters, digits, '.' and '-'",
    );
  }
  return value;
}

/** Checks a region name. */
export function checkRegion(value: unknown): string {
  if (typeof value !== "string" || !REGION.test(value)) {
    invalid(`invalid region ${JSON.stringify(value)}`, "use an AWS region name such as eu-west-1");
  }
  return value;
}

/**
 * Checks a zone: only the region's standard availability zones (`<region><letter>`) are
 * supported, because subnet addresses are derived from the zone letter.
 */
export function zoneLetter(region: string, zone: unknown): number {
  if (typeof zone !== "string" || zone.length !== region.length + 1 || !zone.startsWith(region)) {
    invalid(
      `invalid zone ${JSON.stringify(zone)} for region ${region}`,
      `use one of the region's availability zones (${region}a, ${region}b, …)`,
    );
  }
  const code = zone.charCodeAt(region.length) - 97;
  if (code < 0 || code > 25) {
    invalid(`invalid zone ${JSON.stringify(zone)}: the zone suffix is one lower-case letter`);
  }
  return code;
}

function hasControlCharacter(text: string): boolean {
  return [...text].some((ch) => ch.charCodeAt(0) < 0x20 || ch.charCodeAt(0) === 0x7f);
}

function checkObjectRef(what: string, ref: S3ObjectRef, clusterBucket: string): S3ObjectRef {
  checkBucketName(`${what} bucket`, ref?.bucket);
  const key = ref.key;
  if (typeof key !== "string" || key.length === 0 || new TextEncoder().encode(key).length > 1024) {
    invalid(`invalid ${what} key ${JSON.stringify(key)}: 1-1024 bytes`);
  }
  if (hasControlCharacter(key) || /[*?$]/.test(key) || key.endsWith("/")) {
    invalid(
      `invalid ${what} key ${JSON.stringify(key)}`,
      "the key names one exact object: no control characters, no '*', '?' or '$' (IAM wildcards), no trailing '/'",
    );
  }
  if (ref.bucket === clusterBucket && Object.values(PREFIXES).some((p) => key.startsWith(p))) {
    invalid(
      `${what} s3://${ref.bucket}/${key} lies inside Podmin's own layout of the cluster bucket`,
      `choose another bucket or a key outside ${Object.values(PREFIXES).join(", ")}`,
    );
  }
  return { bucket: ref.bucket, key };
}

function checkUserData(what: string, value: unknown): string {
  if (typeof value !== "string" || value.length === 0) invalid(`missing ${what}`);
  const bytes = new TextEncoder().encode(value).length;
  if (bytes > MAX_USER_DATA_BYTES) {
    invalid(
      `${what} is ${bytes} bytes; EC2 accepts at most ${MAX_USER_DATA_BYTES}`,
      "compress the user-data (cloud-init accepts gzip) or move content into dependency files",
    );
  }
  return value;
}

function checkNodeGroupSpec(ng: NodeGroupSpec, region: string, zones: string[]): CheckedNodeGroup {
  const name = checkNodeGroup(ng?.name);
  const at = `NodeGroup ${name}`;
  if (!Number.isInteger(ng.size) || ng.size < 0 || ng.size > MAX_NODEGROUP_SIZE) {
    invalid(`${at}: size ${JSON.stringify(ng.size)} is not an integer 0-${MAX_NODEGROUP_SIZE}`);
  }
  const disk = ng.diskSizeGiB ?? DEFAULT_DISK_SIZE_GIB;
  if (!Number.isInteger(disk) || disk < MIN_DISK_SIZE_GIB || disk > MAX_DISK_SIZE_GIB) {
    invalid(
      `${at}: disk size ${JSON.stringify(disk)} GiB is out of range`,
      `disk-size is an integer from ${MIN_DISK_SIZE_GIB} to ${MAX_DISK_SIZE_GIB} GiB`,
    );
  }
  checkInstanceType(ng.instanceType);
  const arch = architectureOf(ng.instanceType);
  if (ng.architecture !== arch) {
    invalid(
      `${at}: architecture ${
        JSON.stringify(ng.architecture)
      } does not match instance type ${ng.instanceType} (${arch})`,
      "derive the architecture with architectureOf(instanceType)",
    );
  }
  zoneLetter(region, ng.zone);
  if (!zones.includes(ng.zone)) {
    invalid(`${at}: zone ${ng.zone} is not among the zones in use (${zones.join(", ")})`);
  }
  if (ng.nat64 !== undefined) checkInstanceType(ng.nat64);
  return {
    name,
    size: ng.size,
    diskSizeGiB: disk,
    instanceType: ng.instanceType,
    architecture: arch,
    zone: ng.zone,
    ...(ng.nat64 !== undefined ? { nat64: ng.nat64 } : {}),
  };
}

function checkExistingVpc(vpc: ExistingVpc): CheckedInputs["existingVpc"] {
  if (typeof vpc.id !== "string" || !VPC_ID.test(vpc.id)) {
    invalid(`invalid VPC id ${JSON.stringify(vpc.id)}`, "expected vpc- followed by hex digits");
  }
  if (vpc.internetGatewayId !== undefined && !IGW_ID.test(String(vpc.internetGatewayId))) {
    invalid(`invalid internet gateway id ${JSON.stringify(vpc.internetGatewayId)}`);
  }
  const foreign = vpc.foreignSubnetCidrs ?? [];
  if (!Array.isArray(foreign)) invalid("existingVpc.foreignSubnetCidrs must be a list of CIDRs");
  return {
    id: vpc.id,
    ...(vpc.ipv6CidrBlock !== undefined ? { ipv6CidrBlock: vpc.ipv6CidrBlock } : {}),
    ...(vpc.internetGatewayId !== undefined ? { internetGatewayId: vpc.internetGatewayId } : {}),
    foreignSubnetCidrs: [...foreign],
  };
}

/** The zones in use: known letters of the region, no duplicates, sorted. */
function checkZones(given: readonly string[] | undefined, region: string): string[] {
  if (!Array.isArray(given) || given.length === 0) {
    invalid("no zones in use", "resolve each NodeGroup's zone and pass the set of zones");
  }
  const zones = [...given];
  for (const z of zones) zoneLetter(region, z);
  if (new Set(zones).size !== zones.length) invalid(`duplicate zones in ${zones.join(", ")}`);
  zones.sort();
  return zones;
}

/** The NodeGroups: each checked, names unique, sorted by name. */
function checkNodeGroups(
  given: ClusterSpec["nodeGroups"] | undefined,
  region: string,
  zones: string[],
): CheckedNodeGroup[] {
  if (!Array.isArray(given) || given.length === 0) {
    invalid("no NodeGroups", "declare at least one --nodegroup");
  }
  const nodeGroups = given.map((ng) => checkNodeGroupSpec(ng, region, zones));
  const names = new Set<string>();
  for (const ng of nodeGroups) {
    if (names.has(ng.name)) invalid(`duplicate NodeGroup ${ng.name}`, "NodeGroup names are unique");
    names.add(ng.name);
  }
  nodeGroups.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  return nodeGroups;
}

/** One AMI id per architecture in use. */
function checkAmiIds(
  given: InfraInputs["amiIds"],
  archs: ReadonlySet<Architecture>,
): Partial<Record<Architecture, string>> {
  const amiIds: Partial<Record<Architecture, string>> = {};
  for (const arch of [...archs].sort()) {
    const id = given?.[arch];
    if (typeof id !== "string" || !AMI.test(id)) {
      invalid(
        `missing or invalid AMI id for ${arch}: ${JSON.stringify(id)}`,
        "resolve the AMI (for example from the distribution's public SSM parameter) before generating",
      );
    }
    amiIds[arch] = id;
  }
  return amiIds;
}

/** KMS key ARNs (not aliases), unique and sorted. */
function checkKmsKeyArns(given: readonly string[] | undefined): string[] {
  const kmsKeyArns = [...new Set(given ?? [])].sort();
  for (const arn of kmsKeyArns) {
    if (typeof arn !== "string" || !KMS_KEY_ARN.test(arn)) {
      invalid(
        `invalid KMS key ARN ${JSON.stringify(arn)}`,
        "name keys by key ARN (arn:aws:kms:REGION:ACCOUNT:key/ID); aliases and wildcards are not accepted",
      );
    }
  }
  return kmsKeyArns;
}

/** A reused VPC's IPv6 block, when it has one: a /56 or larger. */
function checkReusedIpv6(block: string | undefined): Cidr | undefined {
  if (block === undefined) return undefined;
  let vpcIpv6: Cidr | undefined;
  if (block !== undefined) {
    vpcIpv6 = parseIpv6Cidr(block);
    if (vpcIpv6.length > 56) {
      invalid(
        `the VPC's IPv6 block ${block} is smaller than a /56`,
        "Podmin needs a /56 (Amazon-provided) or larger IPv6 block on a reused VPC",
      );
    }
  }
  return vpcIpv6;
}

/**
 * Validates the generator's inputs and applies defaults. Throws a ValidationError naming the
 * first problem and what to do about it.
 */
export function checkInfraInputs(inputs: InfraInputs): CheckedInputs {
  const spec = inputs?.spec;
  if (!spec || typeof spec !== "object") invalid("missing cluster spec");
  const cluster = checkClusterId(spec.cluster);
  const region = checkRegion(spec.region);
  const bucket = checkBucketName("cluster bucket", spec.bucket);

  const vpcCidr = parseIpv4Cidr(spec.vpcCidr);
  if (vpcCidr.length < 16 || vpcCidr.length > 24) {
    invalid(
      `VPC CIDR ${spec.vpcCidr} has length /${vpcCidr.length}`,
      "use a VPC CIDR from /16 to /24 (AWS allows /16-/28; Podmin needs room for NAT64 subnets)",
    );
  }

  const zones = checkZones(inputs.zones, region);

  const nodeGroups = checkNodeGroups(spec.nodeGroups, region, zones);
  const names = new Set(nodeGroups.map((ng) => ng.name));

  let nat64: ClusterSpec["nat64"];
  if (spec.nat64 !== undefined) {
    nat64 = {
      instanceType: checkInstanceType(spec.nat64.instanceType ?? DEFAULT_NAT64_INSTANCE_TYPE),
    };
  }

  const userData: Record<string, string> = {};
  for (const ng of nodeGroups) {
    userData[ng.name] = checkUserData(
      `user-data of NodeGroup ${ng.name}`,
      inputs.userData?.[ng.name],
    );
  }
  for (const name of Object.keys(inputs.userData ?? {})) {
    if (!names.has(name)) invalid(`user-data given for unknown NodeGroup ${JSON.stringify(name)}`);
  }
  const needsNat = nat64 !== undefined || nodeGroups.some((ng) => ng.nat64 !== undefined);
  const nat64UserData = needsNat
    ? checkUserData("NAT64 user-data", inputs.nat64UserData)
    : undefined;

  const archs = new Set<Architecture>(nodeGroups.map((ng) => ng.architecture));
  if (nat64) archs.add(architectureOf(nat64.instanceType!));
  for (const ng of nodeGroups) if (ng.nat64) archs.add(architectureOf(ng.nat64));
  const amiIds = checkAmiIds(inputs.amiIds, archs);

  const workloadCaPublish = spec.workloadCaPublish &&
    checkObjectRef("--workload-ca-publish object", spec.workloadCaPublish, bucket);
  const otelLogsCa = spec.otelLogsCa &&
    checkObjectRef("--otel-logs ca object", spec.otelLogsCa, bucket);
  const kmsKeyArns = checkKmsKeyArns(spec.kmsKeyArns);

  const existingVpc = inputs.existingVpc && checkExistingVpc(inputs.existingVpc);
  const vpcIpv6 = existingVpc && checkReusedIpv6(existingVpc.ipv6CidrBlock);

  return {
    spec: {
      cluster,
      region,
      bucket,
      vpcCidr: spec.vpcCidr,
      ...(nat64 ? { nat64 } : {}),
      nodeGroups,
      ...(workloadCaPublish ? { workloadCaPublish } : {}),
      ...(otelLogsCa ? { otelLogsCa } : {}),
      kmsKeyArns,
    },
    ...(existingVpc ? { existingVpc } : {}),
    vpcCidr,
    ...(vpcIpv6 ? { vpcIpv6 } : {}),
    zones,
    userData,
    ...(nat64UserData !== undefined ? { nat64UserData } : {}),
    amiIds,
  };
}

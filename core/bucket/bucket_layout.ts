/**
 * The bucket layout: every object key Podmin reads or writes is built here and
 * nowhere else. Each builder validates its inputs, so a key can never escape
 * its prefix (no `..`, no empty segments, no absolute paths).
 *
 * See docs/spec.md, "Bucket layout", for who writes each prefix.
 */

import { ValidationError } from "../kit/errors.ts";
import {
  checkMirrorHost,
  checkNamespace,
  checkNodeGroup,
  checkNodeId,
  checkObjectName,
  checkRepository,
  checkSha256Hex,
  checkTag,
} from "../model/names.ts";

/** Top-level prefixes and who may write them. */
export const PREFIXES = {
  dependencies: "dependencies/",
  apps: "apps/",
  mirror: "mirror/",
  deployments: "deployments/",
  services: "services/",
  nodegroups: "nodegroups/",
  dns: "dns/",
  identity: "identity/",
  infra: "infra/",
} as const;

/** Prefixes an agent's IAM role may read. */
export const AGENT_READ_PREFIXES = [
  PREFIXES.dependencies,
  PREFIXES.apps,
  PREFIXES.mirror,
  PREFIXES.deployments,
  PREFIXES.nodegroups,
  PREFIXES.services,
  PREFIXES.dns,
  PREFIXES.identity,
] as const;

/**
 * Prefixes an agent's IAM role may write and delete under. Under `identity/` it writes only the
 * exact objects of `IDENTITY_WRITES` (and the exact CA publication object outside the bucket).
 */
export const AGENT_WRITE_PREFIXES = [PREFIXES.dns] as const;

// --- dependencies/ -----------------------------------------------------------

/** The published dependency manifest; written last, by conditional write. */
export const DEPENDENCY_MANIFEST = "dependencies/manifest.json";

/** A content-addressed dependency file. */
export function dependencyBlobKey(sha256: string): string {
  return `dependencies/blobs/sha256/${checkSha256Hex(sha256)}`;
}

// --- deployments/ and services/ ----------------------------------------------

/** The cluster-wide deployment index the agents poll. */
export const DEPLOYMENT_INDEX = "deployments/index.json";

/** The prefix of every Deployment spec object (`deploymentSpecKey`). */
export const DEPLOYMENT_SPEC_PREFIX = "deployments/specs/sha256/";

/** An immutable, content-addressed Deployment spec. */
export function deploymentSpecKey(sha256: string): string {
  return `${DEPLOYMENT_SPEC_PREFIX}${checkSha256Hex(sha256)}.json`;
}

/**
 * A Deployment's revision history: the specs it was applied with, newest last, bounded
 * (`core/bucket/deployment_history.ts`). Written by the CLI after the index.
 */
export function deploymentHistoryKey(namespace: string, name: string): string {
  return `deployments/history/${checkNamespace(namespace)}/${
    checkObjectName("Deployment", name)
  }.json`;
}

/** The cluster-wide Service index (selectors, ports, VIPs). */
export const SERVICE_INDEX = "services/index.json";

/** An immutable, content-addressed Service spec. */
export function serviceSpecKey(sha256: string): string {
  return `services/specs/sha256/${checkSha256Hex(sha256)}.json`;
}

// --- dns/ and identity/ (agent-written) ----------------------------------------

/** A node's record (addresses, gRPC endpoint) written by its agent. */
export function dnsNodeKey(nodeGroup: string, nodeId: string): string {
  return `dns/nodes/${checkNodeGroup(nodeGroup)}/${checkNodeId(nodeId)}.json`;
}

/**
 * A Deployment's rollout state: the cluster-wide budget's admissions, pause and halt
 * (`core/bucket/rollout_state.ts`, spec §5.5). Under `dns/`, the node role's one writable prefix:
 * agents admit themselves here by conditional writes; the CLI pauses and resumes.
 */
export function deploymentRolloutKey(namespace: string, name: string): string {
  return `dns/rollouts/${checkNamespace(namespace)}/${checkObjectName("Deployment", name)}.json`;
}

/** Prefix of all node records. */
export const DNS_NODES_PREFIX = "dns/nodes/";

/** The endpoint mesh's coordinator lease (spec §7.9). */
export const MESH_COORDINATOR_LEASE = "dns/coordinator-lease.json";

/** Where the mesh coordinator listens (written by the lease holder). */
export const MESH_COORDINATOR = "dns/coordinator.json";

/** Public workload CA state (trust bundle and rotation state) maintained by the elected agent. */
export const WORKLOAD_CA_STATE = "identity/workload-ca.json";

/** The lease that elects the agent maintaining `WORKLOAD_CA_STATE` (`core/bucket/bucket_lease.ts`). */
export const WORKLOAD_CA_LEASE = "identity/ca-leader.json";

/**
 * The public key of the deployments index's signatures (`core/bucket/index_signing.ts`): written
 * by the CLI, read by agents to verify an index rebuilt from a mesh peer's change.
 */
export const INDEX_SIGNING_PUBLIC_KEY = "identity/index-signing-key.json";

/** The exact objects under `identity/` agents write (the node role's only writes there). */
export const IDENTITY_WRITES = [WORKLOAD_CA_STATE, WORKLOAD_CA_LEASE] as const;

// --- infra/ (CLI only) --------------------------------------------------------

/** The generated OpenTofu/Terraform configuration, saved before apply. */
export const INFRA_CONFIG = "infra/config/main.tf.json";

/** The OpenTofu/Terraform state object (S3 backend key). */
export const INFRA_STATE = "infra/terraform.tfstate";

/**
 * The private key that signs the deployments index (PKCS#8 PEM, `core/bucket/index_signing.ts`):
 * under `infra/`, which the node role cannot read.
 */
export const INDEX_SIGNING_KEY = "infra/index-signing-key.pem";

// --- apps/ and mirror/ (the image store) ---------------------------------------

/** A repository of the image store: `apps/<name>` or `mirror/<host>/<name>`. */
export interface ImageRepository {
  /** The image store root: "apps" or "mirror". */
  root: "apps" | "mirror";
  /** For mirror/: the original registry host, a port written as `_PORT` (`mirrorHostComponent`). */
  registry?: string;
  /** The repository path inside the root (and registry). */
  name: string;
}

/** Parses a repository path as seen by the registry (`apps/x/y`, `mirror/host/x`). */
export function parseImageRepository(path: string): ImageRepository {
  const [root, ...rest] = path.split("/");
  if (root === "apps" && rest.length >= 1) {
    return { root, name: checkRepository(rest.join("/")) };
  }
  if (root === "mirror" && rest.length >= 2) {
    return {
      root,
      registry: checkMirrorHost(rest[0]),
      name: checkRepository(rest.slice(1).join("/")),
    };
  }
  throw new ValidationError(
    `invalid image repository ${JSON.stringify(path)}: expected apps/NAME or mirror/REGISTRY/NAME`,
  );
}

function repositoryPrefix(repo: ImageRepository): string {
  if (repo.root === "apps") return `apps/${checkRepository(repo.name)}`;
  return `mirror/${checkMirrorHost(repo.registry)}/${checkRepository(repo.name)}`;
}

/** A content-addressed blob (layer or config), shared by all repositories of one root. */
export function imageBlobKey(root: "apps" | "mirror", sha256: string): string {
  return `${root}/_blobs/sha256/${checkSha256Hex(sha256)}`;
}

/** A manifest or index of one repository, by digest (immutable). */
export function imageManifestKey(repo: ImageRepository, sha256: string): string {
  return `${repositoryPrefix(repo)}/_manifests/sha256/${checkSha256Hex(sha256)}`;
}

/** A tag: holds the tagged manifest's bytes (content type = media type), so one GET resolves it. */
export function imageTagKey(repo: ImageRepository, tag: string): string {
  return `${repositoryPrefix(repo)}/_tags/${checkTag(tag)}`;
}

/**
 * The repository (`apps/NAME`, `mirror/REGISTRY/NAME`) and tag a tag key names; undefined for a
 * key that is not exactly one `imageTagKey` builds.
 */
export function parseImageTagKey(key: string): { repository: string; tag: string } | undefined {
  const i = key.lastIndexOf("/_tags/");
  if (i < 0) return undefined;
  const repository = key.slice(0, i);
  const tag = key.slice(i + "/_tags/".length);
  try {
    if (imageTagKey(parseImageRepository(repository), tag) !== key) return undefined;
  } catch {
    return undefined; // not a key Podmin writes
  }
  return { repository, tag };
}

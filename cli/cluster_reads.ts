/**
 * What the CLI reads back from the bucket to show the cluster: the indexes with their specs, the
 * Podmin image references of a Deployment and whether the image store holds them, the tags of
 * the image store. Bucket objects are untrusted: keys are re-derived through core/bucket/bucket_layout.ts
 * and specs verified by core/bucket/spec_objects.ts.
 */

import {
  DNS_NODES_PREFIX,
  imageManifestKey,
  type ImageRepository,
  imageTagKey,
  parseImageRepository,
  parseImageTagKey,
  PREFIXES,
} from "../core/bucket/bucket_layout.ts";
import { bucketUrl, type CommandContext } from "../core/kit/cli_kit.ts";
import { parseStoreUrl, storeAt } from "../core/store/bucket_url.ts";
import { readDeploymentIndex } from "../core/bucket/deployment_index.ts";
import { isDigest, sha256Hex } from "../core/kit/digest.ts";
import { NotFoundError, UsageError } from "../core/kit/errors.ts";
import { REGISTRY_HOSTNAME } from "../core/model/image_ref.ts";
import {
  type Deployment,
  type Resource,
  selectorMatches,
  type Service,
} from "../core/model/resources.ts";
import { readServiceIndex } from "../core/bucket/service_index.ts";
import { readSpec } from "../core/bucket/spec_objects.ts";
import { getIfExists, type ObjectStore } from "../core/store/object_store.ts";
import {
  isStale,
  NODE_RECORD_MAX_BYTES,
  type NodeRecord,
  parseNodeRecord,
} from "../core/bucket/node_record.ts";

/** The resource kinds the CLI names. */
export type Kind = "Deployment" | "Service";

/** Kind names and aliases as operators type them (kubectl's). */
export const KIND_WORDS: Record<Kind, string[]> = {
  Deployment: ["deployments", "deployment", "deploy"],
  Service: ["services", "service", "svc"],
};

/**
 * The store named by --bucket / $PODMIN_BUCKET, in --region. The S3 client is imported for an s3://
 * bucket only: a command on a filesystem bucket never loads it.
 */
export async function storeOf(ctx: CommandContext): Promise<ObjectStore> {
  const region = typeof ctx.values.region === "string" ? ctx.values.region : undefined;
  const at = parseStoreUrl(bucketUrl(ctx));
  const s3Store = at.scheme === "s3"
    ? (await import("../core/store/s3_store.ts")).S3Store
    : undefined;
  return storeAt(at, { region, s3Store });
}

/** Parses a kind word (`deployments`, `svc`, …); a usage error names the accepted ones. */
export function kindOf(arg: string | undefined, command: string): Kind {
  if (arg === undefined || arg === "") {
    throw new UsageError(`${command} needs a resource kind`, {
      hint: `for example: podmin ${command} deployments, or podmin ${command} services`,
    });
  }
  const k = arg.toLowerCase();
  if (["nodes", "node", "no"].includes(k)) {
    throw new UsageError(`podmin ${command} does not take nodes`, {
      hint: "list them with 'podmin get nodes'",
    });
  }
  for (const [kind, words] of Object.entries(KIND_WORDS)) {
    if (words.includes(k)) return kind as Kind;
  }
  throw new UsageError(`unknown resource kind ${JSON.stringify(arg)}`, {
    hint: "use deployments (deployment, deploy) or services (service, svc)",
  });
}

/** One stored object with its spec. */
export interface StoredObject<R extends Resource = Resource> {
  kind: Kind;
  namespace: string;
  name: string;
  /** The spec reference `sha256:<hex>`. */
  ref: string;
  /** Deployments: the NodeGroup. */
  nodeGroup?: string;
  /** Services: the VIP. */
  vip?: string;
  spec: R;
}

/** Spec reads in flight at once (on S3 a listing then takes one round trip per 8 specs, not 1). */
const SPECS_IN_FLIGHT = 8;

/**
 * `f` over `items` with at most `limit` calls pending; results in the items' order. The first
 * failure is thrown, and no call starts after it.
 */
async function mapBounded<T, R>(items: T[], limit: number, f: (x: T) => Promise<R>): Promise<R[]> {
  const out: R[] = new Array(items.length);
  let next = 0;
  let failed = false;
  const worker = async () => {
    while (next < items.length && !failed) {
      const i = next++;
      try {
        out[i] = await f(items[i]);
      } catch (err) {
        failed = true;
        throw err;
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  return out;
}

/** Every object of one kind (specs read and verified), optionally in one namespace. */
export async function readObjects(
  store: ObjectStore,
  kind: Kind,
  namespace?: string,
): Promise<StoredObject[]> {
  const inNamespace = (e: { namespace: string }) =>
    namespace === undefined || e.namespace === namespace;
  const out: StoredObject[] = kind === "Deployment"
    ? await mapBounded(
      (await readDeploymentIndex(store)).deployments.filter(inNamespace),
      SPECS_IN_FLIGHT,
      async (e) => ({
        kind,
        ...e,
        ref: e.spec,
        spec: await readSpec(store, { kind, ref: e.spec }),
      }),
    )
    : await mapBounded(
      ((await readServiceIndex(store))?.services ?? []).filter(inNamespace),
      SPECS_IN_FLIGHT,
      async (e) => ({
        kind,
        namespace: e.namespace,
        name: e.name,
        ref: e.spec,
        vip: e.vip,
        spec: await readSpec(store, { kind, ref: e.spec }),
      }),
    );
  const order = (o: StoredObject) => `${o.namespace}\u0000${o.name}`;
  return out.sort((a, b) => (order(a) < order(b) ? -1 : order(a) > order(b) ? 1 : 0));
}

/** One object by namespace and name; a NotFoundError says how to list them. */
export async function readObject(
  store: ObjectStore,
  o: { kind: Kind; namespace: string; name: string },
): Promise<StoredObject> {
  const found = (await readObjects(store, o.kind, o.namespace)).find((x) => x.name === o.name);
  if (!found) {
    throw new NotFoundError(`${o.kind.toLowerCase()} ${o.namespace}/${o.name} not found`, {
      hint: `list them with 'podmin get ${o.kind.toLowerCase()}s -n ${o.namespace}'`,
    });
  }
  return found;
}

/** A container image of a Deployment and its field path. */
export interface ImageUse {
  field: string;
  image: string;
}

/** Every image a Deployment's Pod runs (init containers first), with its field path. */
export function imagesOf(d: Deployment): ImageUse[] {
  const spec = d.spec.template.spec;
  return [
    ...(spec.initContainers ?? []).map((c, i) => ({
      field: `spec.template.spec.initContainers[${i}].image`,
      image: c.image ?? "",
    })),
    ...spec.containers.map((c, i) => ({
      field: `spec.template.spec.containers[${i}].image`,
      image: c.image ?? "",
    })),
  ];
}

/** A reference into the image store: its repository and a tag or a digest. */
export interface StoreImage {
  /** `apps/NAME` or `mirror/REGISTRY/NAME`. */
  path: string;
  repo: ImageRepository;
  tag?: string;
  /** Hex of a digest reference. */
  digest?: string;
}

/** The store image a Pod reference names, or undefined when it is not a Podmin image. */
export function storeImageOf(image: string): StoreImage | undefined {
  const prefix = `${REGISTRY_HOSTNAME}/`;
  if (!image.startsWith(prefix)) return undefined;
  let rest = image.slice(prefix.length);
  let digest: string | undefined;
  const at = rest.indexOf("@");
  if (at >= 0) {
    const d = rest.slice(at + 1);
    if (!isDigest(d)) return undefined;
    digest = d.slice("sha256:".length);
    rest = rest.slice(0, at);
  }
  const colon = rest.lastIndexOf(":");
  const tag = colon > rest.lastIndexOf("/") ? rest.slice(colon + 1) : undefined;
  const path = tag === undefined ? rest : rest.slice(0, colon);
  try {
    const repo = parseImageRepository(path);
    return { path, repo, tag: digest ? undefined : tag ?? "latest", digest };
  } catch {
    return undefined;
  }
}

/** True when the store holds the tag or manifest the reference names. */
export async function storeHolds(store: ObjectStore, image: StoreImage): Promise<boolean> {
  const key = image.digest
    ? imageManifestKey(image.repo, image.digest)
    : imageTagKey(image.repo, image.tag!);
  try {
    await store.head(key);
    return true;
  } catch (err) {
    if (err instanceof NotFoundError) return false;
    throw err;
  }
}

/** A Podmin image a Deployment references that the store lacks. */
export interface MissingImage extends ImageUse {
  namespace: string;
  name: string;
  path: string;
  tag?: string;
}

/** The Podmin images these Deployments reference that the store does not hold. */
export async function missingImages(
  store: ObjectStore,
  deployments: Deployment[],
): Promise<MissingImage[]> {
  const out: MissingImage[] = [];
  const known = new Map<string, boolean>();
  for (const d of deployments) {
    for (const use of imagesOf(d)) {
      const ref = storeImageOf(use.image);
      if (!ref) continue;
      let held = known.get(use.image);
      if (held === undefined) known.set(use.image, held = await storeHolds(store, ref));
      if (!held) {
        out.push({
          ...use,
          namespace: d.metadata.namespace,
          name: d.metadata.name,
          path: ref.path,
          tag: ref.tag,
        });
      }
    }
  }
  return out;
}

/** One tag of the image store. */
export interface StoredTag {
  /** `apps/NAME` or `mirror/REGISTRY/NAME`. */
  repository: string;
  tag: string;
  /** `sha256:<hex>` of the tagged manifest. */
  digest: string;
}

/** Every tag of the image store, sorted; keys that do not re-derive exactly are ignored. */
export async function listTags(store: ObjectStore): Promise<StoredTag[]> {
  const out: StoredTag[] = [];
  for (const root of [PREFIXES.apps, PREFIXES.mirror]) {
    for await (const o of store.list(root)) {
      const parsed = parseImageTagKey(o.key);
      if (!parsed) continue; // not a tag key Podmin writes
      const { repository, tag } = parsed;
      const got = await store.get(o.key);
      if (got.notModified) continue;
      out.push({ repository, tag, digest: `sha256:${sha256Hex(got.body)}` });
    }
  }
  return out.sort((a, b) =>
    a.repository < b.repository ? -1 : a.repository > b.repository ? 1 : a.tag < b.tag ? -1 : 1
  );
}

/** The node records under `dns/nodes/`, each validated; unreadable ones are named, not fatal. */
export async function readNodeRecords(
  store: ObjectStore,
): Promise<{ records: NodeRecord[]; problems: string[] }> {
  const records: NodeRecord[] = [];
  const problems: string[] = [];
  for await (const info of store.list(DNS_NODES_PREFIX)) {
    try {
      const got = await getIfExists(store, info.key, { maxBytes: NODE_RECORD_MAX_BYTES });
      if (got) records.push(parseNodeRecord(got.body, info.key));
    } catch (err) {
      problems.push(`${info.key}: ${(err as Error).message}`);
    }
  }
  records.sort((a, b) =>
    a.nodeGroup < b.nodeGroup ? -1 : a.nodeGroup > b.nodeGroup ? 1 : a.nodeId < b.nodeId ? -1 : 1
  );
  return { records, problems };
}

/** A one-line summary of the node records for `status` and `describe`. */
export function nodesSummary(records: NodeRecord[], now = Date.now()): string {
  if (!records.length) return NO_NODE_RECORDS;
  const stale = records.filter((r) => isStale(r, now)).length;
  const live = records.length - stale;
  const converged = records.filter((r) => !isStale(r, now) && r.converged).length;
  return `${live} reporting (${converged} converged)${stale ? `, ${stale} stale` : ""}`;
}

/** What `status` and `describe` print while `dns/nodes/` is empty. */
export const NO_NODE_RECORDS = "no node records (no agent has reported to dns/nodes/)";

/** True when a Service's selector selects the Deployment's Pods. */
export function selects(service: Service, d: Deployment): boolean {
  return selectorMatches(service.spec.selector, d.spec.template.metadata?.labels ?? {});
}

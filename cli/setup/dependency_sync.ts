/**
 * Publishing node dependencies: compare the wanted set with the published
 * `dependencies/manifest.json`, fetch (cache) and upload only the files it
 * lacks, then write the complete manifest LAST with a conditional write. A
 * killed setup leaves the previous manifest (and so every running node's view)
 * intact; two racing setups never produce a mixed manifest: the loser fails.
 */

import { DEPENDENCY_MANIFEST, dependencyBlobKey } from "../../core/bucket/bucket_layout.ts";
import {
  type Architecture,
  type DependencyEntry,
  type DependencyManifest,
  emptyDependencyManifest,
  parseDependencyManifest,
  sameDependencies,
  serializeDependencyManifest,
} from "../../core/bucket/dependency_manifest.ts";
import { sha256Hex } from "../../core/kit/digest.ts";
import { NotFoundError, PodminError, PreconditionFailedError } from "../../core/kit/errors.ts";
import { getIfExists, type ObjectStore } from "../../core/store/object_store.ts";
import { progress } from "../../core/kit/progress.ts";
import type { CatalogSpec } from "./dependency_catalog.ts";
import type { DependencyCache } from "./dependency_cache.ts";
import { fetchVendorChecksum } from "./vendor_checksum.ts";

/** A file Podmin produces itself (agent binary, vmconfig archive). */
export interface LocalDependency {
  name: string;
  version: string;
  arch: Architecture;
  bytes: Uint8Array;
}

/** One wanted file and what setup does with it. */
export interface PlannedDependency {
  name: string;
  version: string;
  arch: Architecture;
  sha256: string;
  /** The vendor's checksum file the digest was taken from (see CatalogEntry.sha256Url). */
  sha256Url?: string;
  size?: number;
  source: string;
  /** The archive that holds the file (see CatalogEntry.archive). */
  archive?: { integrity: string; member: string };
  /** `published`: the manifest already lists this digest; `upload`: it must be stored. */
  action: "published" | "upload";
}

/** The wanted set against the published manifest. */
export interface DependencyPlan {
  items: PlannedDependency[];
  current: DependencyManifest;
  /** ETag of the published manifest; undefined when absent (or not read: dry run). */
  etag?: string;
}

/** The `source` of a dependency setup builds itself (vmconfig, the agent). */
export const LOCAL_SOURCE = "built by podmin";

/** One wanted file whose digest is known. */
export type ResolvedDependency = Omit<PlannedDependency, "action">;

/** One wanted file; `sha256` is absent until `resolveWanted` read it from `sha256Url`. */
export type WantedDependency = Omit<ResolvedDependency, "sha256"> & { sha256?: string };

/**
 * Builds the wanted set for the architectures in use: the catalogue's pins and the local builds.
 */
export function wantedDependencies(options: {
  catalog: CatalogSpec;
  local: LocalDependency[];
  architectures: Architecture[];
}): WantedDependency[] {
  const wanted: WantedDependency[] = [];
  for (const arch of options.architectures) {
    for (const e of options.catalog.dependencies.filter((d) => d.arch === arch)) {
      wanted.push({
        name: e.name,
        version: e.version,
        arch,
        ...(e.sha256 !== undefined ? { sha256: e.sha256 } : {}),
        ...(e.sha256Url !== undefined ? { sha256Url: e.sha256Url } : {}),
        size: e.size,
        source: e.url,
        ...(e.archive ? { archive: e.archive } : {}),
      });
    }
    for (const l of options.local.filter((d) => d.arch === arch)) {
      wanted.push({
        name: l.name,
        version: l.version,
        arch,
        sha256: sha256Hex(l.bytes),
        size: l.bytes.byteLength,
        source: LOCAL_SOURCE,
      });
    }
  }
  return wanted;
}

/**
 * The wanted set with every digest known. A file pinned by `sha256Url` takes the digest the
 * published manifest records for the same name and version on that architecture (set by an earlier
 * setup, so the vendor is not asked again and every node keeps verifying the same value); else it
 * is read from the vendor's checksum file, and setup records it when it publishes.
 */
export async function resolveWanted(
  wanted: WantedDependency[],
  o: { current: DependencyManifest; fetch?: typeof fetch; log?: (line: string) => void },
): Promise<ResolvedDependency[]> {
  const out: ResolvedDependency[] = [];
  for (const w of wanted) {
    if (w.sha256 !== undefined) {
      out.push({ ...w, sha256: w.sha256 });
      continue;
    }
    const label = `${w.name} ${w.version} ${w.arch}`;
    const recorded = o.current.architectures[w.arch]?.find((e) =>
      e.name === w.name && e.version === w.version
    );
    if (recorded) {
      o.log?.(`${label}: sha256 ${recorded.sha256} as recorded in ${DEPENDENCY_MANIFEST}`);
      out.push({ ...w, sha256: recorded.sha256 });
      continue;
    }
    const sha256 = await fetchVendorChecksum({
      checksumUrl: w.sha256Url!,
      artifactUrl: w.source,
      label,
      fetch: o.fetch,
    });
    o.log?.(`${label}: sha256 ${sha256} from ${w.sha256Url}`);
    out.push({ ...w, sha256 });
  }
  return out;
}

/** Compares the wanted set with a manifest. */
export function planAgainst(
  wanted: ResolvedDependency[],
  { current, etag }: { current: DependencyManifest; etag?: string },
): DependencyPlan {
  const items = wanted.map((w) => {
    const published = current.architectures[w.arch]?.find((e) => e.name === w.name);
    const same = published?.sha256 === w.sha256;
    return {
      ...w,
      size: same ? published!.size : w.size,
      action: same ? "published" as const : "upload" as const,
    };
  });
  return { items, current, etag };
}

/** Reads the published manifest, resolves the wanted digests against it and plans. */
export async function planDependencies(
  store: ObjectStore,
  wanted: WantedDependency[],
  o: { fetch?: typeof fetch; log?: (line: string) => void } = {},
): Promise<DependencyPlan> {
  const got = await getIfExists(store, DEPENDENCY_MANIFEST);
  const current = got ? parseDependencyManifest(got.body) : emptyDependencyManifest();
  const resolved = await resolveWanted(wanted, { ...o, current });
  return planAgainst(resolved, { current, etag: got?.info.etag });
}

/** What publishing did. */
export interface PublishResult {
  manifest: DependencyManifest;
  uploadedFiles: number;
  uploadedBytes: number;
  cacheReused: number;
  cacheDownloaded: number;
  manifestWritten: boolean;
}

/** Options of `publishDependencies`. */
export interface PublishOptions {
  store: ObjectStore;
  cache: DependencyCache;
  plan: DependencyPlan;
  local: LocalDependency[];
  log?: (line: string) => void;
}

/**
 * Puts one planned file in the cache (from a local build or its source URL) and uploads it unless
 * the bucket already holds it with that size. Counts into `result`; returns the file's size.
 */
async function uploadDependency(options: {
  store: ObjectStore;
  cache: DependencyCache;
  local: LocalDependency[];
  item: PlannedDependency;
  log: (line: string) => void;
  result: PublishResult;
}): Promise<number | undefined> {
  const { store, cache, item, log, result } = options;
  let size = item.size;
  const label = `${item.name} ${item.version} ${item.arch}`;
  let file: string;
  const local = options.local.find((l) => l.name === item.name && l.arch === item.arch);
  if (local) {
    file = await cache.put(local.bytes, item.sha256);
    size = local.bytes.byteLength;
  } else {
    const got = item.archive
      ? await cache.ensureMember({
        sha256: item.sha256,
        url: item.source,
        integrity: item.archive.integrity,
        member: item.archive.member,
        label,
      })
      : await cache.ensure({
        sha256: item.sha256,
        sha256Url: item.sha256Url,
        url: item.source,
        size: item.size,
        label,
      });
    file = got.path;
    size = got.size;
    if (got.outcome === "reused") result.cacheReused++;
    else result.cacheDownloaded++;
  }
  const key = dependencyBlobKey(item.sha256);
  let stored = false;
  try {
    stored = (await store.head(key)).size === size;
  } catch (err) {
    if (!(err instanceof NotFoundError)) throw err;
  }
  if (!stored) {
    const bar = progress(`upload ${label}`, size, { write: log });
    await store.putStream(key, (await Deno.open(file)).readable, {
      sha256: item.sha256,
      size,
      contentType: "application/octet-stream",
      onProgress: (n) => bar.update(n),
    });
    bar.done();
    result.uploadedFiles++;
    result.uploadedBytes += size!;
  }
  return size;
}

/** Fetches, uploads and finally publishes the manifest (conditional write). */
export async function publishDependencies(options: PublishOptions): Promise<PublishResult> {
  const { store, plan } = options;
  const log = options.log ?? (() => {});
  const result: PublishResult = {
    manifest: plan.current,
    uploadedFiles: 0,
    uploadedBytes: 0,
    cacheReused: 0,
    cacheDownloaded: 0,
    manifestWritten: false,
  };
  const entries = new Map<Architecture, DependencyEntry[]>();
  for (const item of plan.items) {
    const size = item.action === "upload"
      ? await uploadDependency({ ...options, item, log, result })
      : item.size;
    const list = entries.get(item.arch) ?? [];
    list.push({
      name: item.name,
      version: item.version,
      sha256: item.sha256,
      size: size!,
      key: dependencyBlobKey(item.sha256),
    });
    entries.set(item.arch, list);
  }
  const next: DependencyManifest = {
    ...plan.current,
    generation: plan.current.generation + 1,
    architectures: Object.fromEntries(entries),
  };
  if (sameDependencies(next, plan.current)) return result;
  try {
    await store.put(
      DEPENDENCY_MANIFEST,
      serializeDependencyManifest(next),
      plan.etag
        ? { ifMatch: plan.etag, contentType: "application/json" }
        : { ifNoneMatch: "*", contentType: "application/json" },
    );
  } catch (err) {
    if (err instanceof PreconditionFailedError) {
      throw new PodminError(
        `${DEPENDENCY_MANIFEST} changed while this setup ran (another setup?)`,
        {
          hint: "nothing was published by this run; run setup again once the other one finished",
          cause: err,
        },
      );
    }
    throw err;
  }
  result.manifest = next;
  result.manifestWritten = true;
  return result;
}

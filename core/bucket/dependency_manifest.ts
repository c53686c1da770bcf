/**
 * `dependencies/manifest.json`: the published node dependency set per
 * architecture. Written last by `podmin setup` with a conditional write; read
 * by setup (what is already published) and rendered into user-data.
 */

import { DEPENDENCY_MANIFEST, dependencyBlobKey } from "./bucket_layout.ts";
import { ValidationError } from "../kit/errors.ts";
import { API_VERSION } from "../model/resources.ts";
import { compareCodeUnits } from "../kit/canonical_json.ts";

/** The architectures Podmin runs on. */
export const ARCHITECTURES = ["amd64", "arm64"] as const;
/** An architecture. */
export type Architecture = typeof ARCHITECTURES[number];

/** One published dependency file. */
export interface DependencyEntry {
  name: string;
  version: string;
  sha256: string;
  size: number;
  /** Bucket key: `dependencies/blobs/sha256/<sha256>`. */
  key: string;
}

/** The manifest document. */
export interface DependencyManifest {
  apiVersion: typeof API_VERSION;
  kind: "DependencyManifest";
  generation: number;
  architectures: Partial<Record<Architecture, DependencyEntry[]>>;
}

const NAME = /^[a-z0-9][a-z0-9.-]{0,62}$/;
const VERSION = /^[A-Za-z0-9][A-Za-z0-9.+_-]{0,62}$/;

/** An empty manifest (what an absent object means). */
export function emptyDependencyManifest(): DependencyManifest {
  return { apiVersion: API_VERSION, kind: "DependencyManifest", generation: 0, architectures: {} };
}

/** Validates one entry (names, versions, digests and the key built from the digest). */
export function checkDependencyEntry(e: unknown, where: string): DependencyEntry {
  const d = e as DependencyEntry;
  const bad = (why: string) => new ValidationError(`${where}: ${why}`);
  if (d === null || typeof d !== "object") throw bad("not an object");
  if (typeof d.name !== "string" || !NAME.test(d.name)) {
    throw bad(`invalid name ${JSON.stringify(d.name)}`);
  }
  if (typeof d.version !== "string" || !VERSION.test(d.version)) {
    throw bad(`invalid version ${JSON.stringify(d.version)}`);
  }
  if (typeof d.sha256 !== "string" || !/^[0-9a-f]{64}$/.test(d.sha256)) {
    throw bad("sha256 must be 64 hex digits");
  }
  if (!Number.isSafeInteger(d.size) || d.size < 0) throw bad("size must be a byte count");
  if (d.key !== dependencyBlobKey(d.sha256)) {
    throw bad(`key must be ${dependencyBlobKey(d.sha256)}`);
  }
  return { name: d.name, version: d.version, sha256: d.sha256, size: d.size, key: d.key };
}

/** Parses and validates manifest bytes. */
export function parseDependencyManifest(bytes: Uint8Array): DependencyManifest {
  let doc: DependencyManifest;
  try {
    doc = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(bytes));
  } catch (err) {
    throw new ValidationError(
      `${DEPENDENCY_MANIFEST} is not valid JSON: ${(err as Error).message}`,
    );
  }
  const bad = (why: string) => new ValidationError(`${DEPENDENCY_MANIFEST}: ${why}`);
  if (doc === null || typeof doc !== "object") throw bad("not an object");
  if (doc.apiVersion !== API_VERSION || doc.kind !== "DependencyManifest") {
    throw bad("wrong apiVersion or kind");
  }
  if (!Number.isSafeInteger(doc.generation) || doc.generation < 0) throw bad("bad generation");
  if (doc.architectures === null || typeof doc.architectures !== "object") {
    throw bad("architectures missing");
  }
  const architectures: DependencyManifest["architectures"] = {};
  for (const [arch, list] of Object.entries(doc.architectures)) {
    if (!(ARCHITECTURES as readonly string[]).includes(arch)) {
      throw bad(`unknown architecture ${arch}`);
    }
    if (!Array.isArray(list)) throw bad(`${arch} must be a list`);
    const seen = new Set<string>();
    architectures[arch as Architecture] = list.map((e, i) => {
      const entry = checkDependencyEntry(e, `${DEPENDENCY_MANIFEST} ${arch}[${i}]`);
      if (seen.has(entry.name)) throw bad(`${arch} lists ${entry.name} twice`);
      seen.add(entry.name);
      return entry;
    });
  }
  return {
    apiVersion: API_VERSION,
    kind: "DependencyManifest",
    generation: doc.generation,
    architectures,
  };
}

/** Serialises a manifest (entries sorted by name). */
export function serializeDependencyManifest(m: DependencyManifest): Uint8Array {
  const architectures: DependencyManifest["architectures"] = {};
  for (const arch of ARCHITECTURES) {
    const list = m.architectures[arch];
    if (list) architectures[arch] = [...list].sort((a, b) => compareCodeUnits(a.name, b.name));
  }
  return new TextEncoder().encode(JSON.stringify({ ...m, architectures }, null, 1) + "\n");
}

/** True when two manifests publish the same files (generation ignored). */
export function sameDependencies(a: DependencyManifest, b: DependencyManifest): boolean {
  const norm = (m: DependencyManifest) =>
    new TextDecoder().decode(serializeDependencyManifest({ ...m, generation: 0 }));
  return norm(a) === norm(b);
}

/**
 * Parsing of image manifests and indexes (OCI and Docker schema 2): just
 * enough structure to find the descriptors a manifest references, validated
 * as untrusted input.
 */

import { isDigest } from "../core/kit/digest.ts";
import { ValidationError } from "../core/kit/errors.ts";
import { isIndexType, isManifestType, OCI_INDEX, OCI_MANIFEST } from "./media_types.ts";

/** A content descriptor. */
export interface Descriptor {
  mediaType: string;
  digest: string;
  size: number;
  platform?: { os?: string; architecture?: string; variant?: string };
  annotations?: Record<string, string>;
}

/** A parsed manifest or index. */
export interface ParsedManifest {
  mediaType: string;
  /** Index entries (children manifests); empty for an image manifest. */
  manifests: Descriptor[];
  /** Config and layers of an image manifest; empty for an index. */
  blobs: Descriptor[];
}

function descriptor(v: unknown, where: string): Descriptor {
  const d = v as Descriptor;
  if (d === null || typeof d !== "object") throw new ValidationError(`${where}: not a descriptor`);
  if (typeof d.mediaType !== "string") throw new ValidationError(`${where}: mediaType missing`);
  if (!isDigest(d.digest)) throw new ValidationError(`${where}: digest must be sha256:<64 hex>`);
  if (!Number.isSafeInteger(d.size) || d.size < 0) throw new ValidationError(`${where}: bad size`);
  return d;
}

/**
 * Parses manifest bytes. `declaredType` (a Content-Type or descriptor media
 * type) is used when the document has no `mediaType` field.
 */
export function parseManifest(bytes: Uint8Array, declaredType?: string): ParsedManifest {
  let doc: Record<string, unknown>;
  try {
    doc = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(bytes));
  } catch (err) {
    throw new ValidationError(`manifest is not JSON: ${(err as Error).message}`);
  }
  if (doc === null || typeof doc !== "object") {
    throw new ValidationError("manifest is not an object");
  }
  if (doc.schemaVersion !== 2) throw new ValidationError("manifest schemaVersion must be 2");
  const mediaType = typeof doc.mediaType === "string"
    ? doc.mediaType
    : declaredType && isManifestType(declaredType)
    ? declaredType
    : Array.isArray(doc.manifests)
    ? OCI_INDEX
    : OCI_MANIFEST;
  if (!isManifestType(mediaType)) {
    throw new ValidationError(`unsupported manifest media type ${mediaType}`);
  }
  if (isIndexType(mediaType)) {
    if (!Array.isArray(doc.manifests)) throw new ValidationError("index without manifests");
    return {
      mediaType,
      manifests: doc.manifests.map((m, i) => descriptor(m, `manifests[${i}]`)),
      blobs: [],
    };
  }
  if (!Array.isArray(doc.layers)) throw new ValidationError("manifest without layers");
  return {
    mediaType,
    manifests: [],
    blobs: [
      descriptor(doc.config, "config"),
      ...doc.layers.map((l, i) => descriptor(l, `layers[${i}]`)),
    ],
  };
}

/** `linux/amd64` style platform string of a descriptor, or undefined. */
export function platformOf(d: Descriptor): string | undefined {
  if (!d.platform?.os || !d.platform.architecture) return undefined;
  return `${d.platform.os}/${d.platform.architecture}${
    d.platform.variant ? `/${d.platform.variant}` : ""
  }`;
}

/** OCI and Docker media types the image store understands. */

export const OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json";
export const OCI_INDEX = "application/vnd.oci.image.index.v1+json";
export const DOCKER_MANIFEST = "application/vnd.docker.distribution.manifest.v2+json";
export const DOCKER_MANIFEST_LIST = "application/vnd.docker.distribution.manifest.list.v2+json";
export const OCI_CONFIG = "application/vnd.oci.image.config.v1+json";
export const OCI_LAYER_TAR = "application/vnd.oci.image.layer.v1.tar";
export const OCI_LAYER_GZIP = "application/vnd.oci.image.layer.v1.tar+gzip";

/** Media types of single-platform manifests. */
export const IMAGE_MANIFEST_TYPES = [OCI_MANIFEST, DOCKER_MANIFEST] as const;
/** Media types of multi-platform indexes. */
export const INDEX_TYPES = [OCI_INDEX, DOCKER_MANIFEST_LIST] as const;
/** Every manifest media type (the Accept list of an upstream pull). */
export const MANIFEST_TYPES = [...IMAGE_MANIFEST_TYPES, ...INDEX_TYPES] as const;

/** True for an index (manifest list) media type. */
export function isIndexType(mediaType: string): boolean {
  return (INDEX_TYPES as readonly string[]).includes(mediaType);
}

/** True for any manifest media type this store keeps. */
export function isManifestType(mediaType: string): boolean {
  return (MANIFEST_TYPES as readonly string[]).includes(mediaType);
}

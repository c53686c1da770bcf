/** Registry defaults: where the agent serves the registry, and the hostname Pods pull from. */

/** The hostname Pod images use (an image-reference concept, defined in core). */
export { REGISTRY_HOSTNAME } from "../core/model/image_ref.ts";

/** Where the agent serves the registry: loopback only. */
export const REGISTRY_LISTEN = "127.0.0.1:5000";

/**
 * Blob GETs of at least this many bytes are answered with a redirect to a presigned URL of the
 * S3 store (`--redirect-min-bytes`, as the flag spells it; `parseRedirect` reads it): smaller blobs (image configs, small layers) cost less served
 * directly than a second connection to S3.
 */
export const REGISTRY_REDIRECT_MIN_BYTES = "1MiB";

/** How long a redirect's presigned URL stays valid (`--redirect-ttl`). */
export const REGISTRY_REDIRECT_TTL = "5m";

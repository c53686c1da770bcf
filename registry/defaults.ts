/** Registry defaults: where the agent serves the registry, and the hostname Pods pull from. */

/** The hostname Pod images use (an image-reference concept, defined in core). */
export { REGISTRY_HOSTNAME } from "../core/image_ref.ts";

/** Where the agent serves the registry: loopback only. */
export const REGISTRY_LISTEN = "127.0.0.1:5000";

/** Registry defaults shared by the agent (server), the CLI (image references) and vmconfig. */

/**
 * The hostname Pod images use: `registry.podmin.internal/apps/NAME:TAG` and
 * `registry.podmin.internal/mirror/REGISTRY/NAME:TAG`. It never resolves in DNS:
 * containerd maps it to the loopback registry through certs.d/<host>/hosts.toml.
 */
export const REGISTRY_HOSTNAME = "registry.podmin.internal";

/** Where the agent serves the registry: loopback only. */
export const REGISTRY_LISTEN = "127.0.0.1:5000";

/** containerd's registry host configuration for the loopback registry (certs.d/<host>/hosts.toml). */

import { REGISTRY_HOSTNAME, REGISTRY_LISTEN } from "./defaults.ts";

/**
 * Renders `certs.d/<registry-hostname>/hosts.toml`: pulls of
 * `<registry-hostname>/…` go to the agent's loopback registry over plain HTTP,
 * for pull and resolve only. (containerd ≥ 2.1 also needs
 * `use_local_image_pull = true` in its CRI image config, or CRI pulls skip
 * hosts.toml; vmconfig writes that setting.)
 */
export function renderHostsToml(options: { hostname?: string; listen?: string } = {}): string {
  const hostname = options.hostname ?? REGISTRY_HOSTNAME;
  const listen = options.listen ?? REGISTRY_LISTEN;
  return `# Podmin: ${hostname} is served by podmin-agent on loopback, straight from the cluster bucket.
server = "http://${listen}"

[host."http://${listen}"]
  capabilities = ["pull", "resolve"]
  skip_verify = true
`;
}

/**
 * Per-Pod directory names under the node's secrets and TLS roots: `<namespace>_<name>`. The
 * deployments loop mounts them into static Pods; the secrets loop writes and prunes them. Both
 * name them only through this module.
 */

/** The per-Pod directory name under the secrets and TLS roots. */
export function podDirName(namespace: string, name: string): string {
  return `${namespace}_${name}`;
}

/** Matches names of per-Pod directories the agent may own (and prune). */
export const POD_DIR_PATTERN = /^[a-z0-9-]{1,63}_[a-z0-9-]{1,63}$/;

/** The defaults of `podmin local` (its help shows them; cli/local/local_node.ts uses them). */

/** Defaults of a local node. */
export const LOCAL_DEFAULTS = {
  stateDir: "/var/lib/podmin-local",
  cluster: "local",
  nodeGroup: "default",
  /** A unique-local /80 standing in for the Pod ENI's delegated prefix. */
  podPrefix: "fd00:706d:6e::/80",
  registryPort: 5000,
  sandboxImage: "registry.k8s.io/pause:3.10",
  nodeName: "podmin-local",
} as const;

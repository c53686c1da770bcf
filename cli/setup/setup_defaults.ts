/** `podmin setup` defaults, apart from the parser so that the help text loads nothing else. */

/** Defaults from the product documents. */
export const SETUP_DEFAULTS = {
  /** The cluster id when --cluster is not given (its bucket: s3://podmin-default). */
  cluster: "default",
  nodeGroupSize: 1,
  diskSizeGiB: 20,
  instanceType: "t4g.medium",
  nat64InstanceType: "t4g.nano",
} as const;

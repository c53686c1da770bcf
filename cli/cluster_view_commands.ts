/**
 * `podmin images` and `podmin status`: the cluster as its bucket shows it — their help and flags;
 * each loads its implementation (cli/cluster_view_run.ts) when it runs.
 */

import type { Command } from "../core/kit/cli_kit.ts";

const images: Command = {
  name: "images",
  summary: "list the repositories and tags of the image store",
  help: `Usage: podmin images [-o table|json]

Lists every tag of the image store (apps/ from 'podmin push', mirror/ from
'podmin mirror' and setup) with the digest of the tagged manifest, as Pods
reference them (registry.podmin.internal/…). Listing is the CLI's job: the
node registry never lists tags.

Flags:
  -o, --output FORMAT  table (default) or json (repository, tag, full digest)

Example:
  podmin --bucket s3://my-cluster images`,
  options: { output: { type: "string", short: "o", default: "table" } },
  run: async (ctx) => (await import("./cluster_view_run.ts")).runImages(ctx),
};

const status: Command = {
  name: "status",
  summary: "summarise the cluster: nodes, Deployments, Services, images",
  help: `Usage: podmin status

A summary of what the bucket holds: the Deployments per NodeGroup, the
Services, the image store, and the Podmin images Deployments reference that
the store lacks (their Pods cannot start). Which nodes report in, and where
each Deployment runs at its current spec, come from the agents' node records
under dns/nodes/.

Example:
  podmin --bucket s3://my-cluster status`,
  options: {},
  run: async (ctx) => (await import("./cluster_view_run.ts")).runStatus(ctx),
};

/** The cluster summary commands. */
export const clusterViewCommands: Command[] = [status, images];

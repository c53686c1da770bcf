/**
 * `podmin teardown` and `podmin destroy`: their help and flags; the implementation
 * (cli/setup/teardown_run.ts, with OpenTofu and the AWS SDK clients) loads when they run.
 */

import type { Command } from "../../core/kit/cli_kit.ts";

/** The flags teardown and destroy share: their help and their options. */
const FLAGS = `Flags:
  --cluster ID     the cluster
  --yes            do not ask for confirmation
  --work-dir DIR   where the configuration is unpacked (default ~/.local/share/podmin/<cluster>)
  --force-unlock LOCK_ID
                   release the state lock a killed tofu left (infra/terraform.tfstate.tflock;
                   the ID must be the one a locked teardown names), then go on`;

const OPTIONS = {
  cluster: { type: "string" },
  yes: { type: "boolean", default: false },
  "work-dir": { type: "string" },
  "force-unlock": { type: "string" },
} as const;

const teardown: Command = {
  name: "teardown",
  summary: "remove the cluster's infrastructure; keep the bucket, CAs and images",
  help: `Usage: podmin teardown --cluster ID --bucket s3://NAME [--yes] [--work-dir DIR]
       [--force-unlock LOCK_ID]

Runs OpenTofu destroy on the configuration setup saved in the bucket (infra/),
so it also removes an interrupted setup. Keeps the bucket (desired state,
images, dependencies), the CA parameters and reused VPCs.

${FLAGS}

Example:
  podmin --bucket s3://podmin-prod teardown --cluster prod`,
  options: OPTIONS,
  run: async (ctx) => (await import("./teardown_run.ts")).runTeardown(ctx),
};

const destroy: Command = {
  name: "destroy",
  summary: "remove everything: infrastructure, bucket, CA parameters",
  help: `Usage: podmin destroy --cluster ID --bucket s3://NAME [--yes] [--work-dir DIR]
       [--force-unlock LOCK_ID]

Tears the infrastructure down (as podmin teardown), deletes the CA parameters
/<cluster>/_system/workload-ca-key and /<cluster>/_system/cluster-ca, then
every object of the bucket and the bucket itself. Reused VPCs and the
--workload-ca-publish object are never deleted.

${FLAGS}

Example:
  podmin --bucket s3://podmin-prod destroy --cluster prod`,
  options: OPTIONS,
  run: async (ctx) => (await import("./teardown_run.ts")).runDestroy(ctx),
};

/** The teardown and destroy commands. */
export const teardownCommands: Command[] = [teardown, destroy];

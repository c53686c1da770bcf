/**
 * The `podmin` program: its command list. Every entry holds a command's name, summary, help and
 * flags; its implementation is imported when it runs, so help and argument errors load no AWS SDK,
 * certificate library or image code (`local`'s help module loads when named, its implementation
 * when it runs).
 */

import type { Command, DeferredCommand, Program } from "../core/kit/cli_kit.ts";
import { versionLine } from "../core/kit/version.ts";
import { bucketCommands } from "./bucket_command.ts";
import { caCommands } from "./ca_command.ts";
import { clusterViewCommands } from "./cluster_view_commands.ts";
import { deployCommands } from "./deploy_commands.ts";
import { getCommands } from "./get_commands.ts";
import { rolloutCommands } from "./rollout_commands.ts";
import { imageCommands } from "./image_commands.ts";
import { setupCommands } from "./setup/setup_command.ts";
import { teardownCommands } from "./setup/teardown_commands.ts";
import { completionCommand } from "./completion_command.ts";

const version: Command = {
  name: "version",
  summary: "print the Podmin version",
  help: "Usage: podmin version\n\nPrints the version of this podmin binary.",
  options: {},
  run(ctx) {
    ctx.out(versionLine("podmin"));
    return Promise.resolve();
  },
};

/** `podmin local`: help and flags in cli/local/local_command.ts, loaded when named. */
const local: DeferredCommand = {
  name: "local",
  summary: "a real single-node cluster on this host: local up | down | status | exec",
  load: async () => (await import("./local/local_command.ts")).localCommands[0],
};

const PROGRAM_EXAMPLES =
  `  podmin setup --cluster prod --vpc-cidr 10.0.0.0/16 --nodegroup default --dry-run --out ./plan
  podmin --bucket s3://podmin-prod push oci:./web:1.0 apps/web:1.0
  podmin --bucket s3://podmin-prod apply -f web.yaml
  podmin --bucket s3://podmin-prod get deployments -o wide
  podmin --bucket s3://podmin-prod status`;

/** Builds the `podmin` program. */
export function programOf(): Program {
  const program: Program = {
    name: "podmin",
    description: "podmin: run containers on AWS VMs with an S3 bucket as the control plane.",
    examples: PROGRAM_EXAMPLES,
    commands: [
      ...deployCommands,
      ...rolloutCommands,
      ...getCommands,
      ...clusterViewCommands,
      ...imageCommands,
      ...setupCommands,
      ...teardownCommands,
      local,
      ...bucketCommands,
      ...caCommands,
      version,
    ],
  };
  program.commands.push(completionCommand(program));
  return program;
}

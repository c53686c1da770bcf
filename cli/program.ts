/** The `podmin` program: its command list. */

import type { Command, Program } from "../core/cli_kit.ts";
import { versionLine } from "../core/version.ts";
import { bucketCommands } from "./bucket_command.ts";
import { caCommands } from "./ca_command.ts";
import { deployCommands } from "./deploy_commands.ts";
import { imageCommands } from "./image_commands.ts";
import { localCommands } from "./local/local_command.ts";
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
      ...imageCommands,
      ...setupCommands(),
      ...teardownCommands(),
      ...localCommands,
      ...bucketCommands,
      ...caCommands,
      version,
    ],
  };
  program.commands.push(completionCommand(program));
  return program;
}

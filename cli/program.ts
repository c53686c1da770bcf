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

/** Builds the `podmin` program. */
export function programOf(): Program {
  return {
    name: "podmin",
    description: "podmin: run containers on AWS VMs with an S3 bucket as the control plane.",
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
}

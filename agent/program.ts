/** The `podmin-agent` program: its command list. */

import type { Command, Program } from "../core/kit/cli_kit.ts";
import { versionLine } from "../core/kit/version.ts";
import { dataplaneCommands } from "./dataplane/dataplane_command.ts";
import { podsCommands } from "./discovery/pods_command.ts";
import { registryCommands } from "./registry_command.ts";
import { runCommands } from "./run_command.ts";
import { statusCommands } from "./status_command.ts";

const version: Command = {
  name: "version",
  summary: "print the agent version",
  help: "Usage: podmin-agent version\n\nPrints the version of this podmin-agent binary.",
  options: {},
  run(ctx) {
    ctx.out(versionLine("podmin-agent"));
    return Promise.resolve();
  },
};

/** Builds the `podmin-agent` program. */
export function programOf(): Program {
  return {
    name: "podmin-agent",
    description: "podmin-agent: converges this VM to the desired state in the cluster bucket.",
    commands: [
      ...runCommands,
      ...statusCommands,
      ...registryCommands,
      ...dataplaneCommands,
      ...podsCommands,
      version,
    ],
    defaultCommand: "run",
  };
}

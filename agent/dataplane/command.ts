/** `podmin-agent dataplane status`: the node's eBPF Service dataplane as the kernel has it. */

import type { Command } from "../../core/cli_kit.ts";
import { UsageError } from "../../core/errors.ts";
import { formatReport, inspectDataplane } from "./status.ts";

const dataplane: Command = {
  name: "dataplane",
  summary: "inspect the eBPF Service dataplane (dataplane status)",
  help: `Usage: podmin-agent dataplane status [-o text|json] [--flows N]

Prints the dataplane of this node's network namespace as the kernel has it:
the loaded programs (podmin_ingress, podmin_egress), the interfaces they are
attached to (tc handle 0x504d, priority 1), the service CIDR, every Service
port with its backend slots, conntrack entries and packet counters. Reads
the kernel directly (the programs are not pinned), so it works whether or
not the agent runs. Needs root.

Flags:
  -o, --output FORMAT   text (default) or json
  --flows N             list at most N conntrack entries (default 50; 0 = none)

Example:
  sudo podmin-agent dataplane status -o json`,
  options: {
    output: { type: "string", short: "o", default: "text" },
    flows: { type: "string", default: "50" },
  },
  positionals: true,
  async run(ctx) {
    const [sub, ...extra] = ctx.positionals;
    if (sub !== "status" || extra.length) {
      throw new UsageError(
        `unknown dataplane command ${JSON.stringify(ctx.positionals.join(" "))}`,
        {
          hint: "use 'podmin-agent dataplane status'",
        },
      );
    }
    const output = ctx.values.output;
    if (output !== "text" && output !== "json") {
      throw new UsageError(`--output must be text or json, not ${JSON.stringify(output)}`);
    }
    const flows = Number(ctx.values.flows);
    if (!Number.isInteger(flows) || flows < 0) {
      throw new UsageError(`--flows must be a non-negative integer`);
    }
    const report = await inspectDataplane({ maxFlows: flows });
    if (output === "json") {
      ctx.out(JSON.stringify(report, (_k, v) => typeof v === "bigint" ? Number(v) : v, 2));
    } else {
      ctx.out(formatReport(report));
    }
    return 0;
  },
};

/** The dataplane commands of `podmin-agent` (wired into agent/program.ts). */
export const dataplaneCommands: Command[] = [dataplane];

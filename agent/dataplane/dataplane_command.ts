/** `podmin-agent dataplane status`: the node's eBPF Service dataplane as the kernel has it. */

import type { Command } from "../../core/kit/cli_kit.ts";
import { UsageError } from "../../core/kit/errors.ts";
import { formatReport, inspectDataplane } from "./status.ts";
import { removeLeftovers } from "./loader.ts";
import { type DataplaneRunStatus, readDataplaneRunStatus } from "./node_dataplane.ts";
import { STATE_DIR_FLAG } from "../part.ts";

const dataplane: Command = {
  name: "dataplane",
  summary: "inspect or detach the eBPF Service dataplane (dataplane status|detach)",
  help: `Usage: podmin-agent dataplane status [-o text|json] [--flows N] [--state-dir DIR]
       podmin-agent dataplane detach

detach removes every Podmin filter from the interfaces of this network namespace
(the programs go with the last one). A stopping agent leaves its dataplane
serving, so Services keep working across agent restarts; run detach after
stopping the agent for good (\`podmin local down\` does), or after switching the
dataplane off (--dataplane off). Needs root.

First the snapshot the running agent applied last (from <state-dir>/dataplane.json):
the endpoint mesh snapshot version (coordinator term and version) and the
services index generation it was built from, with its Service and backend
counts. Then the dataplane of this node's network namespace as the kernel has it:
the loaded programs (podmin_ingress, podmin_egress), the interfaces they are
attached to (tc handle 0x504d, priority 1), the service CIDR, every Service
port with its backend slots, conntrack entries and packet counters. Reads
the kernel directly (the programs are not pinned), so it works whether or
not the agent runs. Needs root.

Flags:
  -o, --output FORMAT   text (default) or json
  --flows N             list at most N conntrack entries (default 50; 0 = none)
  --state-dir DIR       the agent's state directory (default ${STATE_DIR_FLAG.default})

Example:
  sudo podmin-agent dataplane status -o json`,
  options: {
    output: { type: "string", short: "o", default: "text" },
    flows: { type: "string", default: "50" },
    "state-dir": { type: "string", default: STATE_DIR_FLAG.default },
  },
  positionals: true,
  async run(ctx) {
    const [sub, ...extra] = ctx.positionals;
    if (sub === "detach" && !extra.length) {
      const detached = await removeLeftovers();
      ctx.out(
        detached.length
          ? `dataplane detached from ${detached.join(", ")}`
          : "dataplane: nothing attached in this network namespace",
      );
      return 0;
    }
    if (sub !== "status" || extra.length) {
      throw new UsageError(
        `unknown dataplane command ${JSON.stringify(ctx.positionals.join(" "))}`,
        {
          hint: "use 'podmin-agent dataplane status' or 'podmin-agent dataplane detach'",
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
    const agent = await readDataplaneRunStatus(String(ctx.values["state-dir"]));
    const report = await inspectDataplane({ maxFlows: flows });
    if (output === "json") {
      ctx.out(
        JSON.stringify(
          { agent: agent ?? null, ...report },
          (_k, v) => typeof v === "bigint" ? Number(v) : v,
          2,
        ),
      );
    } else {
      ctx.out(formatAgentStatus(agent));
      ctx.out(formatReport(report));
    }
    return 0;
  },
};

/** The agent's side: which snapshot it runs. */
function formatAgentStatus(s: DataplaneRunStatus | undefined): string {
  if (!s) {
    return "agent: no dataplane status (the agent runs without --mesh-listen, or has not started)";
  }
  const lines: string[] = [];
  const a = s.applied;
  lines.push(
    a
      ? `snapshot: term ${a.term} version ${a.version} (services index generation ${
        a.servicesGeneration ?? "-"
      }): ${a.services} Service(s), ${a.backends} backend(s), ${
        a.loaded ? "loaded" : "not loaded"
      }, applied ${a.at}`
      : `snapshot: none applied yet${s.waiting ? ` (${s.waiting})` : ""}`,
  );
  if (s.error) lines.push(`error: ${s.error} (the last applied state stays)`);
  for (const l of s.leftOut) lines.push(`left out: ${l}`);
  return lines.join("\n");
}

/** The dataplane commands of `podmin-agent` (wired into agent/program.ts). */
export const dataplaneCommands: Command[] = [dataplane];

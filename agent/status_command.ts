/** `podmin-agent status`: the running agent's last pass, from its state directory. */

import type { Command } from "../core/kit/cli_kit.ts";
import * as path from "node:path";
import { readStatus } from "./deployments/status.ts";
import type { MeshStatus } from "./mesh/discovery_mesh.ts";
import { readJsonStatus } from "./status_file.ts";
import { readFlags, STATE_DIR_FLAG } from "./part.ts";

const status: Command = {
  name: "status",
  summary: "print the agent's last pass: desired vs written Pods, last sync, errors",
  help: `Usage: podmin-agent status [--state-dir DIR] [-o text|json]

Reads the status the running agent writes after every pass.`,
  options: {
    "state-dir": { type: "string", default: STATE_DIR_FLAG.default },
    output: { type: "string", short: "o", default: "text" },
  },
  async run(ctx) {
    const dir = readFlags(ctx, { "state-dir": STATE_DIR_FLAG })["state-dir"];
    const s = await readStatus(dir);
    if (!s) {
      ctx.err(`no status in ${dir}: the agent has not completed a pass`);
      return 1;
    }
    if (ctx.values.output === "json") {
      ctx.out(JSON.stringify(s, null, 2));
      return s.converged ? 0 : 1;
    }
    ctx.out(`NodeGroup:   ${s.nodeGroup}`);
    ctx.out(`Bucket:      ${s.bucket}`);
    ctx.out(`Converged:   ${s.converged ? "yes" : "no"}`);
    ctx.out(`Last sync:   ${s.lastSync ?? "never"} (index generation ${s.indexGeneration ?? "-"})`);
    ctx.out(`Last pass:   ${s.lastAttempt}`);
    ctx.out(`Desired:     ${s.desired.join(", ") || "(none)"}`);
    ctx.out(`Written:     ${s.written.join(", ") || "(none)"}`);
    for (const p of s.pending) ctx.out(`Pending:     ${p.deployment}: ${p.reason}`);
    for (const c of s.certificates ?? []) {
      ctx.out(`Certificate: ${c.deployment}: expires ${c.notAfter}, renews ${c.renewAt}`);
    }
    for (const e of s.errors) ctx.out(`Error:       ${e}`);
    // Discovery's own problem (e.g. a kubelet without the Pods API), from the mesh's status.
    const mesh = await readJsonStatus<MeshStatus>(path.join(dir, "mesh.json"));
    if (mesh?.podsApi.problem) ctx.out(`Discovery:   ${mesh.podsApi.problem}`);
    return s.converged ? 0 : 1;
  },
};

/** The agent's status command. */
export const statusCommands: Command[] = [status];

/** `podmin-agent run`: the agent composed from its parts (each feature folder exports its own). */

import { bucketUrl, type Command } from "../core/kit/cli_kit.ts";
import { openStore } from "../core/store/store_url.ts";
import { flagOptions, type Part } from "./part.ts";
import { RUN_FLAGS, RUN_HELP, runFlags } from "./run_flags.ts";
import { AGENT_RETRY, desiredStateParts, nodeParts, runInputs } from "./run_parts.ts";

const run: Command = {
  name: "run",
  summary: "converge this node to the cluster bucket (the systemd service)",
  help: RUN_HELP,
  options: flagOptions(RUN_FLAGS),
  async run(ctx) {
    const f = runFlags(ctx);
    const { cluster, nodeGroup, intervalMs, region } = f;
    const store = openStore(bucketUrl(ctx), { region, retry: AGENT_RETRY });
    const inputs = runInputs(f, store);
    const { log } = inputs.context;
    const first = desiredStateParts(inputs);
    const { services, identity, deployments } = first;
    if (f.once) {
      await identity?.once?.();
      return await deployments.runOnce(ctx);
    }
    const { registry, telemetry, dataplane, mesh, node, dns } = nodeParts({ ...inputs, ...first });
    registry?.start?.();
    log.info("agent started", { bucket: store.url, cluster, nodeGroup, intervalMs });
    await serve({
      registry,
      mesh,
      first: services,
      loops: [deployments, node, identity, dns, dataplane, telemetry],
    });
    for (const part of [identity, node]) await part?.release?.();
    log.info("agent stopped");
    return 0;
  },
};

/**
 * Starts the parts in order (the first Services read before its readers, the loops, then the
 * mesh, whose events reach the loops once they run), waits for SIGTERM or SIGINT, and stops
 * them: the registry host (started by the caller), the mesh, then the loops together.
 */
async function serve(o: {
  registry?: Part;
  mesh?: Part;
  first: Part;
  loops: (Part | undefined)[];
}): Promise<void> {
  await o.first.start?.();
  for (const part of o.loops) part?.start?.();
  await o.mesh?.start?.();
  await stopSignal();
  await o.registry?.stop?.();
  await o.mesh?.stop?.();
  await Promise.all([o.first, ...o.loops].map((part) => part?.stop?.()));
}

/** Resolves on the first SIGTERM or SIGINT. */
function stopSignal(): Promise<void> {
  return new Promise((resolve) => {
    Deno.addSignalListener("SIGTERM", resolve);
    Deno.addSignalListener("SIGINT", resolve);
  });
}

/** The agent's run command. */
export const runCommands: Command[] = [run];

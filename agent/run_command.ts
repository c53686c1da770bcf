/** `podmin-agent run`: the agent composed from its parts (each feature folder exports its own). */

import { bucketUrl, type Command } from "../core/kit/cli_kit.ts";
import { createLogger } from "../core/kit/log.ts";
import { openStore } from "../core/store/store_url.ts";
import { dataplanePart } from "./dataplane/part.ts";
import { deploymentsPart } from "./deployments/part.ts";
import { dnsPart } from "./dns/part.ts";
import { caKeySource } from "./identity/ca_key.ts";
import { identityPart, telemetryPart } from "./identity/part.ts";
import { MeshLink, meshPart } from "./mesh/part.ts";
import { nodePart } from "./node/part.ts";
import { type AgentEvents, flagOptions, Hub } from "./part.ts";
import { registryHostPart } from "./registry_host.ts";
import { RUN_FLAGS, RUN_HELP, runFlags } from "./run_flags.ts";
import { secretsPart } from "./secrets/part.ts";
import { AwsValueProvider } from "./secrets/value_provider.ts";
import { servicesPart } from "./services/part.ts";

/**
 * The agent's store makes one attempt per operation: its loop is the retry (backoff with jitter),
 * so an outage reaches the status file within one request bound (spec §2.3, §7).
 */
const AGENT_RETRY = { attempts: 1, baseMs: 100, maxMs: 2000 } as const;

const run: Command = {
  name: "run",
  summary: "converge this node to the cluster bucket (the systemd service)",
  help: RUN_HELP,
  options: flagOptions(RUN_FLAGS),
  async run(ctx) {
    const f = runFlags(ctx);
    const { cluster, nodeGroup, nodeId, intervalMs, region } = f;
    const store = openStore(bucketUrl(ctx), { region, retry: AGENT_RETRY });
    const log = createLogger("agent");
    const context = { store, hub: new Hub<AgentEvents>(), stateDir: f.stateDir, log };
    const provider = new AwsValueProvider({ region });
    const caKey = caKeySource({ flag: f.workloadCaKey, provider, cluster });
    // With the mesh, reads of the deployments index, the services index and the CA state follow
    // the coordinator's announcements (spec §7.9): an idle cluster's reads are the coordinator's.
    const link = new MeshLink({ listen: f.meshListen, once: f.once });
    const services = servicesPart({
      context,
      intervalMs,
      notifier: link.notifier("services"),
      once: f.once,
    });
    const identity = identityPart({
      context,
      cluster,
      nodeId,
      caKey,
      notifier: caKey && link.notifier("caState"),
      services,
      tlsDir: f.dirs.tlsDir,
      publish: f.workloadCaPublish,
      region,
      retry: AGENT_RETRY,
      durations: f.identity,
      contend: link.contender(),
    });
    const secrets = secretsPart({
      cluster,
      provider,
      refreshMs: f.secretsIntervalMs,
      log,
      ...f.dirs,
    });
    const deployments = deploymentsPart({
      context,
      nodeGroup,
      intervalMs,
      ...f.dirs,
      secrets: secrets.sync,
      certificates: identity?.certificates,
      notifier: link.notifier("index"),
    });
    if (f.once) {
      await identity?.once?.();
      return await deployments.runOnce(ctx);
    }
    const registry = registryHostPart({ context, ...f.registry });
    const telemetry = telemetryPart({
      context,
      cluster,
      nodeGroup,
      nodeId,
      ...f.telemetry,
      region,
      ca: identity?.ca,
      retry: AGENT_RETRY,
    });
    const dataplane = dataplanePart({
      context,
      enabled: f.dataplane,
      podPrefix: f.node.podPrefix,
      services,
      meshSnapshot: () => link.snapshot(),
    });
    const mesh = meshPart({
      context,
      link,
      cluster,
      nodeGroup,
      nodeId,
      ...f.mesh,
      provider,
      services,
      intervalMs,
      caStateMs: identity?.stateRefreshMs,
    });
    const node = nodePart({
      context,
      nodeGroup,
      nodeId,
      ...f.node,
      summary: () => deployments.summary(),
      discovery: () => mesh?.mesh.recordExtras(),
      problem: () => mesh?.mesh.problem(),
    });
    const dns = dnsPart({ context, dir: f.dnsDir, services, intervalMs });
    const loops = [services, deployments, node, identity, dns, dataplane, telemetry];
    registry?.start?.();
    log.info("agent started", { bucket: store.url, cluster, nodeGroup, intervalMs });
    await services.start?.(); // the first read, before its readers start
    for (const part of loops.slice(1)) part?.start?.();
    // The mesh starts after the loops; its events reach them then.
    await mesh?.start?.();
    await stopSignal();
    await registry?.stop?.();
    await mesh?.stop?.();
    await Promise.all(loops.map((part) => part?.stop?.()));
    for (const part of [identity, node]) await part?.release?.();
    log.info("agent stopped");
    return 0;
  },
};

/** Resolves on the first SIGTERM or SIGINT. */
function stopSignal(): Promise<void> {
  return new Promise((resolve) => {
    Deno.addSignalListener("SIGTERM", resolve);
    Deno.addSignalListener("SIGINT", resolve);
  });
}

/** The agent's run command. */
export const runCommands: Command[] = [run];

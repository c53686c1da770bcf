/**
 * The agent's parts for `podmin-agent run`, built from the run flags: the ones `--once` needs
 * (`desiredStateParts`) and the ones only a running node has (`nodeParts`). Only composes.
 */

import type { ObjectStore } from "../core/store/object_store.ts";
import { createLogger } from "../core/kit/log.ts";
import { dataplanePart } from "./dataplane/part.ts";
import { deploymentsPart } from "./deployments/part.ts";
import { lacksPodsApi } from "./discovery/pods_api_problem.ts";
import { dnsPart } from "./dns/part.ts";
import { caKeySource } from "./identity/ca_key.ts";
import { identityPart, telemetryPart } from "./identity/part.ts";
import { MeshLink, meshPart } from "./mesh/part.ts";
import { nodePart } from "./node/part.ts";
import { type AgentEvents, Hub, type PartContext } from "./part.ts";
import { registryHostPart } from "./registry_host.ts";
import type { RunFlags } from "./run_flags.ts";
import { secretsPart } from "./secrets/part.ts";
import { AwsValueProvider } from "./secrets/value_provider.ts";
import { servicesPart } from "./services/part.ts";

/**
 * The agent's store makes one attempt per operation: its loop is the retry (backoff with jitter),
 * so an outage reaches the status file within one request bound (spec §2.3, §7).
 */
export const AGENT_RETRY = { attempts: 1, baseMs: 100, maxMs: 2000 } as const;

/** What every part is built from: the flags, the shared context, the value provider, the mesh. */
export interface RunInputs {
  f: RunFlags;
  context: PartContext;
  provider: AwsValueProvider;
  link: MeshLink;
}

/** The inputs of the parts: one store, hub, logger, value provider and mesh link per agent. */
export function runInputs(f: RunFlags, store: ObjectStore): RunInputs {
  const log = createLogger("agent");
  const context = { store, hub: new Hub<AgentEvents>(), stateDir: f.stateDir, log };
  const provider = new AwsValueProvider({ region: f.region });
  // With the mesh, reads of the deployments index, the services index and the CA state follow
  // the coordinator's announcements (spec §7.9): an idle cluster's reads are the coordinator's.
  const link = new MeshLink({ listen: f.meshListen, once: f.once });
  return { f, context, provider, link };
}

/** The parts `--once` also needs: the Services view, Pod identity, values and the deployments. */
export function desiredStateParts({ f, context, provider, link }: RunInputs) {
  const { cluster, nodeId, intervalMs, region } = f;
  const caKey = caKeySource({ flag: f.workloadCaKey, provider, cluster });
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
    log: context.log,
    ...f.dirs,
  });
  const deployments = deploymentsPart({
    context,
    nodeGroup: f.nodeGroup,
    intervalMs,
    ...f.dirs,
    secrets: secrets.sync,
    certificates: identity?.certificates,
    notifier: link.notifier("index"),
    // `--once` cannot wait for a new Pod, nor can a kubelet without the Pods API show one Ready:
    // they replace in place (spec §7.1, "Surge").
    podsApiSocket: f.once || lacksPodsApi(f.mesh.kubeletVersion) ? undefined : f.mesh.podsApiSocket,
    clusterEndpoints: f.meshListen && !f.once ? () => link.snapshot()?.endpoints : undefined,
    // The cluster-wide budget (spec §7.1, "Budget"); `--once` replaces without waiting.
    nodeId: f.once ? undefined : nodeId,
  });
  return { services, identity, deployments };
}

/** The parts of a running node: registry host, telemetry, dataplane, mesh, node record, DNS. */
export function nodeParts(o: RunInputs & ReturnType<typeof desiredStateParts>) {
  const { f, context, link, services, identity, deployments } = o;
  const { cluster, nodeGroup, nodeId, intervalMs, region } = f;
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
    provider: o.provider,
    services,
    intervalMs,
    caStateMs: identity?.stateRefreshMs,
    withdrawn: (pod) => deployments.isWithdrawn(pod),
  });
  const node = nodePart({
    context,
    nodeGroup,
    nodeId,
    ...f.node,
    summary: () => deployments.summary(),
    clusterNodes: () => link.snapshot()?.nodes,
    discovery: () => mesh?.mesh.recordExtras(),
    problem: () => mesh?.mesh.problem(),
  });
  const dns = dnsPart({ context, dir: f.dnsDir, services, intervalMs });
  return { registry, telemetry, dataplane, mesh, node, dns };
}

/** `podmin-agent run` and `podmin-agent status`. */

import { bucketUrl, type Command, type CommandContext } from "../core/kit/cli_kit.ts";
import { createLogger, type Logger } from "../core/kit/log.ts";
import type { ObjectStore } from "../core/store/object_store.ts";
import { openStore } from "../core/store/store_url.ts";
import { DeploymentsLoop } from "./deployments/deployments_loop.ts";
import { SecretsSync } from "./secrets/secrets_sync.ts";
import { Loop } from "./loop.ts";
import { type AgentStatus, writeStatus } from "./deployments/status.ts";
import { AwsValueProvider } from "./secrets/value_provider.ts";
import { PodCertificates } from "./identity/pod_certificates.ts";
import { NodeRecordWriter } from "./node_record_writer.ts";
import { DiscoveryMesh } from "./mesh/discovery_mesh.ts";
import { ANNOUNCED_HINT_DELAY_MS, IndexNotifier } from "./mesh/index_notifier.ts";
import { clusterAnnouncers } from "./mesh/index_poller.ts";
import type { AnnouncedObject } from "../core/model/endpoint_snapshot.ts";
import { DnsPublisher, type DnsStatus } from "./dns/dns_publisher.ts";
import { DEFAULT_CLUSTER_DOMAIN, ServicesView } from "./services_view.ts";
import { CONVERGED_RECORD_SPREAD_MS, HEARTBEAT_MS } from "../core/bucket/node_record.ts";
import { CaView } from "./identity/ca_view.ts";
import { type TelemetryStatus } from "./identity/telemetry.ts";
import * as path from "node:path";
import { ImageReader } from "../registry/image_reader.ts";
import { parseListen, type RegistryRedirect, serveRegistry } from "../registry/server.ts";
import { identityCaLoop } from "./identity/identity_loop.ts";
import { RUN_FLAGS, runFlags } from "./run_flags.ts";
import { flagHelp, flagOptions } from "./part.ts";
import { caKeySource, loadClusterCa, telemetryIdentity } from "./run_parts.ts";
import { writeJsonStatus } from "./status_file.ts";
import { Dataplane } from "./dataplane/dataplane.ts";
import { NodeDataplane } from "./dataplane/node_dataplane.ts";
import type { ClusterSnapshot } from "../core/model/endpoint_snapshot.ts";
import { canTrimMalloc, trimMalloc } from "../ffi/malloc_trim.ts";

const MAX_BACKOFF_MS = 30_000;
/** How often the CA state is re-read (spec §8.5: the trust window covers it). */
const CA_STATE_REFRESH_MS = 30_000;
/** The telemetry maintenance pass. */
const TELEMETRY_INTERVAL_MS = 60_000;
/**
 * How often freed native memory is handed back to the system (ffi/malloc_trim.ts); also right
 * after the Services or the node's Deployments change, the passes that read many objects.
 */
const MALLOC_TRIM_MS = 30_000;

/**
 * The agent's store makes one attempt per operation: its loop is the retry (backoff with jitter),
 * so an outage reaches the status file within one request bound (spec §2.3, §7).
 */
const AGENT_RETRY = { attempts: 1, baseMs: 100, maxMs: 2000 } as const;

const run: Command = {
  name: "run",
  summary: "converge this node to the cluster bucket (the systemd service)",
  help: `Usage: podmin-agent run --bucket URL --cluster ID --nodegroup NAME [flags]

Polls deployments/index.json, writes this NodeGroup's Pods as kubelet static
Pod manifests and keeps their declared Parameter Store / Secrets Manager values
in tmpfs. A failed or invalid read never removes a running Pod.

Flags:
${flagHelp(RUN_FLAGS)}

Example:
  podmin-agent run --bucket s3://my-cluster --cluster prod --nodegroup workers --once`,
  options: flagOptions(RUN_FLAGS),
  async run(ctx) {
    const f = runFlags(ctx);
    const { cluster, nodeGroup, intervalMs, region, stateDir } = f;
    const store = openStore(bucketUrl(ctx), { region, retry: AGENT_RETRY });
    const log = createLogger("agent");
    const provider = new AwsValueProvider({ region });
    const caKey = caKeySource({ flag: f.workloadCaKey, provider, cluster });
    // With the mesh, reads of the deployments index, the services index and the CA state follow
    // the coordinator's announcements (spec §7.9): an idle cluster's reads are the coordinator's.
    let meshConnected = () => false;
    let meshContends = () => true;
    const notified = (object: AnnouncedObject) =>
      f.meshListen && !f.once
        ? new IndexNotifier({ object, connected: () => meshConnected() })
        : undefined;
    const notifier = notified("index");
    const servicesNotifier = notified("services");
    const caNotifier = caKey && notified("caState");
    const ca = caKey && new CaView({
      store,
      caKey,
      refreshMs: CA_STATE_REFRESH_MS,
      gate: caNotifier && ((held) => caNotifier.shouldRead(held)),
    });
    // One view of the Services for certificates, DNS, the mesh and the dataplane: each refresh
    // (whoever asks) is one conditional GET at most per interval, or per announcement.
    const services = new ServicesView({
      store,
      intervalMs,
      gate: servicesNotifier && ((held) => servicesNotifier.shouldRead(held)),
    });
    const deployments = new DeploymentsLoop({
      store,
      nodeGroup,
      shouldReadIndex: notifier && ((held) => notifier.shouldRead(held)),
      manifestDir: f.manifestDir,
      secretsDir: f.secretsDir,
      tlsDir: f.tlsDir,
      secrets: new SecretsSync({
        cluster,
        secretsDir: f.secretsDir,
        provider,
        refreshMs: f.secretsIntervalMs,
        log,
      }),
      identity: caKey &&
        new PodCertificates({ cluster, tlsDir: f.tlsDir, store, caKey, ca, services, log }),
      log,
    });
    const identity = caKey && identityCaLoop({
      store,
      cluster,
      nodeId: f.nodeId,
      keySource: caKey,
      publish: f.workloadCaPublish,
      region,
      retry: AGENT_RETRY,
      ...f.identity,
      stateDir,
      // With the mesh only its coordinator (and a few disconnected agents) contend: O(1) lease
      // reads (ContentionGate).
      contend: f.meshListen ? () => meshContends() : undefined,
      log,
    });
    if (f.once) {
      // One CA pass first, so a single node bootstraps its workload CA in the same run.
      await identity?.once();
      return await runOnce({ ctx, deployments, stateDir });
    }

    const abort = new AbortController();
    if (f.registryListen !== "off") {
      hostRegistry({
        store,
        listen: f.registryListen,
        redirect: f.registryRedirect,
        signal: abort.signal,
        log,
      });
    }
    const telemetry = telemetryIdentity({
      f,
      ca,
      region,
      log,
      retry: AGENT_RETRY,
      intervalMs: TELEMETRY_INTERVAL_MS,
    });
    // The dataplane's input is the mesh snapshot joined with the Services (spec §7.6).
    let meshSnapshot: () => ClusterSnapshot | undefined = () => undefined;
    const dataplane = f.dataplane
      ? new NodeDataplane({
        dataplane: new Dataplane({ podPrefix: f.ipv6Prefix, log }),
        services,
        meshSnapshot: () => meshSnapshot(),
        stateDir,
        log,
      })
      : undefined;
    // The mesh starts after the loops; its callbacks reach them then.
    const mesh = f.meshListen
      ? new DiscoveryMesh({
        store,
        cluster,
        nodeGroup,
        nodeId: f.nodeId,
        loadCa: () => loadClusterCa({ flag: f.clusterCa, provider, cluster }),
        listen: f.meshListen,
        nodeCertLifetimeMs: f.nodeCertLifetimeMs,
        advertiseHost: f.meshAdvertise ?? f.nodeAddress ?? "127.0.0.1",
        podsApiSocket: f.podsApiSocket,
        kubeletVersion: f.kubeletVersion,
        services,
        servicesIntervalMs: intervalMs,
        announce: clusterAnnouncers(store, {
          intervalMs,
          caStateMs: caKey ? CA_STATE_REFRESH_MS : undefined,
        }),
        pollMs: intervalMs,
        onLocalChange: () => recordLoop.hint(),
        onPodsEvent: () => dataplane?.hint(),
        onSnapshot: (snapshot) => {
          if (notifier?.onSnapshot(snapshot, deployments.indexEtag)) deploymentsLoop.hint();
          // A new services index: read now (its listeners hint DNS and the dataplane).
          if (servicesNotifier?.onSnapshot(snapshot, services.etag)) {
            void services.refresh(Date.now()).then((error) =>
              error && log.warn("services not refreshed", { error })
            );
          }
          // A new CA state is read by the next pass that issues (the gate lets it through).
          caNotifier?.onSnapshot(snapshot, ca?.stateEtag);
          dataplane?.hint();
        },
        stateDir,
        log,
      })
      : undefined;
    const trimLoop = canTrimMalloc()
      ? new Loop({
        name: "malloc-trim",
        intervalMs: MALLOC_TRIM_MS,
        maxBackoffMs: MAX_BACKOFF_MS,
        log,
        pass: () => {
          trimMalloc();
          return Promise.resolve({});
        },
      })
      : undefined;
    if (trimLoop) services.onChange(() => trimLoop.hint());
    let converged = false;
    let lastGeneration: number | undefined;
    const record = new NodeRecordWriter({
      store,
      nodeGroup,
      nodeId: f.nodeId,
      address: f.nodeAddress,
      podPrefix: f.ipv6Prefix,
      summary: () => ({ ...deployments.summary(), converged }),
      discovery: () => mesh?.recordExtras(),
      problem: () => mesh?.problem(),
    });
    const recordLoop = new Loop({
      name: "node-record",
      intervalMs: HEARTBEAT_MS,
      maxBackoffMs: MAX_BACKOFF_MS,
      log,
      pass: async () => {
        await record.write();
        return {};
      },
    });
    const deploymentsLoop = new Loop<AgentStatus>({
      name: "deployments",
      intervalMs,
      maxBackoffMs: MAX_BACKOFF_MS,
      // Its only hint is an index announcement (§7.9).
      hintDelayMs: ANNOUNCED_HINT_DELAY_MS,
      log,
      pass: async () => {
        const { status, unavailable } = await deployments.pass();
        return { status, backOff: unavailable };
      },
      status: (status) => {
        // The record follows a change of convergence within CONVERGED_RECORD_SPREAD_MS (spread
        // over the cluster), not at the next heartbeat.
        const changed = status.converged !== converged ||
          status.indexGeneration !== lastGeneration;
        converged = status.converged;
        lastGeneration = status.indexGeneration;
        if (changed) {
          recordLoop.hint({ delayMs: Math.random() * CONVERGED_RECORD_SPREAD_MS });
          trimLoop?.hint();
        }
        return writeStatus(stateDir, status);
      },
    });
    const loops: { start(): void; stop(): Promise<void> }[] = [deploymentsLoop, recordLoop];
    if (trimLoop) loops.push(trimLoop);
    if (identity) loops.push(identity.loop);
    if (f.dnsDir) {
      const dns = new DnsPublisher({
        services,
        dir: f.dnsDir,
        domain: DEFAULT_CLUSTER_DOMAIN,
        log,
      });
      const dnsLoop = new Loop<DnsStatus>({
        name: "dns",
        intervalMs,
        maxBackoffMs: MAX_BACKOFF_MS,
        log,
        pass: async () => ({ status: await dns.pass() }),
        status: (status) => writeJsonStatus(path.join(stateDir, "dns.json"), status),
      });
      // Whoever refreshed the Services (the mesh's timer too), the zone follows at once.
      services.onChange(() => dnsLoop.hint());
      loops.push(dnsLoop);
    }
    if (dataplane) {
      services.onChange(() => dataplane.hint());
      loops.push(dataplane);
    }
    if (telemetry) {
      loops.push(
        new Loop<TelemetryStatus>({
          name: "telemetry",
          intervalMs: TELEMETRY_INTERVAL_MS,
          maxBackoffMs: MAX_BACKOFF_MS,
          log,
          pass: async () => ({ status: await telemetry.pass() }),
          status: (status) => writeJsonStatus(path.join(stateDir, "telemetry.json"), status),
        }),
      );
    }
    log.info("agent started", { bucket: store.url, cluster, nodeGroup, intervalMs });
    for (const loop of loops) loop.start();
    if (mesh) {
      const joined = mesh;
      meshConnected = () => joined.connected();
      meshContends = () => joined.contends();
      meshSnapshot = () => joined.snapshot;
    }
    // The mesh is optional: a node whose mesh cannot start still runs its Pods.
    await mesh?.start().catch((err) =>
      log.error("mesh not started", { error: (err as Error).message })
    );
    await stopSignal();
    abort.abort();
    await mesh?.stop();
    await Promise.all(loops.map((loop) => loop.stop()));
    await identity?.release();
    // A clean shutdown removes the node's record; a crash leaves it to go stale.
    await record.remove().catch((err) =>
      log.warn("cannot remove the node record", { key: record.key, error: (err as Error).message })
    );
    log.info("agent stopped");
    return 0;
  },
};

/** `--once`: one deployments pass, its status written; 0 when converged. */
async function runOnce(options: {
  ctx: CommandContext;
  deployments: DeploymentsLoop;
  stateDir: string;
}): Promise<number> {
  const { ctx } = options;
  const { status } = await options.deployments.pass();
  await writeStatus(options.stateDir, status);
  if (status.converged) {
    ctx.out(`converged: ${status.desired.length} deployment(s) for NodeGroup ${status.nodeGroup}`);
    return 0;
  }
  for (const e of status.errors) ctx.err(`not converged: ${e}`);
  for (const p of status.pending) ctx.err(`pending: ${p.deployment}: ${p.reason}`);
  return 1;
}

/** Serves the loopback registry until `signal`; a failure to serve is logged, never fatal. */
function hostRegistry(options: {
  store: ObjectStore;
  listen: string;
  redirect: RegistryRedirect | undefined;
  signal: AbortSignal;
  log: Logger;
}): void {
  const { hostname, port } = parseListen(options.listen, { allowNonLoopback: true }); // checked
  try {
    serveRegistry({
      reader: new ImageReader({ store: options.store }),
      log: createLogger("registry"),
      redirect: options.redirect,
      hostname,
      port,
      signal: options.signal,
    });
  } catch (err) {
    // The node's Pods keep running without the registry; deployments still converge.
    options.log.error("registry not served", {
      listen: options.listen,
      error: (err as Error).message,
    });
  }
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

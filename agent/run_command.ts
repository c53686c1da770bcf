/** `podmin-agent run` and `podmin-agent status`. */

import { bucketUrl, type Command, requireString } from "../core/cli_kit.ts";
import { parseDuration } from "../core/duration.ts";
import { UsageError } from "../core/errors.ts";
import { createLogger } from "../core/log.ts";
import { checkClusterId, checkNodeGroup } from "../core/names.ts";
import { backoffMs, sleep } from "../core/retry.ts";
import { defaultRegion, openStore } from "../core/store_url.ts";
import { DeploymentsLoop } from "./deployments_loop.ts";
import { SecretsSync } from "./secrets_sync.ts";
import { readStatus, writeStatus } from "./status.ts";
import { AwsValueProvider } from "./value_provider.ts";
import { REGISTRY_LISTEN } from "../registry/defaults.ts";
import { ImageReader } from "../registry/image_reader.ts";
import { parseListen, serveRegistry } from "../registry/server.ts";

/** Default locations on a node. */
export const DEFAULTS = {
  manifestDir: "/etc/podmin/manifests",
  secretsDir: "/run/podmin/secrets",
  tlsDir: "/run/podmin/tls",
  stateDir: "/run/podmin/agent",
  interval: "2s",
  secretsInterval: "60s",
} as const;

const MAX_BACKOFF_MS = 30_000;

const run: Command = {
  name: "run",
  summary: "converge this node to the cluster bucket (the systemd service)",
  help: `Usage: podmin-agent run --bucket URL --cluster ID --nodegroup NAME [flags]

Polls deployments/index.json, writes this NodeGroup's Pods as kubelet static
Pod manifests and keeps their declared Parameter Store / Secrets Manager values
in tmpfs. A failed or invalid read never removes a running Pod.

Flags:
  --cluster ID              cluster id (parameter names /<cluster>/…)
  --nodegroup NAME          this node's NodeGroup
  --manifest-dir DIR        kubelet static Pod directory (default ${DEFAULTS.manifestDir})
  --secrets-dir DIR         tmpfs root of per-Pod values (default ${DEFAULTS.secretsDir})
  --tls-dir DIR             tmpfs root of per-Pod certificates (default ${DEFAULTS.tlsDir})
  --state-dir DIR           where status.json is written (default ${DEFAULTS.stateDir})
  --interval DURATION       index poll interval (default ${DEFAULTS.interval})
  --secrets-interval DUR    value refresh interval (default ${DEFAULTS.secretsInterval})
  --once                    one full pass; exit 0 when converged, 1 with the reasons otherwise
  --provider aws            cloud provider (only aws)
  --ipv6-prefix PREFIX      the node's delegated Pod prefix (used by the dataplane)
  --registry-listen ADDR    serve the loopback registry here (default ${REGISTRY_LISTEN});
                            "off" disables it; not started with --once

Example:
  podmin-agent run --bucket s3://my-cluster --cluster prod --nodegroup workers --once`,
  options: {
    cluster: { type: "string" },
    nodegroup: { type: "string" },
    "manifest-dir": { type: "string", default: DEFAULTS.manifestDir },
    "secrets-dir": { type: "string", default: DEFAULTS.secretsDir },
    "tls-dir": { type: "string", default: DEFAULTS.tlsDir },
    "state-dir": { type: "string", default: DEFAULTS.stateDir },
    interval: { type: "string", default: DEFAULTS.interval },
    "secrets-interval": { type: "string", default: DEFAULTS.secretsInterval },
    once: { type: "boolean", default: false },
    provider: { type: "string", default: "aws" },
    "ipv6-prefix": { type: "string" },
    "registry-listen": { type: "string", default: REGISTRY_LISTEN },
  },
  async run(ctx) {
    const v = ctx.values as Record<string, string>;
    const cluster = checkClusterId(
      requireString(ctx, "cluster", "the cluster id, e.g. --cluster prod"),
    );
    const nodeGroup = checkNodeGroup(requireString(ctx, "nodegroup", "e.g. --nodegroup workers"));
    if (v.provider !== "aws") {
      throw new UsageError(`unsupported provider ${JSON.stringify(v.provider)}`, {
        hint: "use --provider aws",
      });
    }
    const intervalMs = parseDuration(v.interval, "--interval");
    const region = v.region ?? defaultRegion();
    const store = openStore(bucketUrl(ctx), { region });
    const log = createLogger("agent");
    const secrets = new SecretsSync({
      cluster,
      secretsDir: v["secrets-dir"],
      provider: new AwsValueProvider({ region }),
      refreshMs: parseDuration(v["secrets-interval"], "--secrets-interval"),
      log,
    });
    const loop = new DeploymentsLoop({
      store,
      nodeGroup,
      manifestDir: v["manifest-dir"],
      secretsDir: v["secrets-dir"],
      tlsDir: v["tls-dir"],
      secrets,
      log,
    });

    if (ctx.values.once) {
      const { status } = await loop.pass();
      await writeStatus(v["state-dir"], status);
      if (status.converged) {
        ctx.out(`converged: ${status.desired.length} deployment(s) for NodeGroup ${nodeGroup}`);
        return 0;
      }
      for (const e of status.errors) ctx.err(`not converged: ${e}`);
      for (const p of status.pending) ctx.err(`pending: ${p.deployment}: ${p.reason}`);
      return 1;
    }

    const abort = new AbortController();
    if (v["registry-listen"] !== "off") {
      const { hostname, port } = parseListen(v["registry-listen"]);
      try {
        serveRegistry({
          reader: new ImageReader({ store }),
          log: createLogger("registry"),
          hostname,
          port,
          signal: abort.signal,
        });
      } catch (err) {
        // The node's Pods keep running without the registry; deployments still converge.
        log.error("registry not served", {
          listen: v["registry-listen"],
          error: (err as Error).message,
        });
      }
    }

    let stopping = false;
    const stop = () => {
      stopping = true;
      abort.abort();
    };
    Deno.addSignalListener("SIGTERM", stop);
    Deno.addSignalListener("SIGINT", stop);
    log.info("agent started", { bucket: store.url, cluster, nodeGroup, intervalMs });
    let failures = 0;
    while (!stopping) {
      let status, unavailable;
      try {
        ({ status, unavailable } = await loop.pass());
      } catch (err) {
        // A bug or a local fault must not kill the agent (and with it the node's registry).
        log.error("pass failed", { error: (err as Error).message, stack: (err as Error).stack });
        failures++;
        await sleep(Math.min(MAX_BACKOFF_MS, intervalMs * 2 ** Math.min(failures, 5)));
        continue;
      }
      await writeStatus(v["state-dir"], status).catch((err) =>
        log.warn("cannot write status", { error: (err as Error).message })
      );
      failures = unavailable ? failures + 1 : 0;
      const wait = failures
        ? Math.max(
          intervalMs,
          backoffMs({ attempts: 0, baseMs: intervalMs, maxMs: MAX_BACKOFF_MS }, failures),
        )
        : intervalMs;
      for (let waited = 0; waited < wait && !stopping; waited += 100) {
        await sleep(Math.min(100, wait - waited));
      }
    }
    log.info("agent stopped");
    return 0;
  },
};

const status: Command = {
  name: "status",
  summary: "print the agent's last pass: desired vs written Pods, last sync, errors",
  help: `Usage: podmin-agent status [--state-dir DIR] [-o text|json]

Reads the status the running agent writes after every pass.`,
  options: {
    "state-dir": { type: "string", default: DEFAULTS.stateDir },
    output: { type: "string", short: "o", default: "text" },
  },
  async run(ctx) {
    const dir = ctx.values["state-dir"] as string;
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
    for (const e of s.errors) ctx.out(`Error:       ${e}`);
    return s.converged ? 0 : 1;
  },
};

/** The agent's run and status commands. */
export const runCommands: Command[] = [run, status];

/** The parts `podmin-agent run` wires together, built from its flags: key sources, telemetry. */

import { UsageError } from "../core/kit/errors.ts";
import type { Logger } from "../core/kit/log.ts";
import type { ObjectStore } from "../core/store/object_store.ts";
import { clusterCaName } from "../core/model/provider_names.ts";
import type { RetryPolicy } from "../core/kit/retry.ts";
import { openStore } from "../core/store/store_url.ts";
import { type CaKeySource, fileCaKey, ssmCaKey } from "./identity/ca_key.ts";
import type { CaView } from "./identity/ca_view.ts";
import { TelemetryIdentity } from "./identity/telemetry.ts";
import { type ClusterCa, parseClusterCa } from "./mesh/node_tls.ts";
import type { CaKeyFlag, RunFlags } from "./run_flags.ts";
import type { AwsValueProvider } from "./secrets/value_provider.ts";

/** The cluster CA of `--cluster-ca` (certificate and key), in memory. */
export async function loadClusterCa(options: {
  flag: CaKeyFlag;
  provider: AwsValueProvider;
  cluster: string;
}): Promise<ClusterCa> {
  const { flag } = options;
  if (flag.kind === "off") throw new UsageError("--cluster-ca off: the mesh needs the cluster CA");
  const pem = flag.kind === "file"
    ? await Deno.readTextFile(flag.path)
    : new TextDecoder().decode(await options.provider.fetch("ssm", clusterCaName(options.cluster)));
  return await parseClusterCa(pem);
}

/** The Fluent Bit identity and OTel CA bundle keeper, when either is asked for. */
export function telemetryIdentity(options: {
  f: RunFlags;
  retry: RetryPolicy;
  /** The maintenance pass interval (the OTel CA bundle is re-read as often). */
  intervalMs: number;
  ca?: CaView;
  region: string;
  log: Logger;
}): TelemetryIdentity | undefined {
  const { f, ca, region, log, retry } = options;
  if (!f.fluentBitIdentity && !f.otelCa) return undefined;
  if (f.fluentBitIdentity && !ca) {
    throw new UsageError("--fluent-bit-identity needs the workload CA key", {
      hint: "drop --workload-ca-key off, or drop --fluent-bit-identity",
    });
  }
  let otelCa: { store: ObjectStore; key: string; refreshMs: number } | undefined;
  if (f.otelCa) {
    otelCa = {
      store: openStore(`s3://${f.otelCa.bucket}`, { region, retry }),
      key: f.otelCa.key,
      refreshMs: options.intervalMs,
    };
  }
  return new TelemetryIdentity({
    cluster: f.cluster,
    nodeGroup: f.nodeGroup,
    nodeId: f.nodeId,
    dir: f.telemetryDir,
    ca: f.fluentBitIdentity ? ca : undefined,
    otelCa,
    restartFluentBit: () => systemctlRestart(f.fluentBitUnit),
    log,
  });
}

/** `systemctl restart UNIT`; throws with systemctl's message when it fails. */
async function systemctlRestart(unit: string): Promise<void> {
  const out = await new Deno.Command("systemctl", {
    args: ["restart", unit],
    stdin: "null",
    stdout: "null",
    stderr: "piped",
  }).output();
  if (out.code !== 0) {
    throw new Error(
      `systemctl restart ${unit} exited ${out.code}: ${
        new TextDecoder().decode(out.stderr).trim()
      }`,
    );
  }
}

/** The workload CA key source of `--workload-ca-key`, or undefined for "off". */
export function caKeySource(options: {
  flag: CaKeyFlag;
  provider: AwsValueProvider;
  cluster: string;
}): CaKeySource | undefined {
  const { flag } = options;
  if (flag.kind === "off") return undefined;
  if (flag.kind === "file") return fileCaKey(flag.path);
  return ssmCaKey({ provider: options.provider, cluster: options.cluster });
}

/**
 * The identity parts of `podmin-agent run`: the workload CA (the shared CA view, the Pod
 * certificates the deployments pass issues, the CA maintenance loop) and the telemetry identity
 * (Fluent Bit's client certificate and the OTel CA bundle).
 */

import { UsageError } from "../../core/kit/errors.ts";
import type { RetryPolicy } from "../../core/kit/retry.ts";
import type { ObjectStore } from "../../core/store/object_store.ts";
import { parseS3ObjectUrl, type S3Object } from "../../core/store/object_url.ts";
import { parseDuration } from "../../core/kit/duration.ts";
import { openStore } from "../../core/store/store_url.ts";
import { Loop } from "../loop.ts";
import type { IndexNotifier } from "../index_notifier.ts";
import type { FlagSpecs, FlagValues, Part, PartContext } from "../part.ts";
import type { ServicesSource } from "../services/part.ts";
import { writeJsonStatus } from "../status_file.ts";
import * as path from "node:path";
import { type CaKeySource, parseCaKeyFlag } from "./ca_key.ts";
import { CaView } from "./ca_view.ts";
import { IDENTITY_DEFAULTS, identityCaLoop } from "./identity_loop.ts";
import { PodCertificates } from "./pod_certificates.ts";
import { TelemetryIdentity, type TelemetryStatus } from "./telemetry_identity.ts";

/** The telemetry part's flags. */
export const TELEMETRY_FLAGS = {
  "telemetry-dir": {
    type: "string",
    default: "/run/podmin/telemetry",
    arg: "DIR",
    help: "tmpfs subtree of the Fluent Bit identity and the OTel CA\nbundle (default {default})",
  },
  "fluent-bit-identity": {
    type: "boolean",
    help: "keep a client-only Fluent Bit certificate in\n" +
      "<telemetry-dir>/client (validated every pass, renewed at\n" +
      "half-life; Fluent Bit restarted after each swap)",
  },
  "otel-ca": {
    type: "string",
    arg: "URL",
    help: "keep the OTLP server CA bundle s3://BUCKET/KEY in\n" +
      "<telemetry-dir>/otel-ca (last good kept on failures)",
  },
  "fluent-bit-unit": {
    type: "string",
    default: "podmin-fluent-bit.service",
    arg: "UNIT",
    help: "systemd unit restarted after a swap (default\n{default})",
  },
} as const satisfies FlagSpecs;

/** The telemetry part's flags, checked (`--otel-ca` parsed once, here). */
export function telemetryFlags(v: FlagValues<typeof TELEMETRY_FLAGS>) {
  return {
    dir: v["telemetry-dir"],
    fluentBitIdentity: v["fluent-bit-identity"],
    otelCa: v["otel-ca"] === undefined ? undefined : parseS3ObjectUrl(v["otel-ca"], "--otel-ca"),
    fluentBitUnit: v["fluent-bit-unit"],
  };
}

/** The workload CA part's flags. */
export const IDENTITY_FLAGS = {
  "tls-dir": {
    type: "string",
    default: "/run/podmin/tls",
    arg: "DIR",
    help: "tmpfs root of per-Pod certificates (default {default})",
  },
  "workload-ca-key": {
    type: "string",
    default: "ssm",
    arg: "SOURCE",
    help: 'the workload CA key: "{default}" (default,\n' +
      '/<cluster>/_system/workload-ca-key), "file:PATH" (a PEM on\n' +
      'tmpfs, as podmin local uses) or "off" (no Pod certificates)',
  },
  "workload-ca-publish": {
    type: "string",
    arg: "URL",
    help: "publish every retained workload CA certificate as PEM to\n" +
      "this exact s3://BUCKET/KEY before CA promotion",
  },
  "identity-interval": {
    type: "string",
    default: IDENTITY_DEFAULTS.interval,
    arg: "DUR",
    help: "workload CA maintenance pass interval (default {default})",
  },
  "identity-lease": {
    type: "string",
    default: IDENTITY_DEFAULTS.lease,
    arg: "DUR",
    help: "CA leader lease duration (default {default}; at\nleast 3 intervals)",
  },
  "workload-ca-lifetime": {
    type: "string",
    default: IDENTITY_DEFAULTS.caLifetime,
    arg: "DUR",
    help: "lifetime of a new workload CA certificate (default\n" +
      "{default}); rotation starts at a third left",
  },
  "workload-ca-trust-window": {
    type: "string",
    default: IDENTITY_DEFAULTS.trustWindow,
    arg: "DUR",
    help: "how long agents may use a CA state they read before\n" +
      "promotion may rely on it (default {default})",
  },
  "clock-skew": {
    type: "string",
    default: IDENTITY_DEFAULTS.clockSkew,
    arg: "DUR",
    help: "bound on clock differences between nodes (default {default})",
  },
} as const satisfies FlagSpecs;

/** The workload CA part's flags, checked (`--workload-ca-publish` parsed once, here). */
export function identityFlags(v: FlagValues<typeof IDENTITY_FLAGS>) {
  const duration = (
    flag:
      | "identity-interval"
      | "identity-lease"
      | "workload-ca-lifetime"
      | "workload-ca-trust-window"
      | "clock-skew",
  ) => parseDuration(v[flag], `--${flag}`);
  return {
    workloadCaKey: parseCaKeyFlag(v["workload-ca-key"]),
    publish: v["workload-ca-publish"] === undefined
      ? undefined
      : parseS3ObjectUrl(v["workload-ca-publish"], "--workload-ca-publish"),
    durations: {
      intervalMs: duration("identity-interval"),
      leaseMs: duration("identity-lease"),
      caLifetimeMs: duration("workload-ca-lifetime"),
      trustWindowMs: duration("workload-ca-trust-window"),
      clockSkewMs: duration("clock-skew"),
    },
  };
}

/** How often the CA state is re-read (spec §8.5: the trust window covers it). */
const CA_STATE_REFRESH_MS = 30_000;
/** The telemetry maintenance pass (the OTel CA bundle is re-read as often). */
const TELEMETRY_INTERVAL_MS = 60_000;
const MAX_BACKOFF_MS = 30_000;

/** Options of `identityPart`. */
export interface IdentityPartOptions {
  context: PartContext;
  cluster: string;
  nodeId: string;
  /** The workload CA key; no part without it (`--workload-ca-key off`). */
  caKey?: CaKeySource;
  /** The CA state's announcements, when reads follow them. */
  notifier?: IndexNotifier;
  services: ServicesSource;
  tlsDir: string;
  /** `--workload-ca-publish`. */
  publish?: S3Object;
  region: string;
  /** Retry policy of the external bucket's store. */
  retry: RetryPolicy;
  /** The identity-ca loop's durations (`--identity-*`, `--workload-ca-*`, `--clock-skew`). */
  durations: {
    intervalMs: number;
    leaseMs: number;
    caLifetimeMs: number;
    trustWindowMs: number;
    clockSkewMs: number;
  };
  /** With the mesh: whether this agent contends for the CA lease now (`ContentionGate`). */
  contend?: () => boolean;
}

/** The workload CA part. */
export interface IdentityPart extends Part {
  ca: CaView;
  /** How often the CA state is re-read (its announcement poll follows it). */
  stateRefreshMs: number;
  certificates: PodCertificates;
}

/** The workload CA part, or undefined without a key. */
export function identityPart(o: IdentityPartOptions): IdentityPart | undefined {
  const { caKey, notifier } = o;
  if (!caKey) return undefined;
  const { store, hub, stateDir, log } = o.context;
  const services = o.services.reader();
  const ca = new CaView({
    store,
    caKey,
    refreshMs: CA_STATE_REFRESH_MS,
    gate: notifier && ((held) => notifier.shouldRead(held)),
  });
  // A new CA state is read by the next pass that issues (the gate lets it through).
  if (notifier) hub.on("meshSnapshot", (snapshot) => notifier.onSnapshot(snapshot, ca.stateEtag));
  const certificates = new PodCertificates({
    cluster: o.cluster,
    tlsDir: o.tlsDir,
    store,
    caKey,
    ca,
    services,
    refreshServices: !o.services.loopRefreshes,
    log,
  });
  const identity = identityCaLoop({
    store,
    cluster: o.cluster,
    nodeId: o.nodeId,
    keySource: caKey,
    publish: o.publish,
    region: o.region,
    retry: o.retry,
    ...o.durations,
    stateDir,
    contend: o.contend,
    log,
  });
  return {
    name: "identity-ca",
    statusFile: "identity.json",
    ca,
    certificates,
    stateRefreshMs: CA_STATE_REFRESH_MS,
    start: () => identity.loop.start(),
    stop: () => identity.loop.stop(),
    // One CA pass first, so a single node bootstraps its workload CA in the same run.
    once: () => identity.once(),
    release: () => identity.release(),
  };
}

/** Options of `telemetryPart`. */
export interface TelemetryPartOptions {
  context: PartContext;
  cluster: string;
  nodeGroup: string;
  nodeId: string;
  /** `--telemetry-dir`. */
  dir: string;
  /** `--fluent-bit-identity`. */
  fluentBitIdentity: boolean;
  /** `--otel-ca`. */
  otelCa?: S3Object;
  /** `--fluent-bit-unit`. */
  fluentBitUnit: string;
  /** The workload CA, when the agent keeps one. */
  ca?: CaView;
  region: string;
  retry: RetryPolicy;
}

/** The Fluent Bit identity and OTel CA bundle keeper, when either is asked for. */
export function telemetryPart(o: TelemetryPartOptions): Part | undefined {
  if (!o.fluentBitIdentity && !o.otelCa) return undefined;
  if (o.fluentBitIdentity && !o.ca) {
    throw new UsageError("--fluent-bit-identity needs the workload CA key", {
      hint: "drop --workload-ca-key off, or drop --fluent-bit-identity",
    });
  }
  const { stateDir, log } = o.context;
  let otelCa: { store: ObjectStore; key: string; refreshMs: number } | undefined;
  if (o.otelCa) {
    otelCa = {
      store: openStore(`s3://${o.otelCa.bucket}`, { region: o.region, retry: o.retry }),
      key: o.otelCa.key,
      refreshMs: TELEMETRY_INTERVAL_MS,
    };
  }
  const telemetry = new TelemetryIdentity({
    cluster: o.cluster,
    nodeGroup: o.nodeGroup,
    nodeId: o.nodeId,
    dir: o.dir,
    ca: o.fluentBitIdentity ? o.ca : undefined,
    otelCa,
    restartFluentBit: () => systemctlRestart(o.fluentBitUnit),
    log,
  });
  const loop = new Loop<TelemetryStatus>({
    name: "telemetry",
    intervalMs: TELEMETRY_INTERVAL_MS,
    maxBackoffMs: MAX_BACKOFF_MS,
    log,
    pass: async () => ({ status: await telemetry.pass() }),
    status: (status) => writeJsonStatus(path.join(stateDir, "telemetry.json"), status),
  });
  return {
    name: "telemetry",
    statusFile: "telemetry.json",
    start: () => loop.start(),
    stop: () => loop.stop(),
  };
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

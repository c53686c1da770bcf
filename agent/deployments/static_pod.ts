/**
 * Renders a Deployment into the kubelet static Pod manifest this node runs:
 * Podmin's labels and ownership annotations, and read-only hostPath mounts of
 * the Pod's provider values and workload certificate generation.
 */

import type { Container, Pod, Volume } from "kubernetes-types/core/v1.d.ts";
import { canonicalJson } from "../../core/kit/canonical_json.ts";
import { type Deployment, TLS_MOUNT_PATH, VALUES_MOUNT_PATH } from "../../core/model/resources.ts";
import { podDirName } from "../pod_dir.ts";

/** The annotation that marks a manifest as written by the agent. */
export const OWNER_ANNOTATION = "podmin.dev/owner";
export const OWNER_VALUE = "podmin-agent";
/** The annotation holding the spec digest the manifest was rendered from. */
export const SPEC_ANNOTATION = "podmin.dev/spec";

/**
 * A Deployment's static Pod slot on a node (spec §7.1, "Surge"): `""` is
 * `podmin_<namespace>_<name>.json` running Pod `<name>` (a Deployment's first spec on the node);
 * a rollout starts the new spec beside the running Pod in the slot named after the new spec
 * (`slotOf`): `podmin_<namespace>_<name>.<8 hex>.json` running Pod `<name>-<8 hex>`. A new Pod
 * never takes the name of one kubelet may still be stopping (kubelet holds a static Pod back
 * while another of the same name terminates, up to its grace period).
 */
export type Slot = string;

/** The slot a spec `sha256:<hex>` surges into: the first 8 hex digits of its digest. */
export function slotOf(spec: string): Slot {
  return spec.slice("sha256:".length, "sha256:".length + 8);
}

/** The manifest file name of a Deployment's slot: `podmin_<namespace>_<name>[.<slot>].json`. */
export function manifestFileName(namespace: string, name: string, slot: Slot = ""): string {
  return `podmin_${namespace}_${name}${slot ? `.${slot}` : ""}.json`;
}

/** The static Pod's name in a slot: `<name>` or `<name>-<slot>` (kubelet appends `-<node>`). */
export function slotPodName(name: string, slot: Slot): string {
  return slot ? `${name}-${slot}` : name;
}

/** Matches names of files the agent may own. */
export const MANIFEST_FILE_PATTERN =
  /^podmin_[a-z0-9-]{1,63}_[a-z0-9-]{1,63}(\.[0-9a-f]{8})?\.json$/;

/** The Deployment (`namespace/name`) and slot a manifest file is for; undefined for others. */
export function parseManifestFileName(file: string): { ref: string; slot: Slot } | undefined {
  const m = /^podmin_([a-z0-9-]{1,63})_([a-z0-9-]{1,63})(?:\.([0-9a-f]{8}))?\.json$/.exec(file);
  return m ? { ref: `${m[1]}/${m[2]}`, slot: m[3] ?? "" } : undefined;
}

/** Options of `renderStaticPod`. */
export interface RenderOptions {
  deployment: Deployment;
  /** `sha256:<hex>` the deployment was read from. */
  specRef: string;
  /** Host directory holding per-Pod value directories. */
  secretsDir: string;
  /** Host directory holding per-Pod certificate directories. */
  tlsDir: string;
  /** The slot it runs in (default `""`); every slot mounts the Deployment's values and certificate. */
  slot?: Slot;
}

/** Renders the Pod object. */
export function renderStaticPod(options: RenderOptions): Pod {
  const d = options.deployment;
  const { namespace, name } = d.metadata;
  const dir = podDirName(namespace, name);
  const volumes: Volume[] = [...(d.spec.template.spec.volumes ?? [])];
  const mounts = [{ name: "podmin-tls", mountPath: TLS_MOUNT_PATH, readOnly: true }];
  volumes.push({
    name: "podmin-tls",
    hostPath: { path: `${options.tlsDir}/${dir}`, type: "DirectoryOrCreate" },
  });
  if (d.spec.secrets?.length) {
    volumes.push({
      name: "podmin-values",
      hostPath: { path: `${options.secretsDir}/${dir}`, type: "Directory" },
    });
    mounts.push({ name: "podmin-values", mountPath: VALUES_MOUNT_PATH, readOnly: true });
  }
  const withMounts = (c: Container): Container => ({
    ...c,
    volumeMounts: [...(c.volumeMounts ?? []), ...mounts],
  });
  const spec = d.spec.template.spec;
  return {
    apiVersion: "v1",
    kind: "Pod",
    metadata: {
      name: slotPodName(name, options.slot ?? ""),
      namespace,
      labels: {
        ...(d.spec.template.metadata?.labels ?? {}),
        "podmin.dev/namespace": namespace,
        "podmin.dev/deployment": name,
        "podmin.dev/nodegroup": d.spec.nodeGroup,
      },
      annotations: {
        ...(d.spec.template.metadata?.annotations ?? {}),
        [OWNER_ANNOTATION]: OWNER_VALUE,
        [SPEC_ANNOTATION]: options.specRef,
      },
    },
    spec: {
      ...spec,
      containers: spec.containers.map(withMounts),
      ...(spec.initContainers ? { initContainers: spec.initContainers.map(withMounts) } : {}),
      volumes,
    },
  };
}

/** The manifest file's bytes: canonical JSON (kubelet reads JSON as YAML) and a newline. */
export function manifestBytes(pod: Pod): Uint8Array {
  return new TextEncoder().encode(canonicalJson(pod) + "\n");
}

/** The spec digest a manifest was rendered from (`SPEC_ANNOTATION`), if it carries one. */
export function manifestSpec(bytes: Uint8Array): string | undefined {
  try {
    const pod = JSON.parse(new TextDecoder().decode(bytes)) as Pod;
    const spec = pod?.metadata?.annotations?.[SPEC_ANNOTATION];
    return typeof spec === "string" ? spec : undefined;
  } catch {
    return undefined;
  }
}

/** True when manifest bytes carry the owner annotation. */
export function isOwnedManifest(bytes: Uint8Array): boolean {
  try {
    const pod = JSON.parse(new TextDecoder().decode(bytes)) as Pod;
    return pod?.metadata?.annotations?.[OWNER_ANNOTATION] === OWNER_VALUE;
  } catch {
    return false;
  }
}

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

/** The manifest file name of a Deployment: `podmin_<namespace>_<name>.json`. */
export function manifestFileName(namespace: string, name: string): string {
  return `podmin_${namespace}_${name}.json`;
}

/** Matches names of files the agent may own. */
export const MANIFEST_FILE_PATTERN = /^podmin_[a-z0-9-]{1,63}_[a-z0-9-]{1,63}\.json$/;

/** Options of `renderStaticPod`. */
export interface RenderOptions {
  deployment: Deployment;
  /** `sha256:<hex>` the deployment was read from. */
  specRef: string;
  /** Host directory holding per-Pod value directories. */
  secretsDir: string;
  /** Host directory holding per-Pod certificate directories. */
  tlsDir: string;
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
      name,
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

/** True when manifest bytes carry the owner annotation. */
export function isOwnedManifest(bytes: Uint8Array): boolean {
  try {
    const pod = JSON.parse(new TextDecoder().decode(bytes)) as Pod;
    return pod?.metadata?.annotations?.[OWNER_ANNOTATION] === OWNER_VALUE;
  } catch {
    return false;
  }
}

/**
 * The operator's resources: `kind: Deployment` and `kind: Service` of
 * `apiVersion: podmin.dev/v1`. Validation reports every problem with its field
 * path; normalisation fills defaults so equal intent gives equal bytes (and so
 * an equal content address).
 */

import type { Container, PodSpec, Volume } from "kubernetes-types/core/v1.d.ts";
import { posix } from "node:path";
import { type Problem, ValidationError } from "../kit/errors.ts";
import { DEFAULT_NAMESPACE, isDnsLabel } from "./names.ts";
import { compareCodeUnits } from "../kit/canonical_json.ts";
import { baselineViolations, POD_SECURITY_LEVELS } from "./pod_security.ts";
import { checkRollout, type Rollout } from "./rollout.ts";

/** The only apiVersion this release reads and writes. */
export const API_VERSION = "podmin.dev/v1";

/** Where declared provider values are mounted in every container. */
export const VALUES_MOUNT_PATH = "/var/run/secrets/podmin.dev/values";
/** Where the workload certificate generation is mounted in every container. */
export const TLS_MOUNT_PATH = "/var/run/secrets/podmin.dev/tls";
/** Volume names Podmin adds to every Pod; operators may not use them. */
export const RESERVED_VOLUMES = ["podmin-values", "podmin-tls"] as const;

/** A provider value a Deployment declares; its name is /<cluster>/<namespace>/<name>/<key>. */
export interface SecretRef {
  key: string;
  from: "ssm" | "secretsmanager";
}

/** Metadata of an operator resource. */
export interface ResourceMetadata {
  name: string;
  namespace: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
}

/** A normalised Deployment. */
export interface Deployment {
  apiVersion: typeof API_VERSION;
  kind: "Deployment";
  metadata: ResourceMetadata;
  spec: {
    nodeGroup: string;
    secrets?: SecretRef[];
    /** `privileged` opts out of the baseline Pod security level (absent: baseline). */
    podSecurity?: "privileged";
    /** How a new spec replaces the running Pods (`rollout.ts`); absent: every default. */
    rollout?: Rollout;
    template: {
      metadata?: { labels?: Record<string, string>; annotations?: Record<string, string> };
      spec: PodSpec;
    };
  };
}

/** A Service port. */
export interface ServicePort {
  name?: string;
  port: number;
  targetPort: number;
  protocol: "TCP" | "UDP";
}

/** A normalised Service. */
export interface Service {
  apiVersion: typeof API_VERSION;
  kind: "Service";
  metadata: ResourceMetadata;
  spec: { selector: Record<string, string>; ports: ServicePort[] };
}

/** Either resource kind. */
export type Resource = Deployment | Service;

/** PodSpec fields static Pods support. */
const POD_SPEC_FIELDS = new Set([
  "containers",
  "initContainers",
  "volumes",
  "hostNetwork",
  "hostPID",
  "hostIPC",
  "shareProcessNamespace",
  "restartPolicy",
  "dnsPolicy",
  "dnsConfig",
  "securityContext",
  "terminationGracePeriodSeconds",
  "activeDeadlineSeconds",
  "hostname",
  "subdomain",
  "hostAliases",
  "priority",
  "priorityClassName",
  "runtimeClassName",
  "os",
]);
/** Fields that need an API server; the reason is part of the error. */
const POD_SPEC_REJECTED: Record<string, string> = {
  serviceAccountName: "static Pods cannot reference ServiceAccounts",
  serviceAccount: "static Pods cannot reference ServiceAccounts",
  nodeName: "the NodeGroup (spec.nodeGroup) decides placement",
  nodeSelector: "the NodeGroup (spec.nodeGroup) decides placement",
  affinity: "the NodeGroup (spec.nodeGroup) decides placement",
  imagePullSecrets: "static Pods cannot reference Secrets; images come from the cluster registry",
  ephemeralContainers: "not supported by static Pods",
  resourceClaims: "not supported by static Pods",
  schedulingGates: "there is no scheduler",
};
const VOLUME_SOURCES = new Set(["emptyDir", "hostPath", "downwardAPI"]);
const CONTAINER_REJECTED: Record<string, string> = {
  envFrom: "ConfigMaps and Secrets need an API server; declare spec.secrets instead",
};
const LABEL_KEY =
  /^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$/;
const LABEL_VALUE = /^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$/;

/** Collects problems with their field paths. */
class Problems {
  readonly list: string[] = [];
  readonly entries: Problem[] = [];
  add(path: string, message: string): void {
    this.list.push(path ? `${path}: ${message}` : message);
    this.entries.push({ path, message });
  }
  /** A field that is absent ("required; RULE") or present with a bad value (echoed). */
  invalid(path: string, value: unknown, rule: string): void {
    this.add(
      path,
      value === undefined ? `required; ${rule}` : `invalid value ${shown(value)}; ${rule}`,
    );
  }
}

/** A value as an error message echoes it: JSON, at most 60 characters. */
function shown(value: unknown): string {
  const text = JSON.stringify(value) ?? String(value);
  return text.length > 60 ? `${text.slice(0, 57)}...` : text;
}

type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => v !== null && typeof v === "object" && !Array.isArray(v);

function checkKeys(p: Problems, path: string, value: Obj, allowed: string[]): void {
  for (const k of Object.keys(value)) {
    if (!allowed.includes(k)) {
      p.add(path ? `${path}.${k}` : k, `unknown field (allowed: ${allowed.join(", ")})`);
    }
  }
}

function checkLabels(
  p: Problems,
  path: string,
  v: unknown,
  required = false,
): Record<string, string> | undefined {
  if (v === undefined) {
    if (required) p.add(path, "required");
    return undefined;
  }
  if (!isObj(v)) {
    p.add(path, "must be a map of strings");
    return undefined;
  }
  for (const [k, val] of Object.entries(v)) {
    if (!LABEL_KEY.test(k) || k.length > 317) p.add(`${path}.${k}`, "invalid label key");
    if (typeof val !== "string" || !LABEL_VALUE.test(val)) {
      p.add(`${path}.${k}`, "label value must be a string of up to 63 [A-Za-z0-9-_.]");
    }
  }
  if (required && Object.keys(v).length === 0) p.add(path, "must not be empty");
  return v as Record<string, string>;
}

/** Reports keys with the reserved `podmin.dev/` prefix. */
function checkUnreserved(p: Problems, path: string, map: Record<string, string> | undefined): void {
  for (const k of Object.keys(map ?? {})) {
    if (k.startsWith("podmin.dev/")) p.add(`${path}.${k}`, "the podmin.dev/ prefix is reserved");
  }
}

function checkAnnotations(
  p: Problems,
  path: string,
  v: unknown,
): Record<string, string> | undefined {
  if (v === undefined) return undefined;
  if (!isObj(v)) {
    p.add(path, "must be a map of strings");
    return undefined;
  }
  for (const [k, val] of Object.entries(v)) {
    if (!LABEL_KEY.test(k) || k.length > 317) p.add(`${path}.${k}`, "invalid annotation key");
    if (typeof val !== "string") p.add(`${path}.${k}`, "annotation value must be a string");
  }
  checkUnreserved(p, path, v as Record<string, string>);
  return v as Record<string, string>;
}

/** Paths Podmin mounts into containers; operator mounts there (or above) are refused. */
const RESERVED_MOUNT_ROOTS = ["/var/run/secrets/podmin.dev", "/run/secrets/podmin.dev"];

/** True when `mountPath`, normalized (`//`, `.`, `..`), is a reserved path or lies under one. */
export function isReservedMountPath(mountPath: string): boolean {
  const normalized = posix.normalize(mountPath.replace(/\/+/g, "/")).replace(/\/+$/, "") || "/";
  return RESERVED_MOUNT_ROOTS.some((root) =>
    normalized === root || normalized.startsWith(root + "/")
  );
}

function checkMetadata(p: Problems, v: unknown): Deployment["metadata"] {
  if (!isObj(v)) {
    p.add("metadata", "required");
    return { name: "", namespace: DEFAULT_NAMESPACE };
  }
  checkKeys(p, "metadata", v, ["name", "namespace", "labels", "annotations"]);
  if (!isDnsLabel(v.name)) {
    p.invalid("metadata.name", v.name, "1-63 lower-case letters, digits and '-'");
  }
  const namespace = v.namespace ?? DEFAULT_NAMESPACE;
  if (!isDnsLabel(namespace)) {
    p.invalid(
      "metadata.namespace",
      namespace,
      "1-63 lower-case letters, digits and '-' (and never _system)",
    );
  }
  const labels = checkLabels(p, "metadata.labels", v.labels);
  checkUnreserved(p, "metadata.labels", labels);
  const annotations = checkAnnotations(p, "metadata.annotations", v.annotations);
  return {
    name: String(v.name ?? ""),
    namespace: String(namespace),
    ...(labels && Object.keys(labels).length ? { labels } : {}),
    ...(annotations && Object.keys(annotations).length ? { annotations } : {}),
  };
}

function checkContainer(p: Problems, path: string, c: unknown, volumes: Set<string>): void {
  if (!isObj(c)) return p.add(path, "must be an object");
  for (const [k, why] of Object.entries(CONTAINER_REJECTED)) if (k in c) p.add(`${path}.${k}`, why);
  if (!isDnsLabel(c.name)) p.invalid(`${path}.name`, c.name, "a DNS label");
  if (typeof c.image !== "string" || c.image.trim() === "" || /\s/.test(c.image)) {
    p.invalid(`${path}.image`, c.image, "an image reference without spaces");
  }
  const env = c.env;
  if (env !== undefined) {
    if (!Array.isArray(env)) p.add(`${path}.env`, "must be a list");
    else {
      env.forEach((e, i) => {
        if (!isObj(e) || typeof e.name !== "string" || e.name === "") {
          return p.add(`${path}.env[${i}].name`, "required");
        }
        const from = e.valueFrom;
        if (from === undefined) return;
        if (isObj(from) && ("secretKeyRef" in from || "configMapKeyRef" in from)) {
          p.add(
            `${path}.env[${i}].valueFrom`,
            "Secrets and ConfigMaps need an API server; declare spec.secrets",
          );
        } else if (
          !isObj(from) || Object.keys(from).length !== 1 ||
          !("fieldRef" in from || "resourceFieldRef" in from)
        ) {
          p.add(
            `${path}.env[${i}].valueFrom`,
            "exactly one source: fieldRef or resourceFieldRef (what a static Pod can resolve)",
          );
        }
      });
    }
  }
  const ports = c.ports;
  if (ports !== undefined) {
    if (!Array.isArray(ports)) p.add(`${path}.ports`, "must be a list");
    else {
      ports.forEach((port, i) => {
        if (!isObj(port) || !isPort(port.containerPort)) {
          p.invalid(
            `${path}.ports[${i}].containerPort`,
            isObj(port) ? port.containerPort : undefined,
            "1-65535",
          );
        } else if (
          port.protocol !== undefined && port.protocol !== "TCP" && port.protocol !== "UDP"
        ) {
          p.add(`${path}.ports[${i}].protocol`, "TCP or UDP");
        }
      });
    }
  }
  const mounts = c.volumeMounts;
  if (mounts !== undefined) {
    if (!Array.isArray(mounts)) p.add(`${path}.volumeMounts`, "must be a list");
    else {
      mounts.forEach((m, i) => {
        if (!isObj(m)) return p.add(`${path}.volumeMounts[${i}]`, "must be an object");
        if (typeof m.name !== "string" || !volumes.has(m.name)) {
          p.add(
            `${path}.volumeMounts[${i}].name`,
            `must name a volume of the Pod (${[...volumes].join(", ") || "none"})`,
          );
        }
        if (typeof m.mountPath !== "string" || !m.mountPath.startsWith("/")) {
          p.invalid(`${path}.volumeMounts[${i}].mountPath`, m.mountPath, "an absolute path");
        } else if (isReservedMountPath(m.mountPath)) {
          p.add(
            `${path}.volumeMounts[${i}].mountPath`,
            `${RESERVED_MOUNT_ROOTS.join(" and ")} are reserved for Podmin's mounts`,
          );
        }
      });
    }
  }
}

function isPort(v: unknown): v is number {
  return Number.isInteger(v) && (v as number) >= 1 && (v as number) <= 65535;
}

function checkPodSpec(p: Problems, path: string, v: unknown): PodSpec {
  if (!isObj(v)) {
    p.add(path, "required");
    return { containers: [] };
  }
  for (const k of Object.keys(v)) {
    if (k in POD_SPEC_REJECTED) p.add(`${path}.${k}`, POD_SPEC_REJECTED[k]);
    else if (!POD_SPEC_FIELDS.has(k)) {
      p.add(`${path}.${k}`, "not supported by Podmin's static Pods");
    }
  }
  const volumeNames = new Set<string>();
  if (v.volumes !== undefined) {
    if (!Array.isArray(v.volumes)) p.add(`${path}.volumes`, "must be a list");
    else {
      (v.volumes as Volume[]).forEach((vol, i) => {
        const vp = `${path}.volumes[${i}]`;
        if (!isObj(vol) || !isDnsLabel(vol.name)) {
          return p.invalid(`${vp}.name`, isObj(vol) ? vol.name : undefined, "a DNS label");
        }
        if ((RESERVED_VOLUMES as readonly string[]).includes(vol.name)) {
          p.add(`${vp}.name`, `${vol.name} is reserved for Podmin's mounts`);
        }
        if (volumeNames.has(vol.name)) p.add(`${vp}.name`, `duplicate volume ${vol.name}`);
        volumeNames.add(vol.name);
        const sources = Object.keys(vol).filter((k) => k !== "name");
        if (sources.length !== 1) p.add(vp, "exactly one volume source");
        for (const s of sources) {
          if (!VOLUME_SOURCES.has(s)) {
            p.add(
              `${vp}.${s}`,
              `volume source not available to static Pods (use ${[...VOLUME_SOURCES].join(", ")})`,
            );
          }
        }
      });
    }
  }
  const names = new Set<string>();
  for (const field of ["initContainers", "containers"] as const) {
    const list = v[field];
    if (list === undefined && field === "initContainers") continue;
    if (!Array.isArray(list) || (field === "containers" && list.length === 0)) {
      p.add(
        `${path}.${field}`,
        field === "containers" ? "required; at least one container" : "must be a list",
      );
      continue;
    }
    (list as Container[]).forEach((c, i) => {
      checkContainer(p, `${path}.${field}[${i}]`, c, volumeNames);
      if (isObj(c) && typeof c.name === "string") {
        if (names.has(c.name)) {
          p.add(`${path}.${field}[${i}].name`, `duplicate container name ${c.name}`);
        }
        names.add(c.name);
      }
    });
  }
  if (
    v.restartPolicy !== undefined &&
    !["Always", "OnFailure", "Never"].includes(v.restartPolicy as string)
  ) {
    p.add(`${path}.restartPolicy`, "Always, OnFailure or Never");
  }
  return v as unknown as PodSpec;
}

function checkDeployment(p: Problems, doc: Obj): Deployment {
  checkKeys(p, "", doc, ["apiVersion", "kind", "metadata", "spec"]);
  const metadata = checkMetadata(p, doc.metadata);
  const spec = doc.spec;
  if (!isObj(spec)) {
    p.add("spec", "required");
    return {
      apiVersion: API_VERSION,
      kind: "Deployment",
      metadata,
      spec: { nodeGroup: "", template: { spec: { containers: [] } } },
    };
  }
  for (const k of ["replicas", "selector"]) {
    if (k in spec) {
      p.add(
        `spec.${k}`,
        "a Podmin Deployment runs one Pod on every node of its NodeGroup; size the NodeGroup instead",
      );
    }
  }
  if ("strategy" in spec) {
    p.add(
      "spec.strategy",
      "Podmin rolls a Deployment out with spec.rollout (maxUnavailable, minReadySeconds, " +
        'progressDeadlineSeconds, autoRevert, surge); see docs/spec.md, "Rollout"',
    );
  }
  checkKeys(
    p,
    "spec",
    Object.fromEntries(
      Object.entries(spec).filter(([k]) => !["replicas", "selector", "strategy"].includes(k)),
    ),
    ["nodeGroup", "secrets", "podSecurity", "rollout", "template"],
  );
  const rollout = checkRollout(spec.rollout);
  for (const problem of rollout.problems) p.add(problem.path, problem.message);
  const podSecurity = spec.podSecurity ?? "baseline";
  if (!(POD_SECURITY_LEVELS as readonly unknown[]).includes(podSecurity)) {
    p.add("spec.podSecurity", `one of ${POD_SECURITY_LEVELS.join(", ")} (default baseline)`);
  }
  if (!isDnsLabel(spec.nodeGroup)) {
    p.invalid("spec.nodeGroup", spec.nodeGroup, "the NodeGroup name (a DNS label)");
  }
  const secrets = checkSecretRefs(p, spec.secrets);
  const { podSpec, templateLabels, templateAnnotations } = checkTemplate(
    p,
    spec.template,
    podSecurity,
  );
  return {
    apiVersion: API_VERSION,
    kind: "Deployment",
    metadata,
    spec: {
      nodeGroup: String(spec.nodeGroup ?? ""),
      ...(secrets && secrets.length ? { secrets } : {}),
      // The default (baseline) is not written, so specs that never opted out keep their digest.
      ...(podSecurity === "privileged" ? { podSecurity: "privileged" as const } : {}),
      // Only fields that differ from the defaults are stored (`checkRollout`).
      ...(rollout.rollout ? { rollout: rollout.rollout } : {}),
      template: {
        ...templateMetadata(templateLabels, templateAnnotations),
        spec: podSpec,
      },
    },
  };
}

/** `spec.secrets`: unique keys, `from` ssm (default) or secretsmanager, sorted by key. */
function checkSecretRefs(p: Problems, value: unknown): SecretRef[] | undefined {
  if (value === undefined) return undefined;
  let secrets: SecretRef[] | undefined;
  if (!Array.isArray(value)) p.add("spec.secrets", "must be a list");
  else {
    const seen = new Set<string>();
    secrets = value.map((s, i) => {
      const sp = `spec.secrets[${i}]`;
      if (!isObj(s)) {
        p.add(sp, "must be an object with key and from");
        return { key: "", from: "ssm" as const };
      }
      checkKeys(p, sp, s, ["key", "from"]);
      if (
        typeof s.key !== "string" ||
        !/^[A-Za-z0-9]([A-Za-z0-9._-]{0,126}[A-Za-z0-9])?$/.test(s.key)
      ) {
        p.invalid(
          `${sp}.key`,
          s.key,
          "1-128 of [A-Za-z0-9._-], starting and ending alphanumeric",
        );
      } else if (seen.has(s.key)) p.add(`${sp}.key`, `duplicate key ${s.key}`);
      seen.add(String(s.key));
      const from = s.from ?? "ssm";
      if (from !== "ssm" && from !== "secretsmanager") {
        p.add(`${sp}.from`, "ssm or secretsmanager");
      }
      return { key: String(s.key), from: from as SecretRef["from"] };
    });
    secrets.sort((a, b) => compareCodeUnits(a.key, b.key));
  }
  return secrets;
}

/** `spec.template`: its labels and annotations, its Pod spec, the Pod security level's rules. */
function checkTemplate(p: Problems, template: unknown, podSecurity: unknown): {
  podSpec: PodSpec;
  templateLabels?: Record<string, string>;
  templateAnnotations?: Record<string, string>;
} {
  let podSpec: PodSpec = { containers: [] };
  let templateLabels: Record<string, string> | undefined;
  let templateAnnotations: Record<string, string> | undefined;
  if (!isObj(template)) p.add("spec.template", "required");
  else {
    checkKeys(p, "spec.template", template, ["metadata", "spec"]);
    if (template.metadata !== undefined) {
      if (!isObj(template.metadata)) p.add("spec.template.metadata", "must be an object");
      else {
        checkKeys(p, "spec.template.metadata", template.metadata, ["labels", "annotations"]);
        templateLabels = checkLabels(p, "spec.template.metadata.labels", template.metadata.labels);
        checkUnreserved(p, "spec.template.metadata.labels", templateLabels);
        templateAnnotations = checkAnnotations(
          p,
          "spec.template.metadata.annotations",
          template.metadata.annotations,
        );
      }
    }
    podSpec = checkPodSpec(p, "spec.template.spec", template.spec);
    if (podSecurity !== "privileged") {
      for (const v of baselineViolations(template.spec)) {
        p.add(
          `spec.template.spec.${v.field}`,
          `grants ${v.grants}: not allowed at the baseline Pod security level ` +
            "(set spec.podSecurity: privileged to opt out for this Deployment)",
        );
      }
    }
  }
  return { podSpec, templateLabels, templateAnnotations };
}

/** The normalized template metadata: only non-empty maps, no empty object. */
function templateMetadata(
  labels: Record<string, string> | undefined,
  annotations: Record<string, string> | undefined,
): { metadata?: { labels?: Record<string, string>; annotations?: Record<string, string> } } {
  const metadata = {
    ...(labels && Object.keys(labels).length ? { labels } : {}),
    ...(annotations && Object.keys(annotations).length ? { annotations } : {}),
  };
  return Object.keys(metadata).length ? { metadata } : {};
}

function checkService(p: Problems, doc: Obj): Service {
  checkKeys(p, "", doc, ["apiVersion", "kind", "metadata", "spec"]);
  const metadata = checkMetadata(p, doc.metadata);
  const spec = doc.spec;
  const ports: ServicePort[] = [];
  let selector: Record<string, string> = {};
  if (!isObj(spec)) p.add("spec", "required");
  else {
    checkKeys(p, "spec", spec, ["selector", "ports"]);
    selector = checkLabels(p, "spec.selector", spec.selector, true) ?? {};
    if (!Array.isArray(spec.ports) || spec.ports.length === 0) {
      p.add("spec.ports", "required; at least one port");
    } else {
      const seen = new Set<string>();
      spec.ports.forEach((port, i) => {
        const pp = `spec.ports[${i}]`;
        if (!isObj(port)) return p.add(pp, "must be an object");
        checkKeys(p, pp, port, ["name", "port", "targetPort", "protocol"]);
        if (!isPort(port.port)) p.invalid(`${pp}.port`, port.port, "1-65535");
        const targetPort = port.targetPort ?? port.port;
        if (!isPort(targetPort)) {
          p.invalid(`${pp}.targetPort`, targetPort, "1-65535 (named ports are not supported)");
        }
        const protocol = port.protocol ?? "TCP";
        if (protocol !== "TCP" && protocol !== "UDP") {
          p.invalid(`${pp}.protocol`, protocol, "TCP or UDP");
        }
        if (port.name !== undefined && !isDnsLabel(port.name)) p.add(`${pp}.name`, "a DNS label");
        const id = `${protocol}/${port.port}`;
        if (seen.has(id)) p.add(`${pp}.port`, `duplicate ${id}`);
        seen.add(id);
        ports.push({
          ...(port.name !== undefined ? { name: String(port.name) } : {}),
          port: port.port as number,
          targetPort: targetPort as number,
          protocol: protocol as "TCP" | "UDP",
        });
      });
    }
  }
  ports.sort((a, b) => compareCodeUnits(a.protocol, b.protocol) || a.port - b.port);
  return { apiVersion: API_VERSION, kind: "Service", metadata, spec: { selector, ports } };
}

/**
 * Validates one parsed document and returns the normalised resource.
 * Throws `ValidationError` listing every problem; `where` prefixes each line.
 */
export function parseResource(doc: unknown, where = ""): Resource {
  const p = new Problems();
  let result: Resource | undefined;
  if (!isObj(doc)) {
    p.add("", "a document must be a mapping with apiVersion, kind, metadata and spec");
  } else if (doc.apiVersion !== API_VERSION) {
    p.add("apiVersion", `must be ${API_VERSION} (got ${JSON.stringify(doc.apiVersion)})`);
  } else if (doc.kind === "Deployment") result = checkDeployment(p, doc);
  else if (doc.kind === "Service") result = checkService(p, doc);
  else p.add("kind", `must be Deployment or Service (got ${JSON.stringify(doc.kind)})`);
  if (p.list.length || !result) {
    const prefix = where ? `${where}: ` : "";
    throw new ValidationError(`${prefix}${p.list.join(`\n${prefix}`)}`, {
      hint: 'fix the fields named above; see docs/spec.md, "Resources"',
      problems: p.entries,
    });
  }
  return result;
}

/** `namespace/name` of a resource. */
export function resourceRef(r: Resource): string {
  return `${r.metadata.namespace}/${r.metadata.name}`;
}

/**
 * True when a Service's selector selects Pods with `labels`: every selector label is on the Pod
 * (an empty selector selects nothing).
 */
export function selectorMatches(
  selector: Record<string, string>,
  labels: Record<string, string>,
): boolean {
  const entries = Object.entries(selector);
  return entries.length > 0 && entries.every(([k, v]) => labels[k] === v);
}

/**
 * Fuzzes the parsers of untrusted input: operator resource files (YAML/JSON text mutated byte by
 * byte) and bucket objects the agent reads (the Deployment index, the Service index, spec objects:
 * truncated, wrong types, oversized). Findings: any error other than Podmin's validation or usage
 * errors (a crash), or a parse slower than 2 s (a hang).
 */

import { parseResourceText } from "../../cli/resource_files.ts";
import { parseDeploymentIndex } from "../../core/bucket/deployment_index.ts";
import { UsageError, ValidationError } from "../../core/kit/errors.ts";
import { parseServiceIndex } from "../../core/bucket/service_index.ts";
import { decodeSpec } from "../../core/bucket/spec_objects.ts";
import { sha256Hex } from "../../core/kit/digest.ts";
import { type Attack, Findings, Rand } from "./campaign.ts";

const RESOURCES = `apiVersion: podmin.dev/v1
kind: Deployment
metadata: {name: web, namespace: shop, labels: {app: web}, annotations: {team: a}}
spec:
  nodeGroup: workers
  secrets: [{key: db-password, from: ssm}]
  template:
    metadata: {labels: {app: web}}
    spec:
      volumes: [{name: cache, emptyDir: {}}]
      containers:
        - name: web
          image: registry.podmin.internal/apps/web:1
          env: [{name: A, value: "1"}, {name: N, valueFrom: {fieldRef: {fieldPath: metadata.name}}}]
          ports: [{containerPort: 8080}]
          volumeMounts: [{name: cache, mountPath: /cache}]
---
apiVersion: podmin.dev/v1
kind: Service
metadata: {name: web, namespace: shop}
spec: {selector: {app: web}, ports: [{port: 80, targetPort: 8080}]}
`;

const YAML_BYTES = ":{}[]-&*!|>'\"\n #%@`,?\t\\0~=<".split("");

function mutateText(r: Rand, text: string): string {
  let t = text;
  for (let n = 1 + r.int(4); n > 0; n--) {
    const i = r.int(t.length + 1);
    switch (r.int(6)) {
      case 0:
        t = t.slice(0, i) + t.slice(i + 1 + r.int(8));
        break;
      case 1:
        t = t.slice(0, i) + r.pick(YAML_BYTES) + t.slice(i);
        break;
      case 2:
        t = t.slice(0, i);
        break;
      case 3: {
        const lines = t.split("\n");
        const j = r.int(lines.length);
        lines.splice(j, 0, lines[r.int(lines.length)]);
        t = lines.join("\n");
        break;
      }
      case 4:
        t = t.slice(0, i) + r.pick(["&a [*a, *a]", "!!binary x", "<<: *b", "{", "- - -", "~"]) +
          t.slice(i);
        break;
      default:
        t = t.replace(r.pick(["web", "80", "8080", "ssm", "1", "shop", "/cache"]), randomScalar(r));
    }
  }
  return t;
}

function randomScalar(r: Rand): string {
  return r.pick([
    "null",
    "-1",
    "1e309",
    "0x10",
    "true",
    "[]",
    "{}",
    "''",
    "podmin.dev/x",
    "../x",
    "x".repeat(300),
    "/var/run/secrets//podmin.dev/values",
  ]);
}

/** A random value of a wrong type. */
function wrongValue(r: Rand): unknown {
  return r.pick([
    null,
    -1,
    1.5,
    2 ** 53,
    "",
    "x".repeat(1000),
    [],
    {},
    true,
    ["a"],
    { a: 1 },
    "sha256:zz",
  ]);
}

/** Replaces one random node of a JSON value with a wrong one (or deletes it). */
function mutateJson(r: Rand, v: unknown): unknown {
  if (v === null || typeof v !== "object" || !r.int(4)) return wrongValue(r);
  if (Array.isArray(v)) {
    if (v.length === 0) return [wrongValue(r)];
    const copy = [...v];
    const i = r.int(copy.length);
    if (!r.int(5)) copy.splice(i, 1);
    else copy[i] = mutateJson(r, copy[i]);
    return copy;
  }
  const copy: Record<string, unknown> = { ...(v as Record<string, unknown>) };
  const keys = Object.keys(copy);
  if (keys.length === 0 || !r.int(6)) {
    copy[r.pick(["extra", "apiVersion", "__proto__", "generation"])] = wrongValue(r);
    return copy;
  }
  const k = r.pick(keys);
  if (!r.int(5)) delete copy[k];
  else copy[k] = mutateJson(r, copy[k]);
  return copy;
}

function mutateBytes(r: Rand, bytes: Uint8Array): Uint8Array {
  const choice = r.int(4);
  if (choice === 0) return bytes.subarray(0, r.int(bytes.byteLength));
  if (choice === 1) {
    const copy = bytes.slice();
    copy[r.int(copy.byteLength)] = r.int(256);
    return copy;
  }
  try {
    const doc = JSON.parse(new TextDecoder().decode(bytes));
    return new TextEncoder().encode(JSON.stringify(mutateJson(r, doc)));
  } catch {
    return bytes;
  }
}

const enc = (v: unknown) => new TextEncoder().encode(JSON.stringify(v));

const DEPLOYMENT_INDEX = enc({
  apiVersion: "podmin.dev/v1",
  kind: "DeploymentIndex",
  generation: 3,
  deployments: [{
    namespace: "shop",
    name: "web",
    nodeGroup: "workers",
    spec: `sha256:${"b".repeat(64)}`,
  }],
});

function expected(err: unknown): boolean {
  return err instanceof ValidationError || err instanceof UsageError;
}

/** Times one parse; a crash or a slow parse is a finding. */
function attempt(findings: Findings, what: string, fn: () => unknown): void {
  const t0 = Date.now();
  try {
    fn();
  } catch (err) {
    if (!expected(err)) {
      findings.add(`crash (${(err as Error)?.name})`, `${what}: ${(err as Error)?.message}`);
    }
  }
  const ms = Date.now() - t0;
  if (ms > 2_000) findings.add("slow", `${what}: ${ms} ms`);
}

/** Operator resource files. */
export const resourceFuzz: Attack = {
  name: "resource-files",
  tries: "mutated YAML/JSON resource files through apply's parser and validation",
  run({ cases, seed, deadline }) {
    const t0 = Date.now();
    const findings = new Findings();
    const r = new Rand(seed);
    let tried = 0;
    for (; tried < cases && Date.now() < deadline; tried++) {
      const text = r.int(3) ? mutateText(r, RESOURCES) : JSON.stringify(
        mutateJson(r, {
          apiVersion: "podmin.dev/v1",
          kind: "Deployment",
          metadata: { name: "web" },
          spec: {
            nodeGroup: "w",
            template: { spec: { containers: [{ name: "c", image: "i" }] } },
          },
        }),
      );
      attempt(findings, `case ${tried} (seed ${seed})`, () => parseResourceText(text, "fuzz.yaml"));
    }
    return Promise.resolve({
      name: this.name,
      tried,
      findings: findings.lines,
      ms: Date.now() - t0,
    });
  },
};

/** Bucket objects the agent reads. */
export const bucketObjectFuzz: Attack = {
  name: "bucket-objects",
  tries:
    "truncated, corrupted and wrongly typed index and spec objects through the agent's parsers",
  run({ cases, seed, deadline }) {
    const t0 = Date.now();
    const findings = new Findings();
    const r = new Rand(seed);
    const spec = parseResourceText(RESOURCES, "base.yaml")[0].resource;
    const specBytes = enc(spec);
    const serviceIndex = enc({
      apiVersion: "podmin.dev/v1",
      kind: "ServiceIndex",
      generation: 1,
      serviceCIDR: "fd00:10:96::/108",
      services: [],
    });
    let tried = 0;
    for (; tried < cases && Date.now() < deadline; tried++) {
      const what = `case ${tried} (seed ${seed})`;
      switch (tried % 3) {
        case 0: {
          const bytes = mutateBytes(r, DEPLOYMENT_INDEX);
          attempt(findings, `deployment index ${what}`, () => parseDeploymentIndex(bytes));
          break;
        }
        case 1: {
          const bytes = mutateBytes(r, serviceIndex);
          attempt(findings, `service index ${what}`, () => parseServiceIndex(bytes));
          break;
        }
        default: {
          const bytes = mutateBytes(r, specBytes);
          // The digest matches, so the schema validation is what gets attacked.
          const ref = `sha256:${sha256Hex(bytes)}`;
          attempt(findings, `spec ${what}`, () => decodeSpec({ kind: "Deployment", ref, bytes }));
        }
      }
    }
    return Promise.resolve({
      name: this.name,
      tried,
      findings: findings.lines,
      ms: Date.now() - t0,
    });
  },
};

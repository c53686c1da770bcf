/**
 * What `podmin get` and `podmin describe` do: Deployments, Services and node records as the bucket
 * holds them (their help and flags: cli/get_commands.ts).
 */

import { isStale, type NodeRecord } from "../core/bucket/node_record.ts";
import { type CommandContext, stringFlag } from "../core/kit/cli_kit.ts";
import { UsageError } from "../core/kit/errors.ts";
import { checkNamespace, DEFAULT_NAMESPACE } from "../core/model/names.ts";
import type { ObjectStore } from "../core/store/object_store.ts";
import type { Deployment, Resource, Service } from "../core/model/resources.ts";
import {
  imagesOf,
  kindOf,
  NO_NODE_RECORDS,
  nodesSummary,
  readNodeRecords,
  readObject,
  readObjects,
  selects,
  type StoredObject,
  storeHolds,
  storeImageOf,
  storeOf,
} from "./cluster_reads.ts";
import { parseLabelSelector } from "./label_selector.ts";
import { rolloutView } from "./rollout_view.ts";
import { formatAge, outputFormat, table } from "./output_format.ts";

const labelText = (labels: Record<string, string> | undefined) =>
  Object.entries(labels ?? {}).map(([k, v]) => `${k}=${v}`).join(",") || "<none>";

/** The document `get -o yaml|json` prints: the spec, and for Services the read-only VIP. */
function documentOf(o: StoredObject): Resource & { status?: { vip: string } } {
  return o.vip ? { ...o.spec, status: { vip: o.vip } } : o.spec;
}

const OUTPUTS = ["table", "wide", "json", "yaml", "name"] as const;

/** `podmin get`. */
export async function runGet(ctx: CommandContext): Promise<number | void> {
  const [kindArg, ...names] = ctx.positionals;
  if (["nodes", "node", "no"].includes((kindArg ?? "").toLowerCase())) {
    return await getNodes(ctx, names);
  }
  const kind = kindOf(kindArg, "get");
  const output = outputFormat(ctx, { formats: OUTPUTS, fallback: "table" });
  const nsFlag = stringFlag(ctx, "namespace");
  if (nsFlag !== undefined && ctx.values["all-namespaces"] === true) {
    throw new UsageError("give -A and -n NS, not both", {
      hint: "-A lists every namespace, -n one",
    });
  }
  const selectorText = stringFlag(ctx, "selector");
  const selector = selectorText === undefined ? undefined : parseLabelSelector(selectorText);
  const ns = nsFlag !== undefined
    ? checkNamespace(nsFlag)
    : names.length
    ? DEFAULT_NAMESPACE
    : undefined;
  const store = await storeOf(ctx);
  let objects: StoredObject[];
  if (names.length) {
    objects = [];
    for (const name of names) {
      objects.push(await readObject(store, { kind, namespace: ns!, name }));
    }
  } else objects = await readObjects(store, kind, ns);
  if (selector) objects = objects.filter((o) => selector(o.spec.metadata.labels ?? {}));
  const single = names.length === 1;
  switch (output) {
    case "json": {
      const docs = objects.map(documentOf);
      const value = single ? docs[0] : { apiVersion: "podmin.dev/v1", kind: "List", items: docs };
      ctx.out(JSON.stringify(value, null, 2));
      return;
    }
    case "yaml":
      if (objects.length) {
        const { stringify } = await import("yaml"); // only -o yaml needs the YAML library
        ctx.out(objects.map((o) => stringify(documentOf(o)).trimEnd()).join("\n---\n"));
      }
      return;
    case "name":
      for (const o of objects) ctx.out(`${kind.toLowerCase()}/${o.name}`);
      return;
  }
  if (objects.length === 0) {
    ctx.err(`no ${kind.toLowerCase()}s found${ns ? ` in namespace ${ns}` : ""}`);
    return;
  }
  const wide = output === "wide";
  const rows = kind === "Deployment"
    ? deploymentRows(objects, (await readNodeRecords(store)).records, wide)
    : await serviceRows(store, objects, wide);
  table(rows).forEach((l) => ctx.out(l));
}

/**
 * The `get deployments` table: UP-TO-DATE (nodes running the current spec alone) and AVAILABLE
 * (nodes whose Pod kubelet reports Ready) out of the live nodes of its NodeGroup, from the node
 * records (`rollout_view.ts`); `wide` adds images and labels.
 */
function deploymentRows(
  objects: StoredObject[],
  records: NodeRecord[],
  wide: boolean,
): string[][] {
  const rows = [[
    "NAMESPACE",
    "NAME",
    "NODEGROUP",
    "UP-TO-DATE",
    "AVAILABLE",
    "SPEC",
    ...(wide ? ["IMAGES", "LABELS"] : []),
  ]];
  for (const o of objects) {
    const d = o.spec as Deployment;
    const view = rolloutView(
      { namespace: o.namespace, name: o.name, nodeGroup: o.nodeGroup!, spec: o.ref },
      records,
    );
    const nodes = view.nodes.length;
    rows.push([
      o.namespace,
      o.name,
      o.nodeGroup!,
      `${view.upToDate}/${nodes}`,
      `${view.available}/${nodes}`,
      o.ref.slice(0, 19),
      ...(wide ? [imagesOf(d).map((u) => u.image).join(","), labelText(d.metadata.labels)] : []),
    ]);
  }
  return rows;
}

/** The `get services` table: endpoints from the node records (`wide` adds the Deployments). */
async function serviceRows(
  store: ObjectStore,
  objects: StoredObject[],
  wide: boolean,
): Promise<string[][]> {
  const deployments = wide ? await readObjects(store, "Deployment") : [];
  const endpoints = serviceEndpoints((await readNodeRecords(store)).records);
  const rows = [[
    "NAMESPACE",
    "NAME",
    "VIP",
    "PORTS",
    "ENDPOINTS",
    "SELECTOR",
    ...(wide ? ["DEPLOYMENTS"] : []),
  ]];
  for (const o of objects) {
    const s = o.spec as Service;
    const ready = endpoints.get(`${o.namespace}/${o.name}`);
    rows.push([
      o.namespace,
      o.name,
      o.vip!,
      s.spec.ports.map((p) => `${p.port}/${p.protocol}`).join(","),
      ready === undefined ? "-" : String(ready.size),
      labelText(s.spec.selector),
      ...(wide ? [selectedBy(s, deployments).map((d) => d.name).join(",") || "<none>"] : []),
    ]);
  }
  return rows;
}

/** The Deployments of the Service's namespace whose Pods its selector selects. */
function selectedBy(service: Service, deployments: StoredObject[]): StoredObject[] {
  return deployments.filter((d) =>
    d.namespace === service.metadata.namespace && selects(service, d.spec as Deployment)
  );
}

/** `Key:` padded to one column. */
function field(out: (l: string) => void, key: string, value: string): void {
  out(`${`${key}:`.padEnd(22)}${value}`);
}

async function nodesLine(store: ObjectStore): Promise<string> {
  return nodesSummary((await readNodeRecords(store)).records);
}

/** `podmin get nodes [NODE…] [-o table|wide|json|name]`: the agents' records under dns/nodes/. */
async function getNodes(ctx: CommandContext, names: string[]): Promise<void> {
  const store = await storeOf(ctx);
  const { records, problems } = await readNodeRecords(store);
  for (const p of problems) ctx.err(`warning: unreadable node record ${p}`);
  const shown = names.length ? records.filter((r) => names.includes(r.nodeId)) : records;
  for (const n of names) {
    if (!records.some((r) => r.nodeId === n)) ctx.err(`node ${n} has no record under dns/nodes/`);
  }
  const output = stringFlag(ctx, "output") ?? "table";
  if (output === "json") {
    ctx.out(JSON.stringify({ apiVersion: "podmin.dev/v1", kind: "List", items: shown }, null, 2));
    return;
  }
  if (output === "name") {
    for (const r of shown) ctx.out(`node/${r.nodeId}`);
    return;
  }
  if (!shown.length) {
    ctx.err(NO_NODE_RECORDS);
    return;
  }
  const now = Date.now();
  const rows = [[
    "NODEGROUP",
    "NODE",
    "ADDRESS",
    "HEARTBEAT",
    "STATUS",
    "DEPLOYMENTS",
    ...(output === "wide" ? ["POD PREFIX", "AGENT", "PENDING"] : []),
  ]];
  for (const r of shown) {
    const written = r.deployments.filter((d) => d.spec).length;
    const pending = r.deployments.filter((d) => d.pending);
    rows.push([
      r.nodeGroup,
      r.nodeId,
      r.address || "-",
      `${formatAge(now - Date.parse(r.heartbeat))} ago`,
      isStale(r, now) ? "Stale" : r.converged ? "Converged" : "NotConverged",
      `${written}/${r.deployments.length}`,
      ...(output === "wide"
        ? [
          r.podPrefix || "-",
          r.agentVersion,
          pending.map((d) => `${d.namespace}/${d.name}: ${d.pending}`).join("; ") || "-",
        ]
        : []),
    ]);
  }
  for (const line of table(rows)) ctx.out(line);
  for (const r of shown) if (r.problem) ctx.err(`warning: node ${r.nodeId}: ${r.problem}`);
}

async function describeDeployment(ctx: CommandContext, store: ObjectStore, o: StoredObject) {
  const d = o.spec as Deployment;
  const out = ctx.out;
  field(out, "Name", o.name);
  field(out, "Namespace", o.namespace);
  field(out, "Kind", "Deployment");
  field(out, "NodeGroup", d.spec.nodeGroup);
  field(out, "Spec digest", o.ref);
  field(out, "Labels", labelText(d.metadata.labels));
  field(out, "Pod labels", labelText(d.spec.template.metadata?.labels));
  field(out, "Pod security", d.spec.podSecurity ?? "baseline");
  out("Containers:");
  for (const use of imagesOf(d)) {
    const container = use.field.includes("initContainers") ? " (init)" : "";
    const index = Number(/\[(\d+)\]/.exec(use.field)![1]);
    const c = (use.field.includes("initContainers")
      ? d.spec.template.spec.initContainers!
      : d.spec.template.spec.containers)[index];
    const ref = storeImageOf(use.image);
    const where = ref
      ? (await storeHolds(store, ref)) ? " (in the image store)" : " (not in the image store)"
      : " (upstream)";
    out(`  ${c.name}${container}: ${use.image}${where}`);
  }
  field(
    out,
    "Secrets",
    (d.spec.secrets ?? []).map((s) => `${s.key} (${s.from})`).join(", ") || "<none>",
  );
  const services = (await readObjects(store, "Service", o.namespace))
    .filter((s) => selects(s.spec as Service, d));
  field(
    out,
    "Services",
    services.map((s) => `${s.namespace}/${s.name} (VIP ${s.vip})`).join(", ") || "<none>",
  );
  const { records } = await readNodeRecords(store);
  const running = records.filter((r) =>
    r.deployments.some((x) => x.namespace === o.namespace && x.name === o.name)
  );
  if (!running.length) field(out, "Nodes", await nodesLine(store));
  else {
    field(out, "Nodes", "");
    const now = Date.now();
    for (const r of running) {
      const x = r.deployments.find((x) => x.namespace === o.namespace && x.name === o.name)!;
      const state = x.spec
        ? `${x.spec === o.ref ? "current spec" : `spec ${x.spec.slice(0, 19)}… (not the current)`}${
          x.ready === undefined ? "" : x.ready ? ", Ready" : ", not Ready"
        }`
        : `pending: ${x.pending}`;
      out(`  ${r.nodeId} (${r.nodeGroup})${isStale(r, now) ? " [stale]" : ""}: ${state}`);
    }
  }
}

/** Ready endpoints per Service (`namespace/name`) from the fresh node records. */
function serviceEndpoints(records: NodeRecord[]): Map<string, Set<string>> {
  const out = new Map<string, Set<string>>();
  const now = Date.now();
  for (const r of records) {
    if (!r.endpoints || isStale(r, now)) continue;
    for (const [svc, ips] of Object.entries(r.endpoints)) {
      let set = out.get(svc);
      if (!set) out.set(svc, set = new Set());
      for (const ip of ips) set.add(ip);
    }
  }
  return out;
}

async function describeService(ctx: CommandContext, store: ObjectStore, o: StoredObject) {
  const s = o.spec as Service;
  const out = ctx.out;
  field(out, "Name", o.name);
  field(out, "Namespace", o.namespace);
  field(out, "Kind", "Service");
  field(out, "Spec digest", o.ref);
  field(out, "Labels", labelText(s.metadata.labels));
  field(out, "VIP", o.vip!);
  field(
    out,
    "Ports",
    s.spec.ports.map((p) =>
      `${p.name ? `${p.name} ` : ""}${p.port}/${p.protocol} -> ${p.targetPort}`
    )
      .join(", "),
  );
  field(out, "Selector", labelText(s.spec.selector));
  const selected = selectedBy(s, await readObjects(store, "Deployment", o.namespace));
  field(
    out,
    "Selected Deployments",
    selected.map((d) => `${d.namespace}/${d.name} (NodeGroup ${d.nodeGroup})`).join(", ") ||
      "<none>",
  );
  const ready = serviceEndpoints((await readNodeRecords(store)).records).get(
    `${o.namespace}/${o.name}`,
  );
  field(
    out,
    "Endpoints",
    ready === undefined ? await nodesLine(store) : [...ready].sort().join(", ") || "<none>",
  );
}

/** `podmin describe`. */
export async function runDescribe(ctx: CommandContext): Promise<number | void> {
  const [kindArg, name, ...extra] = ctx.positionals;
  const kind = kindOf(kindArg, "describe");
  if (!name || extra.length) {
    throw new UsageError("expected: describe deployment|service NAME", {
      hint: "for example: podmin describe deployment web -n default",
    });
  }
  const namespace = checkNamespace(stringFlag(ctx, "namespace") ?? DEFAULT_NAMESPACE);
  const store = await storeOf(ctx);
  const o = await readObject(store, { kind, namespace, name });
  if (kind === "Deployment") await describeDeployment(ctx, store, o);
  else await describeService(ctx, store, o);
}

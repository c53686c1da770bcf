/** `podmin apply | diff | delete | get`: the desired-state commands. */

import { stringify } from "yaml";
import {
  booleanFlag,
  bucketUrl,
  type Command,
  type CommandContext,
  stringFlag,
  stringsFlag,
} from "../core/cli_kit.ts";
import { sortKeys } from "../core/canonical_json.ts";
import { readDeploymentIndex } from "../core/deployment_index.ts";
import { UsageError } from "../core/errors.ts";
import { checkNamespace, checkObjectName, DEFAULT_NAMESPACE } from "../core/names.ts";
import { baselineViolations } from "../core/pod_security.ts";
import { resourceRef } from "../core/resources.ts";
import { readServiceIndex } from "../core/service_index.ts";
import { readSpec } from "../core/spec_objects.ts";
import { openStore } from "../core/store_url.ts";
import { applyResources, type Change, deleteResource } from "./desired_state.ts";
import { lineDiff } from "./line_diff.ts";
import { loadResourceFiles } from "./resource_files.ts";

function storeOf(ctx: CommandContext) {
  const region = typeof ctx.values.region === "string" ? ctx.values.region : undefined;
  return openStore(bucketUrl(ctx), { region });
}

function describe(c: Change): string {
  const vip = c.vip ? ` (VIP ${c.vip})` : "";
  return `${c.kind.toLowerCase()} ${c.namespace}/${c.name} ${c.action}${vip}`;
}

const apply: Command = {
  name: "apply",
  summary: "create or update Deployments and Services from files",
  help: `Usage: podmin apply -f FILE [-f FILE…] [--service-cidr PREFIX] [--dry-run]

Validates every document of every file first, then writes the changed specs
and updates deployments/index.json and services/index.json with conditional
writes (concurrent applies never lose an update). Unchanged objects are not
rewritten: applying the same files twice writes nothing the second time.

Flags:
  -f, --filename FILE   YAML or JSON file, several documents per file; - for stdin
  --service-cidr PREFIX IPv6 range for Service VIPs; only used when the first
                        Service is applied (default fd00:504d::/112)
  --dry-run             validate and print what would change; write nothing

Example:
  podmin --bucket s3://my-cluster apply -f web.yaml`,
  options: {
    filename: { type: "string", short: "f", multiple: true },
    "service-cidr": { type: "string" },
    "dry-run": { type: "boolean", default: false },
  },
  async run(ctx) {
    const loaded = await loadResourceFiles(stringsFlag(ctx, "filename"));
    for (const { resource } of loaded) {
      if (resource.kind !== "Deployment" || resource.spec.podSecurity !== "privileged") continue;
      const grants = baselineViolations(resource.spec.template.spec);
      ctx.err(
        `deployment ${resourceRef(resource)}: spec.podSecurity: privileged opts out of the ` +
          "baseline Pod security level" +
          (grants.length ? "; it grants:" : " (its template needs nothing beyond it)"),
      );
      for (const g of grants) ctx.err(`  ${g.field}: ${g.grants}`);
    }
    const changes = await applyResources({
      store: storeOf(ctx),
      resources: loaded.map((l) => l.resource),
      serviceCidr: stringFlag(ctx, "service-cidr"),
      dryRun: booleanFlag(ctx, "dry-run"),
    });
    const suffix = ctx.values["dry-run"] ? " (dry run)" : "";
    for (const c of changes) ctx.out(describe(c) + suffix);
  },
};

const diff: Command = {
  name: "diff",
  summary: "show what apply would change",
  help: `Usage: podmin diff -f FILE [-f FILE…]

Prints, per resource, whether apply would create or change it, and for changes
a line diff of the stored spec against the new one. Exits 0 when nothing would
change and 1 when something would (like diff(1)).

Flags:
  -f, --filename FILE   YAML or JSON file; - for stdin`,
  options: { filename: { type: "string", short: "f", multiple: true } },
  async run(ctx) {
    const store = storeOf(ctx);
    const loaded = await loadResourceFiles(stringsFlag(ctx, "filename"));
    const resources = loaded.map((l) => l.resource);
    const changes = await applyResources({ store, resources, dryRun: true });
    let changed = false;
    for (const c of changes) {
      if (c.action === "unchanged") continue;
      changed = true;
      ctx.out(`${c.kind.toLowerCase()} ${c.namespace}/${c.name}: would be ${c.action}`);
      const next = resources.find((r) =>
        r.kind === c.kind && r.metadata.namespace === c.namespace && r.metadata.name === c.name
      )!;
      const before = c.before
        ? prettySorted(await readSpec(store, { kind: c.kind, ref: c.before }))
        : "";
      for (const line of lineDiff(before, prettySorted(next))) {
        if (!line.startsWith("  ")) ctx.out(line);
      }
    }
    if (!changed) ctx.out("no changes");
    return changed ? 1 : 0;
  },
};

const del: Command = {
  name: "delete",
  summary: "delete a Deployment or Service",
  help: `Usage: podmin delete deployment|service NAME [-n NAMESPACE]

Removes the object from its index; agents remove its Pods on their next poll.

Flags:
  -n, --namespace NS  namespace (default "default")`,
  options: { namespace: { type: "string", short: "n" } },
  positionals: true,
  async run(ctx) {
    const [kindArg, name, ...extra] = ctx.positionals;
    const kind = kindOf(kindArg);
    if (!name || extra.length) {
      throw new UsageError("expected: delete deployment|service NAME", {
        hint: "for example: podmin delete deployment web -n default",
      });
    }
    const namespace = checkNamespace(stringFlag(ctx, "namespace") ?? DEFAULT_NAMESPACE);
    await deleteResource({
      store: storeOf(ctx),
      kind,
      namespace,
      name: checkObjectName(kind, name),
    });
    ctx.out(`${kind.toLowerCase()} ${namespace}/${name} deleted`);
  },
};

/** Indented JSON with sorted keys, so key order never shows up as a change. */
function prettySorted(value: unknown): string {
  return JSON.stringify(sortKeys(value), null, 2);
}

function kindOf(arg: string | undefined): "Deployment" | "Service" {
  const k = (arg ?? "").toLowerCase();
  if (["deployment", "deployments", "deploy"].includes(k)) return "Deployment";
  if (["service", "services", "svc"].includes(k)) return "Service";
  throw new UsageError(`unknown resource kind ${JSON.stringify(arg ?? "")}`, {
    hint: "use deployments or services",
  });
}

function table(rows: string[][]): string[] {
  const widths = rows[0].map((_, i) => Math.max(...rows.map((r) => r[i].length)));
  return rows.map((r) => r.map((c, i) => c.padEnd(widths[i])).join("   ").trimEnd());
}

const get: Command = {
  name: "get",
  summary: "list Deployments or Services",
  help: `Usage: podmin get deployments|services [-n NAMESPACE | -A] [-o table|json|yaml]

Flags:
  -n, --namespace NS     only this namespace (default: all namespaces)
  -o, --output FORMAT    table (default), json or yaml (full stored specs)`,
  options: {
    namespace: { type: "string", short: "n" },
    output: { type: "string", short: "o", default: "table" },
  },
  positionals: true,
  async run(ctx) {
    const [kindArg, ...extra] = ctx.positionals;
    const kind = kindOf(kindArg);
    if (extra.length) throw new UsageError(`unexpected argument ${extra[0]}`);
    const output = stringFlag(ctx, "output") ?? "table";
    if (!["table", "json", "yaml"].includes(output)) {
      throw new UsageError(`unknown output format ${output}`, { hint: "use table, json or yaml" });
    }
    const ns = ctx.values.namespace === undefined
      ? undefined
      : checkNamespace(ctx.values.namespace);
    const store = storeOf(ctx);
    const entries = kind === "Deployment"
      ? (await readDeploymentIndex(store)).deployments
      : (await readServiceIndex(store))?.services ?? [];
    const selected = entries.filter((e) => ns === undefined || e.namespace === ns);
    if (output !== "table") {
      const items = [];
      for (const e of selected) {
        const spec = await readSpec(store, { kind, ref: e.spec });
        items.push("vip" in e ? { ...spec, status: { vip: e.vip } } : spec);
      }
      ctx.out(output === "json" ? JSON.stringify(items, null, 2) : stringify(items).trimEnd());
      return;
    }
    if (selected.length === 0) {
      ctx.err(`no ${kind.toLowerCase()}s${ns ? ` in namespace ${ns}` : ""}`);
      return;
    }
    if (kind === "Deployment") {
      const rows = [["NAMESPACE", "NAME", "NODEGROUP", "SPEC"]];
      for (
        const e of selected as {
          namespace: string;
          name: string;
          nodeGroup: string;
          spec: string;
        }[]
      ) {
        rows.push([e.namespace, e.name, e.nodeGroup, e.spec.slice(0, 19)]);
      }
      table(rows).forEach((l) => ctx.out(l));
    } else {
      const rows = [["NAMESPACE", "NAME", "VIP", "PORTS", "SELECTOR"]];
      for (
        const e of selected as { namespace: string; name: string; vip: string; spec: string }[]
      ) {
        const spec = await readSpec(store, { kind: "Service", ref: e.spec });
        rows.push([
          e.namespace,
          e.name,
          e.vip,
          spec.spec.ports.map((p) => `${p.port}/${p.protocol}`).join(","),
          Object.entries(spec.spec.selector).map(([k, v]) => `${k}=${v}`).join(","),
        ]);
      }
      table(rows).forEach((l) => ctx.out(l));
    }
  },
};

/** The desired-state commands. */
export const deployCommands: Command[] = [apply, diff, del, get];

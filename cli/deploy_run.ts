/** What `podmin apply | diff | delete` do (their help and flags: cli/deploy_commands.ts). */

import { type CommandContext, stringFlag, stringsFlag } from "../core/kit/cli_kit.ts";
import { sortKeys } from "../core/kit/canonical_json.ts";
import { NotFoundError, PodminError, UsageError } from "../core/kit/errors.ts";
import { checkNamespace, checkObjectName, DEFAULT_NAMESPACE } from "../core/model/names.ts";
import type { ObjectStore } from "../core/store/object_store.ts";
import { baselineViolations } from "../core/model/pod_security.ts";
import { type Deployment, type Resource, resourceRef } from "../core/model/resources.ts";
import { readSpec } from "../core/bucket/spec_objects.ts";
import { type Kind, kindOf, missingImages, storeOf } from "./cluster_reads.ts";
import { applyResources, type Change, deleteResource } from "./desired_state.ts";
import { lineDiff } from "./line_diff.ts";
import { type LoadedResource, loadResourceFiles } from "./resource_files.ts";

function describe(c: Change): string {
  const vip = c.vip ? ` (VIP ${c.vip})` : "";
  const revision = c.revision ? ` (revision ${c.revision})` : "";
  return `${c.kind.toLowerCase()} ${c.namespace}/${c.name} ${c.action}${vip}${revision}`;
}

function loadFiles(ctx: CommandContext): Promise<LoadedResource[]> {
  const ns = stringFlag(ctx, "namespace");
  return loadResourceFiles(stringsFlag(ctx, "filename"), {
    recursive: ctx.values.recursive === true,
    namespace: ns === undefined ? undefined : checkNamespace(ns),
  });
}

type DryRun = "none" | "server" | "client";

function dryRunOf(ctx: CommandContext): DryRun {
  const v = stringFlag(ctx, "dry-run") ?? "none";
  if (v === "none" || v === "server" || v === "client") return v;
  throw new UsageError(`--dry-run: expected client, server or none, got ${JSON.stringify(v)}`, {
    hint: "--dry-run=client validates without the bucket; --dry-run (=server) compares with it",
  });
}

function warnPrivileged(ctx: CommandContext, loaded: LoadedResource[]): void {
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
}

/** Warns (never fails) about Podmin image references the store does not hold. */
async function warnMissingImages(
  ctx: CommandContext,
  store: ObjectStore,
  resources: Resource[],
): Promise<void> {
  const deployments = resources.filter((r): r is Deployment => r.kind === "Deployment");
  for (const m of await missingImages(store, deployments)) {
    ctx.err(
      `warning: deployment ${m.namespace}/${m.name}: ${m.field} ${m.image} is not in the image store`,
    );
    ctx.err(
      m.path.startsWith("apps/")
        ? `hint: push it first: podmin push SOURCE ${m.path}${m.tag ? `:${m.tag}` : ""}`
        : `hint: mirror it first: podmin mirror UPSTREAM-REF (it lands in ${m.path})`,
    );
  }
}

/** `podmin apply`. */
export async function runApply(ctx: CommandContext): Promise<number | void> {
  const dryRun = dryRunOf(ctx);
  const loaded = await loadFiles(ctx);
  warnPrivileged(ctx, loaded);
  const resources = loaded.map((l) => l.resource);
  if (dryRun === "client") {
    for (const r of resources) {
      ctx.out(`${r.kind.toLowerCase()} ${resourceRef(r)} valid (dry run: client)`);
    }
    return;
  }
  const store = await storeOf(ctx);
  const changes = await applyResources({
    store,
    resources,
    serviceCidr: stringFlag(ctx, "service-cidr"),
    dryRun: dryRun === "server",
  });
  await warnMissingImages(ctx, store, resources);
  const suffix = dryRun === "server" ? " (dry run)" : "";
  for (const c of changes) {
    ctx.out(describe(c) + suffix);
    if (c.kind === "Deployment" && c.action === "configured" && dryRun === "none") {
      // Every node of its NodeGroup starts the new spec beside its running Pod (spec §7.1).
      ctx.out(`  rollout started; follow it: podmin rollout status ${c.name} -n ${c.namespace}`);
    }
  }
}

/** `podmin diff`: exit 1 when something would change. */
export async function runDiff(ctx: CommandContext): Promise<number | void> {
  const loaded = await loadFiles(ctx);
  const store = await storeOf(ctx);
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
}

/** What `delete` removes: from `KIND NAME…`, `KIND/NAME…` or `-f` files. */
async function deleteTargets(
  ctx: CommandContext,
): Promise<{ kind: Kind; namespace: string; name: string }[]> {
  const ns = stringFlag(ctx, "namespace");
  const namespace = checkNamespace(ns ?? DEFAULT_NAMESPACE);
  if (stringsFlag(ctx, "filename").length) {
    if (ctx.positionals.length) {
      throw new UsageError("give either -f FILE or KIND NAME, not both");
    }
    return (await loadFiles(ctx)).map(({ resource: r }) => ({
      kind: r.kind,
      namespace: r.metadata.namespace,
      name: r.metadata.name,
    }));
  }
  const [first, ...rest] = ctx.positionals;
  const usage = new UsageError(
    "expected: delete KIND NAME…, delete KIND/NAME…, or delete -f FILE",
    {
      hint: "for example: podmin delete deployment web -n default",
    },
  );
  if (!first) throw usage;
  if (first.includes("/")) {
    return ctx.positionals.map((p) => {
      const [k, name, ...more] = p.split("/");
      if (!name || more.length) throw usage;
      const kind = kindOf(k, "delete");
      return { kind, namespace, name: checkObjectName(kind, name) };
    });
  }
  const kind = kindOf(first, "delete");
  if (!rest.length) throw usage;
  return rest.map((name) => ({ kind, namespace, name: checkObjectName(kind, name) }));
}

/** `podmin delete`. */
export async function runDelete(ctx: CommandContext): Promise<number | void> {
  const targets = await deleteTargets(ctx);
  const store = await storeOf(ctx);
  const missing: string[] = [];
  for (const t of targets) {
    try {
      await deleteResource({ store, ...t });
      ctx.out(`${t.kind.toLowerCase()} ${t.namespace}/${t.name} deleted`);
    } catch (err) {
      if (!(err instanceof NotFoundError)) throw err;
      missing.push(err.message);
    }
  }
  if (missing.length) {
    throw new PodminError(missing.join("\n"), {
      hint: "list what exists with 'podmin get deployments' or 'podmin get services'",
    });
  }
}

/** Indented JSON with sorted keys, so key order never shows up as a change. */
function prettySorted(value: unknown): string {
  return JSON.stringify(sortKeys(value), null, 2);
}

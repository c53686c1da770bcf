/**
 * What `podmin rollout status | history | undo` do (their help and flags: cli/rollout_commands.ts).
 * Status reads the nodes' records (`rollout_view.ts`); history and undo read the Deployment's
 * history (`core/bucket/deployment_history.ts`); undo applies an earlier revision's spec through
 * `applyResources`, so it is an apply like any other (a new revision, a rollout on every node).
 */

import { type CommandContext, stringFlag } from "../core/kit/cli_kit.ts";
import { NotFoundError, UsageError } from "../core/kit/errors.ts";
import { checkNamespace, checkObjectName, DEFAULT_NAMESPACE } from "../core/model/names.ts";
import type { Deployment } from "../core/model/resources.ts";
import { readDeploymentIndex } from "../core/bucket/deployment_index.ts";
import { readDeploymentHistory } from "../core/bucket/deployment_history.ts";
import { readSpec } from "../core/bucket/spec_objects.ts";
import { casUpdate } from "../core/store/cas_update.ts";
import { getIfExists } from "../core/store/object_store.ts";
import {
  parseRolloutState,
  type RolloutState,
  rolloutStateObject,
  setPaused,
} from "../core/bucket/rollout_state.ts";
import { sleep } from "../core/kit/retry.ts";
import { imagesOf, readNodeRecords, storeOf } from "./cluster_reads.ts";
import { applyResources } from "./desired_state.ts";
import { outputFormat, table } from "./output_format.ts";
import { type RolloutView, rolloutView } from "./rollout_view.ts";

/** `podmin rollout ACTION DEPLOYMENT`: dispatches to the action. */
export async function runRollout(ctx: CommandContext): Promise<number | void> {
  const [action, target, ...rest] = ctx.positionals;
  const usage = new UsageError("expected: rollout status|history|undo|pause|resume DEPLOYMENT", {
    hint: "for example: podmin rollout status web -n default",
  });
  if (!target || rest.length) throw usage;
  const name = checkObjectName("Deployment", target.replace(/^(deployments?|deploy)\//, ""));
  const namespace = checkNamespace(stringFlag(ctx, "namespace") ?? DEFAULT_NAMESPACE);
  const ref = { namespace, name };
  if (action === "status") return await rolloutStatus(ctx, ref);
  if (action === "history") return await rolloutHistory(ctx, ref);
  if (action === "undo") return await rolloutUndo(ctx, ref);
  if (action === "pause" || action === "resume") {
    return await rolloutPause(ctx, ref, action === "pause");
  }
  throw usage;
}

type Ref = { namespace: string; name: string };

async function entryOf(ctx: CommandContext, ref: Ref) {
  const store = await storeOf(ctx);
  const entry = (await readDeploymentIndex(store)).deployments.find((e) =>
    e.namespace === ref.namespace && e.name === ref.name
  );
  if (!entry) {
    throw new NotFoundError(`deployment ${ref.namespace}/${ref.name} not found`, {
      hint: `list them with 'podmin get deployments -n ${ref.namespace}'`,
    });
  }
  return { store, entry };
}

/**
 * `rollout status`: per node old / surging / replacing / new / failed / pending with kubelet's
 * reason. Exit 0 when complete, 1 when a node halted, 3 while in progress; `--wait` polls until
 * complete or halted (or `--timeout`).
 */
async function rolloutStatus(ctx: CommandContext, ref: Ref): Promise<number> {
  const output = outputFormat(ctx, { formats: ["text", "json"], fallback: "text" });
  const wait = ctx.values.wait === true;
  const timeoutMs = parseSeconds(stringFlag(ctx, "timeout") ?? "600") * 1000;
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const { store, entry } = await entryOf(ctx, ref);
    const { records } = await readNodeRecords(store);
    const view = rolloutView(entry, records);
    const state = await readRolloutState(ctx, store, ref);
    const halted = state?.spec === entry.spec ? state.halted : undefined;
    if (halted) view.failed = true;
    const done = view.complete || view.failed;
    if (!wait || done || Date.now() >= deadline) {
      if (output === "json") {
        ctx.out(
          JSON.stringify(
            {
              deployment: `${ref.namespace}/${ref.name}`,
              spec: entry.spec,
              paused: state?.paused ?? false,
              ...(halted ? { halted } : {}),
              ...view,
            },
            null,
            2,
          ),
        );
      } else {
        printStatus(ctx, ref, entry.spec, view);
        if (halted) ctx.out(`halted on ${halted.node} at ${halted.at}: ${halted.reason}`);
        if (halted && state?.from) {
          ctx.out(`the rollout left ${state.from.slice(0, 19)}… (restored with autoRevert)`);
        }
        if (state?.paused) {
          ctx.out(`paused: no node is admitted until 'podmin rollout resume ${ref.name}'`);
        }
      }
      return view.complete ? 0 : view.failed ? 1 : 3;
    }
    await sleep(2000);
  }
}

function printStatus(ctx: CommandContext, ref: Ref, spec: string, view: RolloutView): void {
  const total = view.nodes.length;
  const head = view.failed
    ? "halted: a node's new Pod missed its progress deadline; the old Pods keep serving"
    : view.complete
    ? "rolled out"
    : total === 0
    ? "no live node of its NodeGroup reports"
    : "in progress";
  ctx.out(
    `deployment ${ref.namespace}/${ref.name} (spec ${spec.slice(0, 19)}…): ${head}; ` +
      `${view.upToDate} of ${total} node(s) up to date, ${view.available} available`,
  );
  if (!total) return;
  const rows = [["NODE", "STATE", "READY", "REASON"]];
  for (const n of view.nodes) {
    rows.push([n.nodeId, n.state, n.ready === undefined ? "-" : String(n.ready), n.reason ?? ""]);
  }
  for (const line of table(rows)) ctx.out(line);
  if (view.failed) {
    ctx.out(
      `hint: fix the spec and apply it, or go back with 'podmin rollout undo ${ref.name} -n ${ref.namespace}'`,
    );
  }
}

/**
 * `rollout pause|resume`: no node is admitted into the Deployment's rollout while paused (nodes in
 * transition finish theirs); kept across specs until resumed.
 */
async function rolloutPause(ctx: CommandContext, ref: Ref, paused: boolean): Promise<void> {
  const { store } = await entryOf(ctx, ref);
  const result = await casUpdate({
    store,
    object: rolloutStateObject(ref),
    mutate: (current) => setPaused(current, paused),
  });
  const word = paused ? "paused" : "resumed";
  ctx.out(
    `deployment ${ref.namespace}/${ref.name} rollout ${word}${result.written ? "" : " already"}` +
      (paused ? `; continue it with 'podmin rollout resume ${ref.name} -n ${ref.namespace}'` : ""),
  );
}

/** The Deployment's rollout object, or undefined (none yet, or unreadable: reported). */
async function readRolloutState(
  ctx: CommandContext,
  store: Awaited<ReturnType<typeof storeOf>>,
  ref: Ref,
): Promise<RolloutState | undefined> {
  const object = rolloutStateObject(ref);
  try {
    const got = await getIfExists(store, object.key, { maxBytes: object.maxBytes });
    return got ? parseRolloutState(got.body, ref) : undefined;
  } catch (err) {
    ctx.err(`warning: ${(err as Error).message}`);
    return undefined;
  }
}

/** `rollout history`: every kept revision with its images; the current one marked. */
async function rolloutHistory(ctx: CommandContext, ref: Ref): Promise<void> {
  const { store, entry } = await entryOf(ctx, ref);
  const history = await readDeploymentHistory(store, ref);
  const rows = [["REVISION", "APPLIED", "SPEC", "IMAGES", ""]];
  // An earlier revision may hold the same spec (an undo): the newest one is the current.
  const current = history.revisions.findLast((r) => r.spec === entry.spec);
  for (const r of history.revisions) {
    const spec = await readSpec(store, { kind: "Deployment", ref: r.spec });
    rows.push([
      String(r.revision),
      r.appliedAt,
      r.spec.slice(0, 19),
      imagesOf(spec).map((i) => i.image).join(","),
      r === current ? "(current)" : "",
    ]);
  }
  if (history.revisions.length === 0) {
    ctx.err(
      `deployment ${ref.namespace}/${ref.name} has no recorded revision (applied before history was kept)`,
    );
    return;
  }
  for (const line of table(rows)) ctx.out(line.trimEnd());
}

/** `rollout undo [--to-revision N]`: applies an earlier revision's spec (a new revision). */
async function rolloutUndo(ctx: CommandContext, ref: Ref): Promise<void> {
  const { store, entry } = await entryOf(ctx, ref);
  const history = await readDeploymentHistory(store, ref);
  const to = stringFlag(ctx, "to-revision");
  let target;
  if (to !== undefined) {
    const n = Number(to);
    target = history.revisions.find((r) => r.revision === n);
    if (!target) {
      throw new UsageError(
        `--to-revision ${to}: no such revision of ${ref.namespace}/${ref.name}`,
        {
          hint: `the kept revisions: ${
            history.revisions.map((r) => r.revision).join(", ") || "none"
          } ('podmin rollout history ${ref.name}')`,
        },
      );
    }
  } else {
    // The newest revision before the one the index holds.
    const current = history.revisions.findLastIndex((r) => r.spec === entry.spec);
    const before = history.revisions.slice(0, current < 0 ? history.revisions.length : current)
      .filter((r) => r.spec !== entry.spec);
    target = before.at(-1);
    if (!target) {
      throw new UsageError(`deployment ${ref.namespace}/${ref.name} has no earlier revision`, {
        hint: `see 'podmin rollout history ${ref.name} -n ${ref.namespace}'`,
      });
    }
  }
  if (target.spec === entry.spec) {
    ctx.out(
      `deployment ${ref.namespace}/${ref.name} already runs revision ${target.revision}'s spec`,
    );
    return;
  }
  const spec = await readSpec(store, { kind: "Deployment", ref: target.spec }) as Deployment;
  const [change] = await applyResources({ store, resources: [spec] });
  ctx.out(
    `deployment ${ref.namespace}/${ref.name} rolled back to revision ${target.revision} ` +
      `(now revision ${change.revision}); follow it: podmin rollout status ${ref.name} -n ${ref.namespace}`,
  );
}

function parseSeconds(v: string): number {
  const m = /^(\d+)(s|m)?$/.exec(v);
  if (!m) {
    throw new UsageError(
      `--timeout: expected seconds (e.g. 600, 90s or 10m), got ${JSON.stringify(v)}`,
    );
  }
  return Number(m[1]) * (m[2] === "m" ? 60 : 1);
}

/**
 * `podmin setup`: publishes pinned dependencies (manifest last), mirrors the
 * Pod sandbox image, creates the CA parameters, renders user-data, generates
 * the OpenTofu configuration, saves it (bucket `infra/` and locally) BEFORE
 * applying it, applies it and waits for healthy capacity.
 *
 * `--dry-run --out DIR` writes the configuration, the user-data per NodeGroup
 * and the dependency plan under DIR and touches nothing else (no AWS call).
 *
 * Its help and flags: cli/setup/setup_command.ts. The phases live in modules of their own:
 * setup_plan.ts, cluster_resolution.ts, plan_summary.ts, setup_publish.ts (with sandbox_mirror.ts
 * and s3_admin.ts), render_config.ts, apply_config.ts and dry_run_output.ts.
 */

import { booleanFlag, type CommandContext } from "../../core/kit/cli_kit.ts";
import { applyConfig, waitHealthy } from "./apply_config.ts";
import { previewCluster, resolveCluster } from "./cluster_resolution.ts";
import { confirmPlan } from "./confirm.ts";
import { writeDryRun } from "./dry_run_output.ts";
import { planSummary } from "./plan_summary.ts";
import { renderConfig } from "./render_config.ts";
import { bucketExistsIn } from "./s3_admin.ts";
import { planSetup } from "./setup_plan.ts";
import { previewDependencies, publish } from "./setup_publish.ts";

/** Dependencies injected by tests. */
export interface SetupDeps {
  tofuBinary?: string;
  /** Reads the operator's answer to the confirmation (tests inject it). */
  readLine?: () => Promise<string | null>;
  isTerminal?: boolean;
  /** Capacity poll interval (tests shorten it). */
  capacityPollMs?: number;
}

/**
 * `podmin setup` in named phases: plan (flags, local artefacts) → resolve the cluster in AWS, or
 * preview it for a dry run → publish (bucket, dependencies, sandbox image, CAs, indexes) → render
 * the configuration → apply it (saved first) → wait for healthy capacity.
 */
export async function runSetup(ctx: CommandContext, deps: SetupDeps = {}): Promise<number> {
  const plan = await planSetup(ctx);
  if (plan.dryRun) {
    const resolved = previewCluster(plan);
    for (const line of planSummary(plan, resolved)) ctx.out(line);
    const published = await previewDependencies(plan);
    const rendered = renderConfig({ plan, resolved, published });
    await writeDryRun(plan.out!, {
      flags: plan.flags,
      bucket: plan.bucket,
      configBytes: rendered.configBytes,
      userData: rendered.userData,
      natUserData: rendered.natUserData,
      plan: published.plan,
      missing: plan.agents.missing,
    });
    const files = [
      ...Object.keys(rendered.userData),
      ...(rendered.natUserData ? ["nat64"] : []),
    ].map((n) => `${n}.sh`);
    ctx.out(
      `dry run: wrote ${plan.out}/main.tf.json, ${files.length} user-data file${
        files.length === 1 ? "" : "s"
      } (${files.join(", ")}) and dependencies.json; nothing was changed`,
    );
    return 0;
  }
  const bucketExists = await bucketExistsIn(plan.store);
  const resolved = await resolveCluster(plan, { bucketExists });
  for (const line of planSummary(plan, resolved, { bucketExists })) ctx.out(line);
  const verb = bucketExists ? "update" : "create";
  await confirmPlan({
    yes: booleanFlag(ctx, "yes"),
    question: `${verb[0].toUpperCase()}${
      verb.slice(1)
    } cluster ${plan.flags.cluster} as planned above?`,
    what: `${verb} cluster ${plan.flags.cluster}`,
    readLine: deps.readLine,
    isTerminal: deps.isTerminal,
  });
  const published = await publish(plan);
  const rendered = renderConfig({ plan, resolved, published });
  await applyConfig({ plan, rendered, tofuBinary: deps.tofuBinary });
  await waitHealthy({ plan, rendered, capacityPollMs: deps.capacityPollMs });
  ctx.out(
    `cluster ${plan.flags.cluster} is set up: ${plan.flags.nodeGroups.length} NodeGroup(s) healthy, bucket ${plan.store.url}`,
  );
  return 0;
}

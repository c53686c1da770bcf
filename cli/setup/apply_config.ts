/**
 * Phases 5 and 6 of `podmin setup`: the configuration saved (locally and in the bucket) BEFORE
 * OpenTofu applies it, then the wait for healthy capacity.
 */

import * as path from "node:path";
import { AutoScalingClient } from "@aws-sdk/client-auto-scaling";
import { INFRA_CONFIG } from "../../core/bucket/bucket_layout.ts";
import { refuseLockedState } from "./tofu_state.ts";
import { tofuApply } from "./tofu_runner.ts";
import { CAPACITY_TIMEOUTS, waitForCapacity } from "./wait_capacity.ts";
import type { SetupPlan } from "./setup_plan.ts";
import type { RenderedConfig } from "./render_config.ts";

/** Phase 5: save the configuration BEFORE applying it (an interrupted setup can be torn down). */
export async function applyConfig(options: {
  plan: SetupPlan;
  rendered: RenderedConfig;
  /** The OpenTofu binary (tests inject one). */
  tofuBinary?: string;
}): Promise<void> {
  const { plan: { workDir, store, log, region }, rendered: { configBytes } } = options;
  await Deno.mkdir(workDir, { recursive: true });
  await Deno.writeFile(path.join(workDir, "main.tf.json"), configBytes);
  // A killed tofu's lock: named with its release (in workDir, which now holds the
  // configuration), before the bucket's saved configuration changes.
  await refuseLockedState(store, {
    release: (id) =>
      `tofu -chdir=${workDir} init && tofu -chdir=${workDir} force-unlock -force ${id}, then run setup again`,
  });
  await store.put(INFRA_CONFIG, configBytes, { contentType: "application/json" });
  log(`configuration saved to ${workDir}/main.tf.json and ${store.url}/${INFRA_CONFIG}`);
  await tofuApply({ workDir, log, binary: options.tofuBinary, env: { AWS_REGION: region } });
}

/** Phase 6: wait for healthy capacity of every NodeGroup and NAT64 group. */
export async function waitHealthy(options: {
  plan: SetupPlan;
  rendered: RenderedConfig;
  /** Capacity poll interval (tests shorten it). */
  capacityPollMs?: number;
}): Promise<void> {
  const { topology } = options.rendered;
  await waitForCapacity({
    asg: new AutoScalingClient({ region: options.plan.region }),
    groups: [
      ...topology.nodeGroups.map((ng) => ({
        asgName: ng.asgName,
        label: `NodeGroup ${ng.name}`,
        timeoutMs: CAPACITY_TIMEOUTS.nodeGroupMs,
      })),
      ...topology.nat64.map((n) => ({
        asgName: n.asgName,
        label: `NAT64 ${n.key}`,
        timeoutMs: CAPACITY_TIMEOUTS.nat64Ms,
      })),
    ],
    log: options.plan.log,
    pollMs: options.capacityPollMs,
  });
}

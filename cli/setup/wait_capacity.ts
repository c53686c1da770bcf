/** Waits for Auto Scaling Groups to reach their desired healthy capacity, with progress. */

import { AutoScalingClient, DescribeAutoScalingGroupsCommand } from "@aws-sdk/client-auto-scaling";
import { PodminError } from "../../core/kit/errors.ts";
import { sleep } from "../../core/kit/retry.ts";

/** A group to wait for and its deadline. */
export interface CapacityWait {
  asgName: string;
  /** Printable role, e.g. "NodeGroup workers" or "NAT64 us-east-1a". */
  label: string;
  timeoutMs: number;
}

/** Per-group timeouts from the product documents. */
export const CAPACITY_TIMEOUTS = { nodeGroupMs: 3 * 60_000, nat64Ms: 15 * 60_000 } as const;

/** Polls until every group has `desired` InService+Healthy instances; throws on a deadline. */
export async function waitForCapacity(options: {
  asg: AutoScalingClient;
  groups: CapacityWait[];
  log: (line: string) => void;
  pollMs?: number;
}): Promise<void> {
  const start = Date.now();
  const pending = new Map(options.groups.map((g) => [g.asgName, g]));
  const last = new Map<string, string>();
  while (pending.size) {
    const out = await options.asg.send(
      new DescribeAutoScalingGroupsCommand({ AutoScalingGroupNames: [...pending.keys()] }),
    );
    for (const g of out.AutoScalingGroups ?? []) {
      const wait = pending.get(g.AutoScalingGroupName!);
      if (!wait) continue;
      const healthy = (g.Instances ?? []).filter((i) =>
        i.LifecycleState === "InService" && i.HealthStatus === "Healthy"
      ).length;
      const desired = g.DesiredCapacity ?? 0;
      const line = `${wait.label}: ${healthy}/${desired} healthy`;
      if (last.get(wait.asgName) !== line) {
        options.log(line);
      }
      last.set(wait.asgName, line);
      if (healthy >= desired) {
        pending.delete(wait.asgName);
      }
    }
    for (const w of pending.values()) {
      if (Date.now() - start > w.timeoutMs) {
        throw new PodminError(
          `${w.label} did not reach its healthy capacity within ${
            Math.round(w.timeoutMs / 60_000)
          } min`,
          {
            hint:
              `inspect the group ${w.asgName} (activity history, instance console); the infrastructure stays as it is`,
          },
        );
      }
    }
    if (pending.size) await sleep(options.pollMs ?? 5000);
  }
}

/** What `podmin setup --dry-run --out DIR` writes: the configuration, user-data and dependency plan. */

import * as path from "node:path";
import type { Architecture } from "../../core/bucket/dependency_manifest.ts";
import type { PlannedDependency } from "./dependency_sync.ts";
import type { SetupFlags } from "./setup_flags.ts";

/** Writes main.tf.json, user-data/<NodeGroup>.sh (and nat64.sh) and dependencies.json under `out`. */
export async function writeDryRun(
  out: string,
  o: {
    flags: SetupFlags;
    bucket: string;
    configBytes: Uint8Array;
    userData: Record<string, string>;
    natUserData?: string;
    plan: PlannedDependency[];
    missing: Architecture[];
  },
): Promise<void> {
  await Deno.mkdir(path.join(out, "user-data"), { recursive: true });
  await Deno.writeFile(path.join(out, "main.tf.json"), o.configBytes);
  for (const [name, text] of Object.entries(o.userData)) {
    await Deno.writeTextFile(path.join(out, "user-data", `${name}.sh`), text);
  }
  if (o.natUserData) {
    await Deno.writeTextFile(path.join(out, "user-data", "nat64.sh"), o.natUserData);
  }
  const plan = {
    cluster: o.flags.cluster,
    region: o.flags.region,
    bucket: o.bucket,
    note:
      "dry run: nothing was uploaded or created; sizes of files never downloaded are unknown (0) until setup fetches them",
    dependencies: o.plan.map((p) => ({
      name: p.name,
      version: p.version,
      arch: p.arch,
      sha256: p.sha256,
      ...(p.sha256Url ? { sha256Url: p.sha256Url } : {}),
      size: p.size ?? null,
      source: p.source,
    })),
    missing: o.missing.map((arch) => ({
      name: "podmin-agent",
      arch,
      hint: "deno task bundle or compile, or --agent-binary",
    })),
  };
  await Deno.writeTextFile(
    path.join(out, "dependencies.json"),
    JSON.stringify(plan, null, 2) + "\n",
  );
}

/**
 * What `podmin images` and `podmin status` do: the cluster as its bucket shows it (their help:
 * cli/cluster_view_commands.ts).
 */

import { isStale } from "../core/bucket/node_record.ts";
import { type CommandContext } from "../core/kit/cli_kit.ts";
import { REGISTRY_HOSTNAME } from "../core/model/image_ref.ts";
import type { Deployment } from "../core/model/resources.ts";
import {
  listTags,
  missingImages,
  nodesSummary,
  readNodeRecords,
  readObjects,
  storeOf,
} from "./cluster_reads.ts";
import { outputFormat, table } from "./output_format.ts";

/** `podmin images`. */
export async function runImages(ctx: CommandContext): Promise<number | void> {
  const output = outputFormat(ctx, { formats: ["table", "json"], fallback: "table" });
  const tags = await listTags(await storeOf(ctx));
  if (output === "json") {
    ctx.out(JSON.stringify(tags, null, 2));
    return;
  }
  if (!tags.length) {
    ctx.err("no images in the store (add them with 'podmin push' or 'podmin mirror')");
    return;
  }
  const rows = [["REPOSITORY", "TAG", "DIGEST"]];
  for (const t of tags) {
    rows.push([`${REGISTRY_HOSTNAME}/${t.repository}`, t.tag, t.digest.slice(0, 19)]);
  }
  table(rows).forEach((l) => ctx.out(l));
}

const plural = (n: number, word: string, many = `${word}s`) => `${n} ${n === 1 ? word : many}`;

/** `podmin status`. */
export async function runStatus(ctx: CommandContext): Promise<number | void> {
  const store = await storeOf(ctx);
  const deployments = await readObjects(store, "Deployment");
  const services = await readObjects(store, "Service");
  const tags = await listTags(store);
  const nodes = await readNodeRecords(store);
  const missing = await missingImages(store, deployments.map((d) => d.spec as Deployment));
  const perGroup = new Map<string, number>();
  for (const d of deployments) perGroup.set(d.nodeGroup!, (perGroup.get(d.nodeGroup!) ?? 0) + 1);
  const groups = [...perGroup].sort(([a], [b]) => (a < b ? -1 : 1))
    .map(([g, n]) => `NodeGroup ${g}: ${n}`).join(", ");
  const line = (key: string, value: string) => ctx.out(`${`${key}:`.padEnd(14)}${value}`.trimEnd());
  line("Bucket", store.url);
  line("Nodes", nodesSummary(nodes.records));
  for (const p of nodes.problems) ctx.err(`warning: unreadable node record ${p}`);
  line("Deployments", `${deployments.length}${groups ? ` (${groups})` : ""}`);
  const live = nodes.records.filter((r) => !isStale(r));
  for (const d of deployments) {
    const inGroup = live.filter((r) => r.nodeGroup === d.nodeGroup);
    if (!inGroup.length) continue;
    const at = inGroup.filter((r) =>
      r.deployments.some((x) =>
        x.namespace === d.namespace && x.name === d.name && x.spec === d.ref
      )
    );
    const ready = at.filter((r) =>
      r.deployments.some((x) => x.namespace === d.namespace && x.name === d.name && x.ready)
    );
    const readyText = at.some((r) => r.deployments.some((x) => x.ready !== undefined))
      ? `, Ready on ${ready.length}`
      : "";
    ctx.out(
      `  ${d.namespace}/${d.name}: current spec on ${at.length} of ${inGroup.length} ` +
        `node(s) of NodeGroup ${d.nodeGroup}${readyText}` +
        (at.length < inGroup.length
          ? ` (not yet: ${inGroup.filter((r) => !at.includes(r)).map((r) => r.nodeId).join(", ")})`
          : ""),
    );
  }
  line("Services", String(services.length));
  const repos = new Set(tags.map((t) => t.repository)).size;
  line("Images", `${plural(repos, "repository", "repositories")}, ${plural(tags.length, "tag")}`);
  if (!missing.length) {
    ctx.out("Images missing from the store: none");
    return;
  }
  ctx.out("Images missing from the store:");
  for (const m of missing) ctx.out(`  ${m.image} (${m.namespace}/${m.name})`);
}

/**
 * `deno task faults`: runs every attack of the fault campaign at full size (10,000 cases each,
 * `FAULT_CASES` overrides; the outages are 60 s each of refuse, reset and black-hole, against
 * moto; the kill -9 attacks run at most their own trial counts), bounded in time (`FAULT_SECONDS` per attack, default 300), printing
 * what each tried and what it found. Exits 1 when anything was found. `FAULT_SEED` replays a run.
 */

import type { Attack } from "./campaign.ts";
import { envFuzz } from "./env_fuzz.ts";
import { bucketObjectFuzz, resourceFuzz } from "./input_fuzz.ts";
import { killAgentAttack } from "./kill_agent.ts";
import { killCliAttack } from "./kill_cli.ts";
import { outageAttack } from "./outage.ts";
import { registryFuzz } from "./registry_fuzz.ts";

const ATTACKS: Attack[] = [
  registryFuzz,
  resourceFuzz,
  bucketObjectFuzz,
  envFuzz,
  killCliAttack("fs", { trials: 50 }),
  killCliAttack("moto", { trials: 50 }),
  killAgentAttack({ trials: 40 }),
  outageAttack(60_000),
];

const cases = Number(Deno.env.get("FAULT_CASES") ?? 10_000);
const seconds = Number(Deno.env.get("FAULT_SECONDS") ?? 300);
const seed = Number(Deno.env.get("FAULT_SEED") ?? Date.now() % 2 ** 31);
let found = 0;
console.log(`fault campaign: ${ATTACKS.length} attacks, ${cases} cases each, seed ${seed}`);
for (const attack of ATTACKS) {
  console.log(`\n== ${attack.name}: ${attack.tries}`);
  const report = await attack.run({ cases, seed, deadline: Date.now() + seconds * 1000 });
  console.log(
    `tried ${report.tried} cases in ${report.ms} ms; ${report.findings.length} finding(s)`,
  );
  if (report.kills) {
    const k = report.kills;
    console.log(
      `kills: ${k.midRun} of ${k.trials} landed mid-run (after a write, before completion), ` +
        `${k.beforeWrite} before any write, ${k.finished} after completion`,
    );
  }
  for (const f of report.findings) console.log(`  FOUND ${f}`);
  found += report.findings.length;
}
console.log(`\nfault campaign: ${found} finding(s)`);
Deno.exit(found ? 1 : 0);

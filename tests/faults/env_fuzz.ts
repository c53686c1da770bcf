/**
 * Fuzzes vmconfig's strict env-file reader (`env_read` of lib/validate.sh, from VMCONFIG_ASSETS)
 * with generated files (`env_cases.ts`). One bash process checks a whole batch of files, printing
 * one verdict line per file (each file in a subshell), so no case pays for a bash start. Findings: a valid file refused or
 * an invalid one accepted (by the oracle), an exit code other than 0/1 (a crash), stderr that is
 * not the validator's own log, no verdict within 5 s (a hang), or a file written outside the root.
 */

import * as path from "node:path";
import { VMCONFIG_ASSETS } from "../../vmconfig/assets.ts";
import { type Attack, Findings, Rand } from "./campaign.ts";
import { type EnvCase, envCase } from "./env_cases.ts";

/** No verdict for this long is a hang. */
const CASE_BOUND_MS = 5_000;
const BATCH = 1_000;
/** Bash processes at once (the machine has 2 cores). */
const WORKERS = 2;

const DRIVER = `
set -u
source "$1/common.sh"
source "$1/validate.sh"
err=$2
while IFS=' ' read -r id file schema kind; do
  ( declare -A got=(); env_read "$file" "$schema" "$kind" got ) 2>"$err"
  rc=$?
  stray=0
  while IFS= read -r l || [[ -n $l ]]; do
    [[ $l == "podmin-vmconfig: "* ]] || stray=1
  done <"$err"
  printf '%s %s %s\\n' "$id" "$rc" "$stray"
done
`;

/** Runs `ids` (files under root/c/) through one bash; returns verdicts, stopping at a hang. */
async function runBatch(
  o: { tmp: string; root: string; cases: Map<number, EnvCase>; ids: number[]; err: string },
): Promise<{ verdicts: Map<number, { rc: number; stray: boolean }>; hung?: number }> {
  const list = o.ids.map((id) => `${id} /c/${id}.env ${o.cases.get(id)!.schema} node\n`).join("");
  const child = new Deno.Command("bash", {
    args: ["-c", DRIVER, "env-fuzz", path.join(o.tmp, "lib"), o.err],
    cwd: path.join(o.tmp, "cwd"),
    env: { LC_ALL: "C", PODMIN_ROOT: o.root, HOME: path.join(o.tmp, "cwd"), PATH: "/usr/bin:/bin" },
    clearEnv: true,
    stdin: "piped",
    stdout: "piped",
    stderr: "null",
  }).spawn();
  const w = child.stdin.getWriter();
  await w.write(new TextEncoder().encode(list));
  await w.close();
  const verdicts = new Map<number, { rc: number; stray: boolean }>();
  const reader = child.stdout.pipeThrough(new TextDecoderStream()).getReader();
  let buf = "";
  let hung: number | undefined;
  while (true) {
    let timer: ReturnType<typeof setTimeout> | undefined;
    const next = await Promise.race([
      reader.read(),
      new Promise<"hang">((r) => timer = setTimeout(() => r("hang"), CASE_BOUND_MS)),
    ]);
    clearTimeout(timer);
    if (next === "hang") {
      hung = o.ids[verdicts.size];
      child.kill("SIGKILL");
      await reader.cancel();
      break;
    }
    if (next.done) break;
    buf += next.value;
    const lines = buf.split("\n");
    buf = lines.pop()!;
    for (const line of lines) {
      const [id, rc, stray] = line.split(" ").map(Number);
      verdicts.set(id, { rc, stray: stray === 1 });
    }
  }
  await child.status;
  return { verdicts, hung };
}

/** Lists every path below `dir` (relative), for the "nothing written outside" check. */
async function tree(dir: string, prefix = ""): Promise<string[]> {
  const out: string[] = [];
  for await (const e of Deno.readDir(dir)) {
    const rel = `${prefix}${e.name}`;
    out.push(rel);
    if (e.isDirectory) out.push(...await tree(path.join(dir, e.name), `${rel}/`));
  }
  return out.sort();
}

/** The attack: `cases` generated env files, in batches of 500 per bash process, 2 at once. */
export const envFuzz: Attack = {
  name: "vmconfig-env",
  tries:
    "mutated env files (3 layers) through vmconfig's env_read, 500 per bash process, 2 at once",
  async run({ cases, seed, deadline }) {
    const t0 = Date.now();
    const findings = new Findings();
    const r = new Rand(seed);
    const tmp = await Deno.makeTempDir({ prefix: "podmin-fault-env-" });
    const root = path.join(tmp, "root");
    const canary = path.join(tmp, "canary");
    let tried = 0;
    const counts = { accept: 0, refuse: 0, any: 0 };
    try {
      await Deno.mkdir(path.join(tmp, "lib"));
      await Deno.mkdir(path.join(tmp, "cwd"));
      await Deno.mkdir(path.join(root, "c"), { recursive: true });
      for (const lib of ["common.sh", "validate.sh"]) {
        await Deno.writeTextFile(path.join(tmp, "lib", lib), VMCONFIG_ASSETS[`lib/${lib}`]);
      }
      for (let w = 0; w < WORKERS; w++) await Deno.writeTextFile(path.join(tmp, `err${w}`), "");
      const expectedTree = await tree(tmp);
      let batch = new Map<number, EnvCase>();
      /** Runs `ids` through bash until every one has a verdict or hung; records findings. */
      const checkIds = async (o: { ids: number[]; err: string }) => {
        let ids = o.ids;
        while (ids.length) {
          const { verdicts, hung } = await runBatch({ tmp, root, cases: batch, ids, err: o.err });
          for (const [id, v] of verdicts) {
            const c = batch.get(id)!;
            const what = `case ${id} (seed ${seed}, ${c.schema}, ${c.mutation})`;
            counts[c.expect]++;
            if (v.rc !== 0 && v.rc !== 1) findings.add(`crash (exit ${v.rc})`, what);
            if (v.stray) findings.add("stderr not from the validator", what);
            if (c.expect === "accept" && v.rc !== 0) findings.add("valid file refused", what);
            if (c.expect === "refuse" && v.rc === 0) findings.add("invalid file accepted", what);
          }
          if (hung === undefined) {
            const missing = ids.filter((id) => !verdicts.has(id));
            if (missing.length) {
              findings.add("no verdict", `${missing.length} case(s) from ${missing[0]}`);
            }
            return;
          }
          findings.add("hang", `case ${hung} (seed ${seed}, ${batch.get(hung)!.mutation})`);
          ids = ids.slice(ids.indexOf(hung) + 1);
        }
      };
      while (tried < cases && Date.now() < deadline) {
        batch = new Map<number, EnvCase>();
        for (let id = tried; id < Math.min(cases, tried + BATCH); id++) {
          const c = envCase(r, canary);
          batch.set(id, c);
          await Deno.writeFile(path.join(root, "c", `${id}.env`), c.bytes);
        }
        const all = [...batch.keys()];
        const half = Math.ceil(all.length / WORKERS);
        await Promise.all(
          Array.from(
            { length: WORKERS },
            (_, w) =>
              checkIds({
                ids: all.slice(w * half, (w + 1) * half),
                err: path.join(tmp, `err${w}`),
              }),
          ),
        );
        for (const id of batch.keys()) await Deno.remove(path.join(root, "c", `${id}.env`));
        tried += batch.size;
        const now = await tree(tmp);
        const extra = now.filter((p) => !expectedTree.includes(p));
        if (extra.length) findings.add("file written", extra.slice(0, 5).join(", "));
      }
      console.log(
        `  ${tried} files: ${counts.accept} known-valid, ${counts.refuse} known-invalid, ` +
          `${counts.any} random (no oracle); ${Math.round(tried / ((Date.now() - t0) / 1000))} ` +
          `files/s`,
      );
    } finally {
      await Deno.remove(tmp, { recursive: true });
    }
    return { name: this.name, tried, findings: findings.lines, ms: Date.now() - t0 };
  },
};

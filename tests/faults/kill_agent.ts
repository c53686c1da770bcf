/**
 * kill -9 of `podmin-agent run --once` at seeded random moments across its measured duration,
 * while it writes static Pod manifests and value generations (moto: bucket and Parameter Store).
 * Each trial first changes the desired state (new images, new values, or both). After the kill:
 * the manifest directory holds only complete JSON files (dot-files are the agent's own temp
 * files, which kubelet ignores), and every visible value (`<key>` links and the `..data`
 * generation) is a complete value that was set. A re-run must exit 0 with every manifest and
 * value current.
 */

import * as path from "node:path";
import { moto, putParameter } from "../support/moto.ts";
import { agent, nodeAgentArgs, podmin } from "../support/programs.ts";
import { type Attack, Findings, Rand } from "./campaign.ts";
import { startupMs } from "./kill_cli.ts";
import { killAfter } from "./kill_run.ts";

const DEPLOYMENTS = ["web", "api", "worker"];
const KEYS = ["db-password", "api-token"];

function resources(tag: string): string {
  return DEPLOYMENTS.map((name) =>
    `apiVersion: podmin.dev/v1\nkind: Deployment\nmetadata: {name: ${name}}\nspec:\n` +
    `  nodeGroup: workers\n  secrets: [${KEYS.map((k) => `{key: ${k}, from: ssm}`).join(", ")}]\n` +
    `  template: {spec: {containers: [{name: c, image: "registry.podmin.internal/apps/${name}:${tag}"}]}}\n`
  ).join("---\n");
}

/** The entries of a directory (none when it does not exist). */
async function names(dir: string): Promise<string[]> {
  try {
    return (await Array.fromAsync(Deno.readDir(dir))).map((e) => e.name);
  } catch {
    return [];
  }
}

/** Problems of the node's directories right after a kill (torn or half-visible files). */
async function tornFiles(o: { base: string; everSet: Set<string> }): Promise<string[]> {
  const problems: string[] = [];
  const manifests = path.join(o.base, "manifests");
  for (const name of await names(manifests)) {
    if (name.startsWith(".")) continue;
    const text = await Deno.readTextFile(path.join(manifests, name)).catch(() => "{}");
    try {
      JSON.parse(text);
    } catch {
      problems.push(`manifests/${name}: not complete JSON (${text.length} bytes)`);
    }
  }
  for (const name of DEPLOYMENTS) {
    const dir = path.join(o.base, "secrets", `default_${name}`);
    const hasData = await Deno.lstat(path.join(dir, "..data")).then(() => true, () => false);
    for (const key of KEYS) {
      const visible = await Deno.lstat(path.join(dir, key)).then(() => true, () => false);
      const paths = [
        visible ? path.join(dir, key) : "",
        hasData ? path.join(dir, "..data", key) : "",
      ];
      for (const p of paths.filter(Boolean)) {
        const v = await Deno.readTextFile(p).catch(() => undefined);
        if (v === undefined) problems.push(`${path.relative(o.base, p)}: visible but unreadable`);
        else if (!o.everSet.has(v)) {
          problems.push(`${path.relative(o.base, p)}: torn value ${JSON.stringify(v)}`);
        }
      }
    }
  }
  return problems;
}

/**
 * What the agent writes on the node (manifests and values: names, link targets and contents), as
 * one string: a kill landed after a write when it differs from the one taken before the run.
 */
async function nodeFingerprint(base: string): Promise<string> {
  const lines: string[] = [];
  const walk = async (dir: string): Promise<void> => {
    for (const name of (await names(dir)).sort()) {
      const p = path.join(dir, name);
      const st = await Deno.lstat(p).catch(() => undefined);
      if (!st) continue;
      const rel = path.relative(base, p);
      if (st.isSymlink) lines.push(`${rel} -> ${await Deno.readLink(p).catch(() => "?")}`);
      else if (st.isDirectory) await walk(p);
      else lines.push(`${rel} = ${await Deno.readTextFile(p).catch(() => "?")}`);
    }
  };
  await walk(path.join(base, "manifests"));
  await walk(path.join(base, "secrets"));
  return lines.join("\n");
}

/** What is not current after the re-run, or an empty list. */
async function notCurrent(
  o: { base: string; tag: string; values: Map<string, string> },
): Promise<string[]> {
  const problems: string[] = [];
  for (const name of DEPLOYMENTS) {
    const file = path.join(o.base, "manifests", `podmin_default_${name}.json`);
    const text = await Deno.readTextFile(file).catch(() => "");
    if (!text.includes(`apps/${name}:${o.tag}"`)) problems.push(`${name}: manifest not current`);
    for (const key of KEYS) {
      const v = await Deno.readTextFile(path.join(o.base, "secrets", `default_${name}`, key))
        .catch(() => undefined);
      if (v !== o.values.get(`${name}/${key}`)) problems.push(`${name}/${key}: value not current`);
    }
  }
  const stray = (await names(path.join(o.base, "manifests"))).filter((n) => n.startsWith("."));
  if (stray.length) problems.push(`temp files left after a clean pass: ${stray.join(", ")}`);
  return problems;
}

/** Builds the attack: at most `trials` kills of the agent. */
export function killAgentAttack(options: { trials: number }): Attack {
  return {
    name: "kill9-agent",
    tries: "kill -9 of podmin-agent run --once mid-pass, writing manifests and values (moto)",
    async run({ cases, seed, deadline }) {
      const t0 = Date.now();
      const findings = new Findings();
      const r = new Rand(seed);
      const m = await moto();
      const bucket = `s3://${await m.createBucket()}`;
      const tmp = await Deno.makeTempDir({ prefix: "podmin-fault-kill-agent-" });
      const base = path.join(tmp, "node");
      const args = [...nodeAgentArgs({ bucket, nodeGroup: "workers", base }), "--once"];
      const files = { "1": path.join(tmp, "v1.yaml"), "2": path.join(tmp, "v2.yaml") };
      await Deno.writeTextFile(files["1"], resources("1"));
      await Deno.writeTextFile(files["2"], resources("2"));
      const values = new Map<string, string>();
      const everSet = new Set<string>();
      const setValue = async (name: string, key: string, v: string) => {
        await putParameter(`/test/default/${name}/${key}`, v);
        values.set(`${name}/${key}`, v);
        everSet.add(v);
      };
      let tag: "1" | "2" = "1";
      let duration = 0;
      let startup = 0;
      let tried = 0;
      const stats = { killed: 0, midRun: 0, finished: 0, atMarker: 0, linksMissing: 0 };
      try {
        for (const name of DEPLOYMENTS) {
          for (const key of KEYS) await setValue(name, key, `${name}-${key}-0`);
        }
        const applied = await podmin(["--bucket", bucket, "apply", "-f", files[tag]]);
        if (applied.code !== 0) throw new Error(`apply: ${applied.stderr}`);
        const a0 = Date.now();
        const first = await agent(args);
        duration = Date.now() - a0;
        startup = await startupMs(true);
        if (first.code !== 0) findings.add("first pass failed", first.stderr.trim().slice(-400));
        for (; tried < Math.min(cases, options.trials) && Date.now() < deadline; tried++) {
          const change = r.pick(["images", "values", "both"] as const);
          if (change !== "values") {
            tag = tag === "1" ? "2" : "1";
            const ran = await podmin(["--bucket", bucket, "apply", "-f", files[tag]]);
            if (ran.code !== 0) throw new Error(`apply: ${ran.stderr}`);
          }
          if (change !== "images") {
            for (const name of DEPLOYMENTS) {
              for (const key of KEYS) {
                // A long value makes the write of each file take a moment.
                if (r.int(2)) {
                  await setValue(name, key, `${name}-${key}-${tried}-${"x".repeat(r.int(4096))}`);
                }
              }
            }
          }
          // Half the trials kill at the n-th value swap the agent logs, half at a random moment past
          // the measured start-up.
          const marker = change !== "images" && r.int(2)
            ? { text: "values generation swapped", count: 1 + r.int(2) }
            : undefined;
          const delay = marker
            ? 4 * duration
            : Math.floor(startup + Math.max(0, duration - startup) * 1.2 * r.next());
          const what = `trial ${tried} (seed ${seed}, ${change}) killed ` +
            (marker ? `at swap ${marker.count}` : `at ${delay} ms`);
          const before = await nodeFingerprint(base);
          const k = await killAfter(args, { ms: delay, agent: true, marker });
          const wrote = await nodeFingerprint(base) !== before;
          if (k.killed) stats.killed++;
          else stats.finished++;
          if (k.killed && wrote) stats.midRun++;
          if (k.marked && k.killed) stats.atMarker++;
          console.log(
            `  ${what}: ` +
              (k.killed
                ? (wrote ? "killed mid-pass" : "killed before any write")
                : "finished first"),
          );
          for (const p of await tornFiles({ base, everSet })) {
            findings.add("after kill", `${what}: ${p}`);
          }
          for (const name of DEPLOYMENTS) {
            const dir = path.join(base, "secrets", `default_${name}`);
            const hasData = await Deno.lstat(path.join(dir, "..data")).then(
              () => true,
              () => false,
            );
            for (const key of KEYS) {
              const link = await Deno.lstat(path.join(dir, key)).then(() => true, () => false);
              if (hasData && !link) stats.linksMissing++;
            }
          }
          const again = await agent(args);
          if (again.code !== 0) {
            findings.add(
              "re-run failed",
              `${what}: exit ${again.code}: ${again.stderr.trim().slice(-300)}`,
            );
          }
          for (const p of await notCurrent({ base, tag, values })) {
            findings.add("re-run did not converge", `${what}: ${p}`);
          }
        }
      } finally {
        await Deno.remove(tmp, { recursive: true });
      }
      console.log(
        `  a pass measured ${duration} ms (start-up ${startup} ms); ${stats.killed} killed ` +
          `(${stats.midRun} of them after a write to the node), ` +
          `${stats.finished} finished before the kill; ${stats.atMarker} killed at a logged ` +
          `value swap; ${stats.linksMissing} <key> link(s) ` +
          `missing right after a kill (the spec's crash window; each re-run repaired them)`,
      );
      return {
        name: this.name,
        tried,
        findings: findings.lines,
        ms: Date.now() - t0,
        kills: {
          trials: tried,
          midRun: stats.midRun,
          beforeWrite: stats.killed - stats.midRun,
          finished: stats.finished,
        },
      };
    },
  };
}

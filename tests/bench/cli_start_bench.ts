/**
 * Benchmark of CLI start from the release bundle (`cli/build.sh bundle`), printed figures:
 *
 * - `podmin --help`, and `podmin get deployments` on a filesystem bucket holding 20 Deployments,
 *   each a fresh `deno run -A dist/podmin.js …` process: wall time from spawn to exit, median.
 * - Peer: `deno run -A` of an empty script, in the same rounds (empty, help, get, empty, …), so
 *   the machine's drift hits all three alike.
 *
 * Two warm-up rounds fill Deno's code cache first, as any second run of a command finds it.
 * Goal (issue 15): help ≤ 3× and get deployments ≤ 6× the empty script's median.
 * Run: deno run -A tests/bench/cli_start_bench.ts [--rounds N] [--dist DIR] (or with every other
 * benchmark: deno task bench). `--dist` measures an existing build (DIR/podmin.js) instead of
 * building one, e.g. an older commit's for a before/after comparison.
 */

import * as path from "node:path";
import { parseArgs } from "node:util";
import { benchSmoke, median, recordFigures } from "./bench_output.ts";

const { values } = parseArgs({
  args: Deno.args,
  options: {
    rounds: { type: "string", default: benchSmoke() ? "2" : "21" },
    dist: { type: "string" },
  },
});
const ROUNDS = Number(values.rounds);
const WARMUP = 2;
const DEPLOYMENTS = 20;
const root = path.join(import.meta.dirname!, "../..");

/** Runs a command to its end; returns its wall time in ms and what it printed. */
async function timed(args: string[], cwd: string): Promise<{ ms: number; out: string }> {
  const t0 = performance.now();
  const r = await new Deno.Command(Deno.execPath(), {
    args,
    cwd,
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  }).output();
  const ms = performance.now() - t0;
  const dec = new TextDecoder();
  if (!r.success) {
    throw new Error(`deno ${args.join(" ")} exited ${r.code}: ${dec.decode(r.stderr)}`);
  }
  return { ms, out: dec.decode(r.stdout) };
}

function deploymentsYaml(n: number): string {
  return Array.from({ length: n }, (_, i) =>
    `apiVersion: podmin.dev/v1
kind: Deployment
metadata:
  name: app-${i}
  labels: { app: app-${i} }
spec:
  nodeGroup: default
  template:
    metadata:
      labels: { app: app-${i} }
    spec:
      containers:
        - name: main
          image: registry.podmin.internal/apps/app:${i}
`).join("---\n");
}

const dir = await Deno.makeTempDir({ prefix: "podmin-bench-cli-" });
try {
  const dist = values.dist ? path.resolve(values.dist) : path.join(dir, "dist");
  if (!values.dist) {
    const built = await new Deno.Command("bash", {
      args: [path.join(root, "cli/build.sh"), "bundle"],
      cwd: root,
      env: { PODMIN_DIST: dist },
      stdout: "piped",
      stderr: "piped",
    }).output();
    if (!built.success) throw new Error(`build failed: ${new TextDecoder().decode(built.stderr)}`);
  }
  const podmin = path.join(dist, "podmin.js");
  const empty = path.join(dir, "empty.js");
  await Deno.writeTextFile(empty, "");
  const bucket = `file://${dir}/bucket`;
  const manifests = path.join(dir, "apps.yaml");
  await Deno.writeTextFile(manifests, deploymentsYaml(DEPLOYMENTS));
  await timed(["run", "-A", podmin, "--bucket", bucket, "create-bucket"], dir);
  await timed(["run", "-A", podmin, "--bucket", bucket, "apply", "-f", manifests], dir);

  const commands = {
    empty: ["run", "-A", empty],
    help: ["run", "-A", podmin, "--help"],
    get: ["run", "-A", podmin, "--bucket", bucket, "get", "deployments"],
  };
  const ms: Record<keyof typeof commands, number[]> = { empty: [], help: [], get: [] };
  for (let round = 0; round < WARMUP + ROUNDS; round++) {
    for (const name of ["empty", "help", "get"] as const) {
      const r = await timed(commands[name], dir);
      if (name === "help" && !r.out.includes("\nCommands:\n")) {
        throw new Error("help printed no commands");
      }
      if (name === "get" && r.out.trimEnd().split("\n").length !== DEPLOYMENTS + 1) {
        throw new Error(`get deployments printed:\n${r.out}`);
      }
      if (round >= WARMUP) ms[name].push(r.ms);
    }
  }
  const pairRatio = (name: "help" | "get") => median(ms[name].map((x, i) => x / ms.empty[i]));
  const figures = {
    cli_empty_deno_ms: median(ms.empty),
    cli_help_ms: median(ms.help),
    cli_get_deployments_ms: median(ms.get),
  };
  console.log(`CLI start from the bundle, ${ROUNDS} interleaved rounds (wall ms, median)`);
  console.log(`  deno run of an empty script        ${figures.cli_empty_deno_ms.toFixed(1)}`);
  for (
    const [label, name, figure, goal] of [
      ["podmin --help", "help", figures.cli_help_ms, 3],
      [
        `podmin get deployments (${DEPLOYMENTS}, file://)`,
        "get",
        figures.cli_get_deployments_ms,
        6,
      ],
    ] as const
  ) {
    const ratio = figure / figures.cli_empty_deno_ms;
    console.log(
      `  ${label.padEnd(34)} ${figure.toFixed(1)}  = ${ratio.toFixed(2)}× empty deno ` +
        `(per-round median ${pairRatio(name).toFixed(2)}×; goal ≤ ${goal}×: ${
          ratio <= goal ? "met" : "NOT met"
        })`,
    );
  }
  await recordFigures(figures);
} finally {
  await Deno.remove(dir, { recursive: true });
}

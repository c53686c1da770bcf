/**
 * CLI start loads only what the command needs (issue 15): the command table holds help and flags,
 * each implementation is a literal dynamic import (so `deno bundle` and `deno compile` carry it),
 * and reading a bucket loads no npm package: not on a filesystem bucket, and not on S3 either
 * (core/store/s3_store.ts signs its own requests).
 *
 * Two real peers judge it: Deno's own module graph (`deno info --json`, which marks dynamic
 * imports), and Deno's loader run with `--no-npm`, which fails the moment any npm package (AWS
 * SDK, x509, YAML) is imported, statically or dynamically.
 */

import assert from "node:assert/strict";
import { REGISTRY_HOSTNAME } from "../../core/model/image_ref.ts";
import { DEFAULT_SANDBOX_IMAGE } from "../../vmconfig/render_user_data.ts";
import { programOf } from "../../cli/program.ts";
import { loadCommands } from "../../core/kit/cli_kit.ts";
import { cli, freshBucket, HELLO } from "./harness.ts";
import { moto, motoEnv } from "../support/moto.ts";

const root = new URL("../../", import.meta.url);
const main = new URL("cli/main.ts", root).pathname;

interface GraphModule {
  specifier: string;
  dependencies?: { code?: { specifier: string }; isDynamic?: boolean }[];
}

/** The module graph of `entry` (default cli/main.ts) as Deno resolves it. */
async function moduleGraph(entry = main): Promise<Map<string, GraphModule>> {
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["info", "--json", entry],
    stdout: "piped",
    stderr: "piped",
  }).output();
  assert.equal(out.code, 0, new TextDecoder().decode(out.stderr));
  const graph = JSON.parse(new TextDecoder().decode(out.stdout));
  return new Map(graph.modules.map((m: GraphModule) => [m.specifier, m]));
}

/** What `root` loads before it runs: its static imports, transitively (repository-relative). */
function staticClosure(graph: Map<string, GraphModule>, rootFile: string): string[] {
  const seen = new Set<string>();
  const stack = [new URL(rootFile, root).href];
  while (stack.length) {
    const s = stack.pop()!;
    if (seen.has(s)) continue;
    seen.add(s);
    for (const d of graph.get(s)?.dependencies ?? []) {
      if (!d.isDynamic && d.code) stack.push(d.code.specifier);
    }
  }
  return [...seen].map((s) => s.replace(root.href, "")).sort();
}

/** Runs the CLI from source with `--no-npm`. */
async function noNpm(args: string[], env: Record<string, string> = {}) {
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["run", "-q", "--no-npm", "--allow-all", main, ...args],
    env,
    stdout: "piped",
    stderr: "piped",
  }).output();
  const dec = new TextDecoder();
  return { code: out.code, out: dec.decode(out.stdout), err: dec.decode(out.stderr) };
}

Deno.test("cli start: the command table loads no npm package and only node:util; implementations are literal dynamic imports", async () => {
  const graph = await moduleGraph();
  const start = staticClosure(graph, "cli/main.ts");
  assert.deepEqual(start.filter((m) => !/^(cli|core)\//.test(m)), ["node:util"]);
  assert.deepEqual(
    start.filter((m) => /_run\.ts$|local_command|s3_store|certificates|store_url/.test(m)),
    [],
  );
  const dynamic = new Set(
    [...graph.values()].flatMap((m) =>
      (m.dependencies ?? []).filter((d) => d.isDynamic && d.code).map((d) => d.code!.specifier)
    ).map((s) => s.replace(root.href, "")),
  );
  for (
    const m of [
      "cli/deploy_run.ts",
      "cli/get_run.ts",
      "cli/cluster_view_run.ts",
      "cli/image_run.ts",
      "cli/ca_run.ts",
      "cli/setup/setup_run.ts",
      "cli/setup/teardown_run.ts",
      "cli/local/local_command.ts",
      "cli/local/local_run.ts",
      "core/store/s3_store.ts",
    ]
  ) {
    assert.ok(dynamic.has(m), `${m} is imported by a literal dynamic import`);
  }
  // `local --help`: its help module alone, none of the node's code.
  assert.deepEqual(
    staticClosure(graph, "cli/local/local_command.ts").filter((m) =>
      !/^cli\/local\/local_(command|defaults)\.ts$|^core\/cli_kit\.ts$/.test(m)
    ),
    [],
  );
  // `get` on a filesystem bucket: the implementation and the store, without the S3 SDK.
  const get = staticClosure(graph, "cli/get_run.ts");
  assert.ok(get.includes("core/store/fs_store.ts"));
  assert.deepEqual(get.filter((m) => m.startsWith("npm:") || m.includes("s3_store")), []);
});

Deno.test("cli start: help and usage errors run without any npm package", async () => {
  for (
    const args of [
      ["--help"],
      ["--version"],
      ...programOf().commands.map((c) => [c.name, "--help"]),
    ]
  ) {
    const r = await noNpm(args);
    assert.equal(r.code, 0, `${args.join(" ")}: ${r.err}`);
    assert.ok(r.out.length > 20, args.join(" "));
  }
  const bad = await noNpm(["get", "deployments", "--output-format", "x"]);
  assert.equal(bad.code, 2);
  assert.match(bad.err, /^error: unknown flag --output-format for 'podmin get'/);
});

Deno.test("cli start: get, describe, status and images on a file:// bucket, and get on s3://, load no npm package", async () => {
  const bucket = await freshBucket();
  const applied = await cli("--bucket", bucket, "apply", "-f", HELLO);
  assert.equal(applied.code, 0, applied.err);
  for (
    const [args, expect] of [
      [
        ["get", "deployments"],
        /^NAMESPACE\s+NAME\s+NODEGROUP\s+UP-TO-DATE\s+AVAILABLE\s+SPEC\n.*hello\s+default\s+0\/0\s+0\/0/m,
      ],
      [["get", "svc", "-o", "json"], /"kind": "Service"/],
      [["describe", "deployment", "hello"], /^Pod security:\s+baseline$/m],
      [["status"], /^Deployments:\s+1 \(NodeGroup default: 1\)$/m],
      [["images", "-o", "json"], /^\[\]\n$/],
    ] as const
  ) {
    const r = await noNpm(["--bucket", bucket, ...args]);
    assert.equal(r.code, 0, `${args.join(" ")}: ${r.err}`);
    assert.match(r.out, expect, args.join(" "));
  }
  // An s3:// bucket on moto: Podmin's own S3 client reads it, still without any npm package.
  const m = await moto();
  const s3Bucket = await m.createBucket();
  const onS3 = await cli("--bucket", `s3://${s3Bucket}`, "apply", "-f", HELLO);
  assert.equal(onS3.code, 0, onS3.err);
  const s3 = await noNpm(["--bucket", `s3://${s3Bucket}`, "get", "deployments"], motoEnv(m));
  assert.equal(s3.code, 0, s3.err);
  assert.match(
    s3.out,
    /^NAMESPACE\s+NAME\s+NODEGROUP\s+UP-TO-DATE\s+AVAILABLE\s+SPEC\n.*hello\s+default\s+0\/0\s+0\/0/m,
  );
});

Deno.test("cli start: help texts print the values their modules own; the deferred local entry matches its command", async () => {
  for (const c of ["push", "mirror", "images"]) {
    assert.ok((await cli(c, "--help")).out.includes(`${REGISTRY_HOSTNAME}/`), c);
  }
  assert.ok((await cli("setup", "--help")).out.includes(`(default ${DEFAULT_SANDBOX_IMAGE})`));
  const stub = programOf().commands.find((c) => c.name === "local")!;
  const loaded = (await loadCommands(programOf())).commands.find((c) => c.name === "local")!;
  assert.equal(stub.summary, loaded.summary);
  assert.ok(loaded.help.startsWith("Usage: podmin local"));
});

Deno.test("agent: no AWS SDK module in its graph, static or dynamic (so none in its bundle); the CLI reaches the SDK's credential chain only by a dynamic import", async () => {
  const agent = await moduleGraph(new URL("agent/main.ts", root).pathname);
  const sdk = (g: Map<string, GraphModule>) =>
    [...g.keys()].filter((k) => /@aws-sdk|@smithy/.test(k));
  assert.deepEqual(sdk(agent), []);
  const cliGraph = await moduleGraph();
  assert.ok(sdk(cliGraph).length > 0, "the CLI still ships the SDK (setup, teardown, profiles)");
  assert.deepEqual(
    staticClosure(cliGraph, "cli/main.ts").filter((m) => /@aws-sdk|@smithy/.test(m)),
    [],
  );
  const registration = cliGraph.get(new URL("cli/aws_sdk_credentials.ts", root).href);
  assert.ok(
    registration?.dependencies?.some((d) =>
      d.isDynamic && /credential-provider-node/.test(d.code?.specifier ?? "")
    ),
    "cli/aws_sdk_credentials.ts imports the SDK's chain dynamically",
  );
});

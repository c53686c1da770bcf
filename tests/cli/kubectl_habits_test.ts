/** `podmin` as an operator coming from kubectl uses it (issue 16, item 1). */

import assert from "node:assert/strict";
import * as path from "node:path";
import { testWith } from "../support/requirements.ts";
import { cli, cliProcess, freshBucket, HELLO, tempFile } from "./harness.ts";

const LABELLED = `apiVersion: podmin.dev/v1
kind: Deployment
metadata: {name: api, labels: {tier: backend, team: core}}
spec:
  nodeGroup: workers
  template:
    metadata: {labels: {app: api}}
    spec:
      containers: [{name: api, image: registry.podmin.internal/apps/api:2.1}]
---
apiVersion: podmin.dev/v1
kind: Deployment
metadata: {name: web, labels: {tier: frontend}}
spec:
  nodeGroup: default
  template:
    metadata: {labels: {app: web}}
    spec:
      containers: [{name: web, image: registry.podmin.internal/apps/web:1.0}]
`;

Deno.test("cli: misspelt global flags are named with a suggestion, before and after the command", async () => {
  for (
    const [args, flag, suggestion] of [
      [["--buckett", "file:///tmp/x", "get", "deployments"], "--buckett", "--bucket"],
      [["--regoin", "us-east-1", "get", "deployments"], "--regoin", "--region"],
      [["get", "deployments", "--debugg"], "--debugg", "--debug"],
      [["apply", "--filname", "x.yaml"], "--filname", "--filename"],
      [
        ["--bucket=file:///tmp/x", "get", "deployments", "--namespce", "a"],
        "--namespce",
        "--namespace",
      ],
    ] as const
  ) {
    const r = await cli(...args);
    assert.equal(r.code, 2, `${args.join(" ")}: ${r.err}`);
    assert.match(r.err, new RegExp(`^error: unknown flag ${flag}\\b`), r.err);
    assert.match(r.err, new RegExp(`did you mean ${suggestion}\\?`), r.err);
    assert.doesNotMatch(r.err, /unknown command/);
  }
  const cmd = await cli("aply", "-f", "x.yaml");
  assert.equal(cmd.code, 2);
  assert.match(cmd.err, /unknown command "aply".*did you mean apply\?/s);
});

Deno.test("cli: --version prints one line wherever it stands; get without a kind says what it takes", async () => {
  for (
    const args of [["--version"], ["--bucket", "file:///tmp/x", "--version"], [
      "--debug",
      "--version",
    ]]
  ) {
    const r = await cli(...args);
    assert.equal(r.code, 0, r.err);
    assert.match(r.out, /^podmin \d+\.\d+\.\d+ \(commit /);
    assert.equal(r.out.split("\n").length, 1);
  }
  const bucket = await freshBucket();
  const r = await cli("--bucket", bucket, "get");
  assert.equal(r.code, 2);
  assert.match(r.err, /error: get needs a resource kind/);
  assert.match(r.err, /hint: .*deployments.*services/);
  assert.doesNotMatch(r.err, /unknown resource kind ""/);
  const nodes = await cli("--bucket", bucket, "get", "nodes");
  assert.equal(nodes.code, 0, nodes.err);
  assert.match(nodes.err, /no node records \(no agent has reported to dns\/nodes\/\)/);
});

Deno.test("cli: get KIND [NAME] with -n, -A, -l and -o table|wide|json|yaml|name", async () => {
  const bucket = await freshBucket();
  const file = await tempFile(LABELLED);
  assert.equal((await cli("--bucket", bucket, "apply", "-f", file)).code, 0);
  assert.equal((await cli("--bucket", bucket, "apply", "-f", HELLO)).code, 0);

  const all = await cli("--bucket", bucket, "get", "deployments", "-A");
  assert.equal(all.code, 0, all.err);
  assert.equal(all.out.split("\n").length, 4);
  const one = await cli("--bucket", bucket, "get", "deployment", "api");
  assert.equal(one.code, 0, one.err);
  assert.deepEqual(one.out.split("\n").map((l) => l.split(/\s+/)[1]), ["NAME", "api"]);
  const missing = await cli("--bucket", bucket, "get", "deployment", "nope");
  assert.equal(missing.code, 1);
  assert.match(missing.err, /error: deployment default\/nope not found/);

  const selected = await cli(
    "--bucket",
    bucket,
    "get",
    "deploy",
    "-l",
    "tier=backend",
    "-o",
    "name",
  );
  assert.equal(selected.out, "deployment/api");
  const notBackend = await cli(
    "--bucket",
    bucket,
    "get",
    "deploy",
    "-l",
    "tier!=backend",
    "-o",
    "name",
  );
  assert.equal(notBackend.out, "deployment/hello\ndeployment/web");
  const hasTeam = await cli(
    "--bucket",
    bucket,
    "get",
    "deploy",
    "-l",
    "team,tier in (backend)",
    "-o",
    "name",
  );
  assert.equal(hasTeam.out, "deployment/api");
  const badSelector = await cli("--bucket", bucket, "get", "deploy", "-l", "=x");
  assert.equal(badSelector.code, 2);
  assert.match(badSelector.err, /-l: invalid label selector "=x"/);

  const wide = await cli("--bucket", bucket, "get", "deployments", "-o", "wide");
  assert.match(wide.out, /IMAGES/);
  assert.match(wide.out, /api .*registry\.podmin\.internal\/apps\/api:2\.1/);
  const table = await cli("--bucket", bucket, "get", "deployments");
  assert.doesNotMatch(table.out, /IMAGES/);

  const json = JSON.parse(
    (await cli("--bucket", bucket, "get", "deployment", "api", "-o", "json")).out,
  );
  assert.equal(json.kind, "Deployment");
  assert.equal(json.metadata.name, "api");
  const list = JSON.parse((await cli("--bucket", bucket, "get", "svc", "-o", "json")).out);
  assert.equal(list.kind, "List");
  assert.equal(list.items[0].status.vip.startsWith("fd00:504d::"), true);

  const both = await cli("--bucket", bucket, "get", "deployments", "-A", "-n", "default");
  assert.equal(both.code, 2);
  assert.match(both.err, /-A and -n/);
});

Deno.test("cli: get -o yaml | apply -f - round-trips unchanged (status accepted and ignored)", async () => {
  const bucket = await freshBucket();
  assert.equal((await cli("--bucket", bucket, "apply", "-f", HELLO)).code, 0);
  for (const kind of ["deployments", "services"]) {
    for (const format of ["yaml", "json"]) {
      const got = await cli("--bucket", bucket, "get", kind, "-o", format);
      assert.equal(got.code, 0, got.err);
      const back = await cliProcess(["--bucket", bucket, "apply", "-f", "-"], { stdin: got.out });
      assert.equal(back.code, 0, back.err);
      assert.match(
        back.out.trim(),
        /^(deployment|service) default\/hello unchanged( \(VIP fd00:504d::[0-9a-f:]+\))?$/,
        back.out,
      );
    }
  }
});

Deno.test("cli: describe deployment and service", async () => {
  const bucket = await freshBucket();
  assert.equal((await cli("--bucket", bucket, "apply", "-f", HELLO)).code, 0);
  const d = await cli("--bucket", bucket, "describe", "deployment", "hello");
  assert.equal(d.code, 0, d.err);
  assert.match(d.out, /^Name:\s+hello$/m);
  assert.match(d.out, /^Namespace:\s+default$/m);
  assert.match(d.out, /^NodeGroup:\s+default$/m);
  assert.match(d.out, /^Spec digest:\s+sha256:[0-9a-f]{64}$/m);
  assert.match(
    d.out,
    /hello: registry\.podmin\.internal\/apps\/hello:1\.0 \(not in the image store\)/,
  );
  assert.match(d.out, /^Services:\s+default\/hello \(VIP fd00:504d::/m);
  assert.match(d.out, /^Nodes:\s+no node records \(/m);
  const s = await cli("--bucket", bucket, "describe", "svc", "hello");
  assert.equal(s.code, 0, s.err);
  assert.match(s.out, /^VIP:\s+fd00:504d::/m);
  assert.match(s.out, /^Ports:\s+80\/TCP -> 8080$/m);
  assert.match(s.out, /^Selector:\s+app=hello$/m);
  assert.match(s.out, /^Selected Deployments:\s+default\/hello \(NodeGroup default\)$/m);
  const none = await cli("--bucket", bucket, "describe", "deployment", "nope");
  assert.equal(none.code, 1);
  assert.match(none.err, /deployment default\/nope not found/);
});

Deno.test("cli: apply -f DIR (top level), -R (recursive), -n for documents without a namespace", async () => {
  const bucket = await freshBucket();
  const dir = await Deno.makeTempDir();
  await Deno.mkdir(path.join(dir, "sub"));
  await Deno.copyFile(HELLO, path.join(dir, "hello.yaml"));
  await Deno.writeTextFile(path.join(dir, "notes.txt"), "not a manifest");
  await Deno.writeTextFile(path.join(dir, "sub", "labelled.yml"), LABELLED);
  const flat = await cli("--bucket", bucket, "apply", "-f", dir, "--dry-run");
  assert.equal(flat.code, 0, flat.err);
  assert.equal(flat.out.split("\n").length, 2);
  const deep = await cli("--bucket", bucket, "apply", "-f", dir, "-R");
  assert.equal(deep.code, 0, deep.err);
  assert.equal(deep.out.split("\n").length, 4);
  const empty = await Deno.makeTempDir();
  const none = await cli("--bucket", bucket, "apply", "-f", empty);
  assert.equal(none.code, 2);
  assert.match(none.err, /no \.yaml, \.yml or \.json file in/);

  const ns = await cli("--bucket", bucket, "apply", "-f", await tempFile(LABELLED), "-n", "prod");
  assert.equal(ns.code, 0, ns.err);
  assert.match(ns.out, /^deployment prod\/api created \(revision 1\)$/m);
  const clash = await cli("--bucket", bucket, "apply", "-f", HELLO, "-n", "prod");
  assert.equal(clash.code, 1);
  assert.match(clash.err, /metadata\.namespace: "default" does not match -n prod/);
});

Deno.test("cli: delete KIND NAME…, KIND/NAME and delete -f FILE", async () => {
  const bucket = await freshBucket();
  const file = await tempFile(LABELLED);
  await cli("--bucket", bucket, "apply", "-f", file);
  await cli("--bucket", bucket, "apply", "-f", HELLO);
  const two = await cli("--bucket", bucket, "delete", "deployment", "api", "web");
  assert.equal(two.code, 0, two.err);
  assert.equal(two.out, "deployment default/api deleted\ndeployment default/web deleted");
  const fromFile = await cli("--bucket", bucket, "delete", "-f", HELLO);
  assert.equal(fromFile.code, 0, fromFile.err);
  assert.equal(fromFile.out, "deployment default/hello deleted\nservice default/hello deleted");
  const again = await cli("--bucket", bucket, "delete", "-f", HELLO);
  assert.equal(again.code, 1);
  assert.match(again.err, /deployment default\/hello not found/);
  await cli("--bucket", bucket, "apply", "-f", HELLO);
  const slash = await cli("--bucket", bucket, "delete", "service/hello");
  assert.equal(slash.code, 0, slash.err);
  assert.equal((await cli("--bucket", bucket, "get", "svc", "-o", "name")).out, "");
});

Deno.test("cli: diff exits 0 without changes, 1 with changes, 2 or more on errors", async () => {
  const bucket = await freshBucket();
  assert.equal((await cli("--bucket", bucket, "diff", "-f", HELLO)).code, 1);
  await cli("--bucket", bucket, "apply", "-f", HELLO);
  const same = await cli("--bucket", bucket, "diff", "-f", HELLO);
  assert.equal(same.code, 0, same.err);
  const invalid = await cli("--bucket", bucket, "diff", "-f", await tempFile("kind: Pod\n"));
  assert.ok(invalid.code >= 2, `invalid file: ${invalid.code}`);
  const noBucket = await cli("--bucket", "file:///nonexistent/bucket", "diff", "-f", HELLO);
  assert.ok(noBucket.code >= 2, `missing bucket: ${noBucket.code}`);
});

Deno.test("cli: --dry-run=client validates with no bucket; --dry-run and --dry-run=server read it", async () => {
  const env = Deno.env.get("PODMIN_BUCKET");
  Deno.env.delete("PODMIN_BUCKET");
  try {
    const ok = await cli("apply", "-f", HELLO, "--dry-run=client");
    assert.equal(ok.code, 0, ok.err);
    assert.equal(
      ok.out,
      "deployment default/hello valid (dry run: client)\nservice default/hello valid (dry run: client)",
    );
    const bad = await cli(
      "apply",
      "-f",
      await tempFile("apiVersion: apps/v1\nkind: Deployment\n"),
      "--dry-run=client",
    );
    assert.equal(bad.code, 1);
    assert.match(bad.err, /apiVersion/);
    const server = await cli("apply", "-f", HELLO, "--dry-run=server");
    assert.equal(server.code, 2);
    assert.match(server.err, /no cluster bucket given/);
    const wrong = await cli("apply", "-f", HELLO, "--dry-run=maybe");
    assert.equal(wrong.code, 2);
    assert.match(wrong.err, /--dry-run: expected client, server or none, got "maybe"/);
  } finally {
    if (env !== undefined) Deno.env.set("PODMIN_BUCKET", env);
  }
  const bucket = await freshBucket();
  for (const flag of ["--dry-run", "--dry-run=server"]) {
    const r = await cli("--bucket", bucket, "apply", "-f", HELLO, flag);
    assert.equal(r.code, 0, r.err);
    assert.match(r.out, /^deployment default\/hello created \(dry run\)$/m);
  }
  assert.equal((await cli("--bucket", bucket, "get", "deploy", "-o", "name")).out, "");
});

Deno.test("cli: completion bash completes commands and flags in a real bash", async () => {
  const bash = await cli("completion", "bash");
  assert.equal(bash.code, 0, bash.err);
  const script = await tempFile(bash.out, ".bash");
  const complete = async (line: string) => {
    const words = line.split(" ");
    const r = await new Deno.Command("bash", {
      args: [
        "-c",
        `source ${script}; COMP_WORDS=(${words.map((w) => `'${w}'`).join(" ")}); ` +
        `COMP_CWORD=${words.length - 1}; COMP_LINE='${line}'; COMP_POINT=${line.length}; ` +
        `_podmin_complete podmin; printf '%s\\n' "\${COMPREPLY[@]}"`,
      ],
      stdout: "piped",
      stderr: "piped",
    }).output();
    assert.equal(r.code, 0, new TextDecoder().decode(r.stderr));
    return new TextDecoder().decode(r.stdout).trim().split("\n").sort();
  };
  assert.deepEqual(await complete("podmin ap"), ["apply"]);
  assert.deepEqual(await complete("podmin get --out"), ["--output"]);
  assert.deepEqual(await complete("podmin get dep"), ["deployments"]);
  assert.ok((await complete("podmin --buc")).includes("--bucket"));
  const bad = await cli("completion", "tcsh");
  assert.equal(bad.code, 2);
  assert.match(bad.err, /unsupported shell "tcsh".*bash, zsh or fish/s);
});

/** Runs `shell ARGS…`; its exit code and output. */
async function shellRun(shell: string, args: string[]) {
  const r = await new Deno.Command(shell, { args, stdout: "piped", stderr: "piped" }).output();
  const dec = new TextDecoder();
  return { code: r.code, out: dec.decode(r.stdout), err: dec.decode(r.stderr) };
}

testWith(
  "cli: completion zsh and fish parse in real shells (zsh -n, fish --no-execute); zsh registers it, fish completes commands and flags",
  { tools: ["zsh", "fish"] },
  async () => {
    const zsh = await cli("completion", "zsh");
    assert.equal(zsh.code, 0, zsh.err);
    const zshScript = await tempFile(zsh.out, ".zsh");
    const zshParse = await shellRun("zsh", ["-n", zshScript]);
    assert.equal(zshParse.code, 0, `zsh -n: ${zshParse.err}`);
    // Sourced after compinit, the script registers its function for podmin.
    const registered = await shellRun("zsh", [
      "-f",
      "-c",
      `autoload -U compinit && compinit -u -D; source ${zshScript}; print -r -- "$_comps[podmin]"`,
    ]);
    assert.equal(registered.code, 0, registered.err);
    assert.match(registered.out, /-F _podmin_complete\b/, registered.out + registered.err);
    for (const word of ["apply", "describe", "images", "status", "filename", "dry-run"]) {
      assert.ok(zsh.out.includes(word), `zsh completion lacks ${word}`);
    }

    const fish = await cli("completion", "fish");
    assert.equal(fish.code, 0, fish.err);
    const fishScript = await tempFile(fish.out, ".fish");
    const fishParse = await shellRun("fish", ["--no-execute", fishScript]);
    assert.equal(fishParse.code, 0, `fish --no-execute: ${fishParse.err}`);
    assert.equal(fishParse.err, "", "fish reads the script without a warning");
    // fish's own completion engine, on the loaded script.
    const complete = async (line: string) => {
      const r = await shellRun("fish", [
        "--no-config",
        "-c",
        `source ${fishScript}; complete -C ${JSON.stringify(line)}`,
      ]);
      assert.equal(r.code, 0, r.err);
      return r.out.trim().split("\n").map((l) => l.split("\t")[0]).sort();
    };
    assert.deepEqual(await complete("podmin ap"), ["apply"]);
    assert.ok((await complete("podmin get --out")).includes("--output"));
    assert.ok((await complete("podmin get dep")).includes("deployments"));
  },
);

/**
 * vmconfig's Bash: shellcheck on every script (including rendered user-data) and the bats unit
 * tests of the validators, generators and scripts (tests/vmconfig/*.bats).
 */

import assert from "node:assert/strict";
import { testWith } from "../support/requirements.ts";
import { run } from "./fixture.ts";
import { dependency, renderUserData } from "../../vmconfig/render_user_data.ts";

const ROOT = new URL("../../", import.meta.url).pathname;

function filesIn(dir: string, re: RegExp): string[] {
  return [...Deno.readDirSync(`${ROOT}${dir}`)]
    .filter((e) => e.isFile && re.test(e.name))
    .map((e) => `${dir}/${e.name}`)
    .sort();
}

/** Sample user-data of both kinds, written to a temp dir, for shellcheck. */
async function renderedSamples(dir: string): Promise<string[]> {
  const bytes = (s: string) => new TextEncoder().encode(s);
  const node = [
    "vmconfig",
    "containerd",
    "runc",
    "cni-plugins",
    "crictl",
    "kubelet",
    "coredns",
    "podmin-agent",
  ]
    .map((n) => dependency(n, "1.0.0", bytes(n)));
  const common = { cluster: "prod", bucket: "prod-bucket", region: "us-east-1" };
  const samples = {
    "user-data-node.sh": renderUserData({
      ...common,
      nodeGroup: "workers",
      architecture: "amd64",
      dependencies: node,
    }).text,
    "user-data-nat.sh": renderUserData({
      ...common,
      kind: "nat",
      architecture: "arm64",
      dependencies: ["vmconfig", "jool"].map((n) => dependency(n, "1.0.0", bytes(n))),
      nat: { ipv4SourceCidrs: ["10.0.0.0/16"] },
    }).text,
  };
  const out: string[] = [];
  for (const [name, text] of Object.entries(samples)) {
    await Deno.writeTextFile(`${dir}/${name}`, text);
    out.push(`${dir}/${name}`);
  }
  return out;
}

testWith("vmconfig: shellcheck is clean on every script", { tools: ["shellcheck"] }, async () => {
  const dir = await Deno.makeTempDir({ prefix: "podmin-vmc-sc-" });
  try {
    // The user-data template is checked rendered (below), since it holds placeholders.
    const scripts = [...filesIn("vmconfig/bin", /\.sh$/), ...filesIn("vmconfig/lib", /\.sh$/)];
    assert.ok(scripts.length >= 11, `found ${scripts.length} scripts`);
    let out = await run("shellcheck", ["--external-sources", ...scripts], { cwd: ROOT });
    assert.equal(out.code, 0, out.stdout + out.stderr);
    out = await run("shellcheck", await renderedSamples(dir));
    assert.equal(out.code, 0, out.stdout + out.stderr);
    const bats = [...filesIn("tests/vmconfig", /\.(bats|bash)$/)];
    out = await run("shellcheck", ["--shell=bash", "--external-sources", ...bats], { cwd: ROOT });
    assert.equal(out.code, 0, out.stdout + out.stderr);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

testWith(
  "vmconfig: bats unit tests of validators, generators and scripts",
  { root: true, tools: ["bats", "jq", "python3", "tar", "containerd"] },
  async () => {
    const files = filesIn("tests/vmconfig", /\.bats$/);
    assert.deepEqual(files.map((f) => f.split("/").pop()), [
      "generate.bats",
      "scripts.bats",
      "validate.bats",
    ]);
    const out = await run("bats", ["--tap", ...files], { cwd: ROOT });
    const plan = /^1\.\.(\d+)$/m.exec(out.stdout);
    const ok = out.stdout.match(/^ok \d+/gm)?.length ?? 0;
    const notOk = out.stdout.match(/^not ok \d+/gm)?.length ?? 0;
    console.error(`bats: ${ok} passed, ${notOk} failed of ${plan?.[1]}`);
    assert.equal(out.code, 0, out.stdout + out.stderr);
    assert.ok(plan && Number(plan[1]) >= 48, `bats plan: ${plan?.[0]}`);
    assert.equal(notOk, 0, out.stdout);
    assert.equal(ok, Number(plan[1]));
    assert.ok(!/# skip/.test(out.stdout), "no skipped bats tests");
  },
);

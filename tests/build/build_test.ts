/**
 * The builds: `deno bundle` single files carry every static import and
 * embedded asset (they run setup --dry-run and the agent without the source
 * tree); `deno compile` builds binaries where Deno's denort runtime exists and
 * fails with a clear message where it does not.
 */

import assert from "node:assert/strict";

const root = new URL("../../", import.meta.url).pathname;

async function sh(args: string[], cwd = root) {
  const out = await new Deno.Command(args[0], {
    args: args.slice(1),
    cwd,
    stdout: "piped",
    stderr: "piped",
  }).output();
  const dec = new TextDecoder();
  return { code: out.code, stdout: dec.decode(out.stdout), stderr: dec.decode(out.stderr) };
}

Deno.test("build: bundles run outside the source tree (setup --dry-run, agent --help)", async () => {
  const built = await sh(["bash", "cli/build.sh", "bundle"]);
  assert.equal(built.code, 0, built.stderr);
  const tmp = await Deno.makeTempDir({ prefix: "podmin-bundle-" });
  try {
    await Deno.copyFile(`${root}dist/podmin.js`, `${tmp}/podmin.js`);
    await Deno.copyFile(`${root}dist/podmin-agent.js`, `${tmp}/podmin-agent.js`);
    const dry = await sh([
      Deno.execPath(),
      "run",
      "-A",
      `${tmp}/podmin.js`,
      "setup",
      "--cluster",
      "bundle",
      "--region",
      "us-east-1",
      "--vpc-cidr",
      "10.9.0.0/16",
      "--nodegroup",
      "default",
      "--dry-run",
      "--out",
      `${tmp}/plan`,
    ], tmp);
    assert.equal(dry.code, 0, dry.stderr);
    assert.ok((await Deno.stat(`${tmp}/plan/user-data/default.sh`)).size > 1000);
    const agent = await sh([Deno.execPath(), "run", "-A", `${tmp}/podmin-agent.js`, "--help"], tmp);
    assert.equal(agent.code, 0, agent.stderr);
    assert.match(agent.stdout, /dataplane/);
  } finally {
    await Deno.remove(tmp, { recursive: true });
  }
});

Deno.test("build: compile builds both architectures or says exactly what is missing", async () => {
  const r = await sh(["bash", "cli/build.sh", "compile"]);
  if (r.code === 0) {
    for (const arch of ["x86_64", "aarch64"]) {
      for (const name of ["podmin", "podmin-agent"]) {
        assert.ok((await Deno.stat(`${root}dist/${arch}/${name}`)).isFile);
      }
    }
  } else {
    assert.equal(r.code, 1);
    assert.match(r.stderr, /deno compile needs the denort runtime for x86_64-unknown-linux-gnu/);
    assert.match(r.stderr, /hint: set DENORT_BIN/);
  }
});

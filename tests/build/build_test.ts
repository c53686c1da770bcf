/**
 * The builds: `deno bundle` outputs carry every import and embedded asset (they run setup
 * --dry-run and the agent without the source tree) and are stamped with the commit; the CLI's is
 * code-split (podmin.js, a launcher, with podmin-lib/), and what `podmin --help` loads from it holds
 * no npm code and no `node:module`;
 * `deno compile` builds both Linux targets from them where Deno's denort runtime exists and
 * fails with one clear line where it does not. Each test decides its expected outcome before it
 * runs the build and requires exactly that outcome.
 */

import assert from "node:assert/strict";
import { testWith } from "../support/requirements.ts";

const root = new URL("../../", import.meta.url).pathname;

async function sh(args: string[], options: { cwd?: string; env?: Record<string, string> } = {}) {
  const out = await new Deno.Command(args[0], {
    args: args.slice(1),
    cwd: options.cwd ?? root,
    env: options.env,
    stdout: "piped",
    stderr: "piped",
  }).output();
  const dec = new TextDecoder();
  return { code: out.code, stdout: dec.decode(out.stdout), stderr: dec.decode(out.stderr) };
}

/** ELF e_machine of a file: 62 = x86-64, 183 = AArch64. */
async function elfMachine(file: string): Promise<number> {
  const head = (await Deno.readFile(file)).subarray(0, 20);
  assert.deepEqual([...head.subarray(0, 4)], [0x7f, 0x45, 0x4c, 0x46], `${file} is not ELF`);
  return new DataView(head.buffer, head.byteOffset).getUint16(18, true);
}

const ELF_MACHINE: Record<string, number> = { x86_64: 62, aarch64: 183 };

/**
 * What a module of the code-split bundle loads before it runs (its static imports, transitively):
 * the source modules (from the bundler's `// path` comments) and the `node:` modules imported.
 */
async function bundleClosure(lib: string, entry: string): Promise<Set<string>> {
  const seen = new Set<string>();
  const out = new Set<string>();
  const stack = [entry];
  while (stack.length) {
    const file = stack.pop()!;
    if (seen.has(file)) continue;
    seen.add(file);
    const text = await Deno.readTextFile(`${lib}/${file}`);
    for (const m of text.matchAll(/^\/\/ (\S+\.(?:ts|js|mjs|cjs))$/gm)) out.add(m[1]);
    for (const m of text.matchAll(/^import\s[^;"]*?"(node:[^"]+)";/gm)) out.add(m[1]);
    for (const m of text.matchAll(/^import\s(?:[^;"]*?\sfrom\s*)?"\.\/([^"]+\.js)";/gm)) {
      stack.push(m[1]);
    }
  }
  return out;
}

/** Whether `deno compile` can get denort here without DENORT_BIN: cached zip or download. */
async function denortObtainable(): Promise<boolean> {
  const version = Deno.version.deno;
  const denoDir = Deno.env.get("DENO_DIR") ?? `${Deno.env.get("HOME")}/.cache/deno`;
  const zips = ["x86_64", "aarch64"].map((a) =>
    `${denoDir}/dl/release/v${version}/denort-${a}-unknown-linux-gnu.zip`
  );
  const cached = zips.every((z) => {
    try {
      return Deno.statSync(z).isFile;
    } catch {
      return false;
    }
  });
  if (cached) return true;
  try {
    await Deno.resolveDns("dl.deno.land", "A");
    return true;
  } catch {
    return false;
  }
}

Deno.test("build: stamped bundles run outside the source tree (setup --dry-run, agent --version)", async () => {
  const tmp = await Deno.makeTempDir({ prefix: "podmin-bundle-" });
  try {
    const built = await sh(["bash", "cli/build.sh", "bundle"], {
      env: { PODMIN_DIST: `${tmp}/dist` },
    });
    assert.equal(built.code, 0, built.stderr);
    const run = `${tmp}/run`;
    await Deno.mkdir(run);
    await Deno.copyFile(`${tmp}/dist/podmin.js`, `${run}/podmin.js`);
    await Deno.copyFile(`${tmp}/dist/podmin-agent.js`, `${run}/podmin-agent.js`);
    await Deno.mkdir(`${run}/podmin-lib`);
    for await (const e of Deno.readDir(`${tmp}/dist/podmin-lib`)) {
      await Deno.copyFile(`${tmp}/dist/podmin-lib/${e.name}`, `${run}/podmin-lib/${e.name}`);
    }
    // podmin --help loads the command table only: Podmin's own cli/ and core/, and node:util.
    const start = [...await bundleClosure(`${run}/podmin-lib`, "main.js")];
    assert.deepEqual(start.filter((m) => !/^(cli|core)\//.test(m)), ["node:util"]);
    assert.ok(start.includes("cli/program.ts") && !start.some((m) => m.endsWith("_run.ts")));
    const get = (await Array.fromAsync(Deno.readDir(`${run}/podmin-lib`)))
      .find((e) => /^get_run-[A-Z0-9]+\.js$/.test(e.name))!.name;
    const getClosure = [...await bundleClosure(`${run}/podmin-lib`, get)];
    assert.ok(
      getClosure.includes("cli/get_run.ts") && getClosure.includes("core/store/fs_store.ts"),
    );
    assert.deepEqual(getClosure.filter((m) => m.includes("node_modules")), [], "get loads no npm");
    const help = await sh([Deno.execPath(), "run", "-A", `${run}/podmin.js`, "--help"], {
      cwd: run,
    });
    assert.equal(help.code, 0, help.stderr);
    assert.match(help.stdout, /^ {2}setup +create or update a cluster/m);
    const bucket = `file://${run}/bucket`;
    for (
      const [args, out] of [[["create-bucket"], `created ${bucket}\n`], [["get", "deploy"], ""]]
    ) {
      const r = await sh([
        Deno.execPath(),
        "run",
        "-A",
        `${run}/podmin.js`,
        "--bucket",
        bucket,
        ...args,
      ], {
        cwd: run,
      });
      assert.equal(r.code, 0, r.stderr);
      assert.equal(r.stdout, out);
    }
    const dry = await sh([
      Deno.execPath(),
      "run",
      "-A",
      `${run}/podmin.js`,
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
      `${run}/plan`,
    ], { cwd: run, env: { PODMIN_CACHE_DIR: `${tmp}/cache` } });
    assert.equal(dry.code, 0, dry.stderr);
    assert.ok((await Deno.stat(`${run}/plan/user-data/default.sh`)).size > 1000);
    const commit = (await sh(["git", "rev-parse", "--short=12", "HEAD"])).stdout.trim();
    for (const [file, name] of [["podmin-agent.js", "podmin-agent"], ["podmin.js", "podmin"]]) {
      const v = await sh([Deno.execPath(), "run", "-A", `${run}/${file}`, "--version"], {
        cwd: run,
      });
      assert.equal(v.code, 0, v.stderr);
      assert.match(v.stdout, new RegExp(`^${name} 0\\.1\\.0 \\(commit ${commit}(-dirty)?, deno `));
    }
    const sums = await sh(["sha256sum", "-c", "SHA256SUMS"], { cwd: `${tmp}/dist` });
    assert.equal(sums.code, 0, sums.stdout + sums.stderr);
    assert.match(sums.stdout, /podmin\.js: OK\npodmin-agent\.js: OK/);
  } finally {
    await Deno.remove(tmp, { recursive: true });
  }
});

Deno.test("build: compile without DENORT_BIN builds both targets where denort is obtainable, else one line", async () => {
  const obtainable = await denortObtainable(); // decided before the build runs
  const tmp = await Deno.makeTempDir({ prefix: "podmin-compile-" });
  try {
    const env = { PODMIN_DIST: tmp, DENORT_BIN: "" };
    const r = await sh(["bash", "cli/build.sh", "compile"], { env });
    if (obtainable) {
      assert.equal(r.code, 0, r.stderr);
      for (const arch of ["x86_64", "aarch64"]) {
        for (const name of ["podmin", "podmin-agent"]) {
          assert.equal(await elfMachine(`${tmp}/${arch}/${name}`), ELF_MACHINE[arch], name);
        }
      }
    } else {
      assert.equal(r.code, 1);
      const lines = r.stderr.trim().split("\n");
      assert.equal(lines.length, 1, r.stderr);
      assert.match(
        lines[0],
        /^error: deno compile has no denort runtime for x86_64-unknown-linux-gnu .*no DENORT_BIN.*alternative: 'deno task bundle'/,
      );
      await assert.rejects(Deno.stat(`${tmp}/x86_64/podmin`), Deno.errors.NotFound);
    }
  } finally {
    await Deno.remove(tmp, { recursive: true });
  }
});

testWith(
  "build: compile with DENORT_BIN builds both targets from the stamped bundles, assets embedded",
  { tools: ["cc", "sha256sum"] },
  async () => {
    const tmp = await Deno.makeTempDir({ prefix: "podmin-denort-" });
    try {
      // A stand-in runtime (an ELF, as deno compile requires) that records each invocation.
      await Deno.writeTextFile(
        `${tmp}/standin.c`,
        `#include <stdio.h>
#include <stdlib.h>
int main(int argc, char **argv) {
  FILE *f = fopen(getenv("STANDIN_LOG"), "a");
  if (!f) return 3;
  fprintf(f, "denort-standin");
  for (int i = 1; i < argc; i++) fprintf(f, " %s", argv[i]);
  fprintf(f, "\\n");
  return fclose(f) == 0 ? 0 : 4;
}
`,
      );
      const cc = await sh(["cc", "-O2", "-o", `${tmp}/denort`, `${tmp}/standin.c`]);
      assert.equal(cc.code, 0, cc.stderr);
      const dist = `${tmp}/dist`;
      const r = await sh(["bash", "cli/build.sh", "compile"], {
        env: { PODMIN_DIST: dist, DENORT_BIN: `${tmp}/denort` },
      });
      assert.equal(r.code, 0, r.stderr);
      // (The eBPF object is embedded once the agent's entry reaches the dataplane loader; the
      // bundler drops modules nothing imports.)
      const agentMarker = "podmin-agent: converges this VM to the desired state";
      const commit = (await sh(["git", "rev-parse", "--short=12", "HEAD"])).stdout.trim();
      const installMarker = "Podmin vmconfig: installs verified dependency files";
      for (const arch of ["x86_64", "aarch64"]) {
        for (const name of ["podmin", "podmin-agent"]) {
          const text = new TextDecoder("latin1").decode(
            await Deno.readFile(`${dist}/${arch}/${name}`),
          );
          assert.ok(text.includes(`PODMIN_BUILD_COMMIT = "${commit}`), `${arch}/${name} stamped`);
          if (name === "podmin") assert.ok(text.includes(installMarker), "vmconfig embedded");
          else assert.ok(text.includes(agentMarker), "the agent program embedded");
        }
      }
      // Every module of the code-split CLI is in its binary, those it imports dynamically too
      // (vmconfig above is setup's; the S3 store is get's).
      const lib = await Array.fromAsync(Deno.readDir(`${dist}/podmin-lib`));
      assert.ok(lib.length > 10, `${lib.length} modules`);
      for (const arch of ["x86_64", "aarch64"]) {
        const binary = new TextDecoder("latin1").decode(
          await Deno.readFile(`${dist}/${arch}/podmin`),
        );
        for (const e of lib) {
          const text = new TextDecoder("latin1").decode(
            await Deno.readFile(`${dist}/podmin-lib/${e.name}`),
          );
          const middle = text.slice(Math.floor(text.length / 2), Math.floor(text.length / 2) + 64);
          assert.ok(binary.includes(middle), `${arch}/podmin holds podmin-lib/${e.name}`);
        }
      }
      const sums = await sh(["sha256sum", "-c", "SHA256SUMS"], { cwd: dist });
      assert.equal(sums.code, 0, sums.stdout);
      assert.equal(sums.stdout.match(/: OK/g)?.length, 6 + lib.length);
      // The outputs start with the runtime: running one runs the stand-in.
      const ran = await sh([`${dist}/x86_64/podmin-agent`, "--version"], {
        env: { STANDIN_LOG: `${tmp}/invocations` },
      });
      assert.equal(ran.code, 0, ran.stderr);
      assert.equal(await Deno.readTextFile(`${tmp}/invocations`), "denort-standin --version\n");
    } finally {
      await Deno.remove(tmp, { recursive: true });
    }
  },
);

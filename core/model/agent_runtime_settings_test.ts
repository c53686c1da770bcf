import assert from "node:assert/strict";
import { VMCONFIG_ASSETS } from "../../vmconfig/assets.ts";
import { AGENT_ENV, AGENT_V8_FLAGS, agentV8FlagsArg } from "./agent_runtime_settings.ts";

const root = new URL("../../", import.meta.url);

Deno.test("agent runtime settings: every place that starts the agent outside TypeScript uses them", async () => {
  const flags = agentV8FlagsArg();
  const build = await Deno.readTextFile(new URL("cli/build.sh", root));
  assert.match(build, /deno compile [^\n]*\\\n[^\n]*--target/, "the compile line");
  assert.ok(build.includes(`--allow-all ${flags} \\`), `cli/build.sh compiles with ${flags}`);
  const install = VMCONFIG_ASSETS["bin/install.sh"];
  const launcher = install.split("\n").find((l) => l.startsWith("exec /usr/local/lib/podmin/deno"));
  assert.ok(launcher?.includes(` ${flags} `), `install.sh's launcher passes ${flags}: ${launcher}`);
  const unit = VMCONFIG_ASSETS["units/podmin-agent.service"];
  for (const [k, v] of Object.entries(AGENT_ENV)) {
    assert.ok(unit.split("\n").includes(`Environment=${k}=${v}`), `the unit sets ${k}=${v}`);
  }
});

Deno.test("agent runtime settings: the Deno runtime's V8 accepts the flags (and refuses an unknown one)", async () => {
  const run = (arg: string) =>
    new Deno.Command(Deno.execPath(), {
      args: ["eval", arg, "console.log(Deno.memoryUsage().heapTotal)"],
      env: { ...AGENT_ENV },
      stdout: "piped",
      stderr: "piped",
    }).output();
  const ok = await run(agentV8FlagsArg());
  assert.equal(ok.code, 0, new TextDecoder().decode(ok.stderr));
  assert.ok(AGENT_V8_FLAGS.length > 0);
  // Deno refuses a flag V8 does not know, so the check above can fail.
  const bad = await run("--v8-flags=--max-semi-space-size-typo=1");
  assert.notEqual(bad.code, 0);
  assert.match(new TextDecoder().decode(bad.stderr), /max-semi-space-size-typo/);
});

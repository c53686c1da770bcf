/**
 * The README's path from a fresh machine (issue 16, item 5), and the examples every `--help`
 * shows (the acceptance: examples work when pasted).
 */

import assert from "node:assert/strict";
import * as path from "node:path";
import { loadCommands, parseInvocation } from "../../core/kit/cli_kit.ts";
import { programOf } from "../../cli/program.ts";
import { cli } from "./harness.ts";

const root = new URL("../../", import.meta.url).pathname;

/** The shell lines of the README's "Two commands" section (its fenced blocks). */
async function readmeCommands(): Promise<string[]> {
  const readme = await Deno.readTextFile(path.join(root, "README.md"));
  const section = readme.split(/^## /m).find((s) => s.startsWith("Two commands"))!;
  return [...section.matchAll(/```sh\n([\s\S]*?)```/g)].flatMap((m) =>
    m[1].split("\n").filter((l) => l.trim() && !l.startsWith("#"))
  );
}

Deno.test("README: the demo, the tests and a way to get deno on PATH, in that order", async () => {
  const lines = await readmeCommands();
  assert.equal(lines.length, 3, lines.join("\n"));
  assert.match(lines[0], /^sudo npx -y deno@2\.9\.6 task demo$/);
  assert.match(lines[1], /^sudo npx -y deno@2\.9\.6 task test$/);
  assert.match(lines[2], /deno@2\.9\.6/);
  assert.match(lines[2], /PATH|-g|--global/);
});

Deno.test("README: the no-root demo from a fresh checkout prints no download, build-script or binary noise, and the agent's log readably", async () => {
  const tmp = await Deno.makeTempDir({ prefix: "podmin-fresh-" });
  try {
    // A fresh checkout: tracked files only (no node_modules, no dist).
    const files = new TextDecoder().decode(
      (await new Deno.Command("git", {
        args: ["ls-files", "-co", "--exclude-standard"],
        cwd: root,
        stdout: "piped",
      }).output()).stdout,
    ).split("\n").filter(Boolean);
    for (const f of files) {
      await Deno.mkdir(path.join(tmp, "src", path.dirname(f)), { recursive: true });
      await Deno.copyFile(path.join(root, f), path.join(tmp, "src", f)).catch(() => {});
    }
    // The walkthrough the README gives for a machine without root (the demo's own fallback).
    const readme = await Deno.readTextFile(path.join(root, "README.md"));
    const demo = /`(npx -y deno@2\.9\.6 task -q demo)`/.exec(readme)?.[1];
    assert.ok(demo, "the README names the no-root command");
    const args = demo.replace(/^npx -y deno@2\.9\.6 /, "").split(" ");
    // As root (CI), in a user namespace without a mapping: uid 65534, as a user without sudo.
    const argv = [Deno.execPath(), ...args];
    const asRoot = Deno.uid() === 0;
    const r = await new Deno.Command(asRoot ? "unshare" : argv[0], {
      args: asRoot ? ["--user", "--", ...argv] : argv.slice(1),
      cwd: path.join(tmp, "src"),
      env: { PODMIN_DEMO_DIR: path.join(tmp, "demo"), NO_COLOR: "1" },
      stdout: "piped",
      stderr: "piped",
    }).output();
    const out = new TextDecoder().decode(r.stdout);
    const err = new TextDecoder().decode(r.stderr);
    assert.equal(r.code, 0, err);
    const all = out + err;
    for (
      const noise of [
        /Initialize/,
        /Download/,
        /build scripts/,
        /approve-scripts/,
        /compile/,
        /Warning/,
      ]
    ) {
      assert.doesNotMatch(all, noise);
    }
    assert.match(out, /^== agent log/m);
    assert.match(
      out,
      /^\d\d:\d\d:\d\d\.\d{3} {2}info {2}agent {2}manifest written {2}file=podmin_default_hello\.json$/m,
    );
    assert.doesNotMatch(out, /^\{"ts"/m);
  } finally {
    await Deno.remove(tmp, { recursive: true });
  }
});

/** Splits one pasted shell command into words (quotes and line continuations understood). */
function shellWords(text: string): string[] {
  const words: string[] = [];
  let word: string | undefined;
  let quote: string | undefined;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (quote) {
      if (c === quote) quote = undefined;
      else word = (word ?? "") + c;
    } else if (c === "'" || c === '"') {
      quote = c;
      word ??= "";
    } else if (c === "\\" && text[i + 1] === "\n") i++;
    else if (/\s/.test(c)) {
      if (word !== undefined) words.push(word);
      word = undefined;
    } else word = (word ?? "") + c;
  }
  if (word !== undefined) words.push(word);
  return words;
}

Deno.test("help: every example in 'podmin --help' and each command's --help parses as written", async () => {
  const program = await loadCommands(programOf());
  const helps = [(await cli("--help")).out];
  for (const c of program.commands) {
    const r = await cli(c.name, "--help");
    assert.equal(r.code, 0, `${c.name} --help: ${r.err}`);
    helps.push(r.out);
  }
  let checked = 0;
  const seen = new Set<string>();
  for (const help of helps) {
    const examples = help.split(/^Examples?:\n/m).slice(1).map((s) => s.split(/\n\n/)[0]);
    for (const block of examples) {
      for (const cmd of block.replace(/\\\n/g, " ").split("\n")) {
        for (const part of cmd.trim().replace(/\s+#.*$/, "").split(" | ")) {
          const text = part.replace(/^sudo /, "");
          if (!text.startsWith("podmin ")) continue;
          const parsed = parseInvocation(program, shellWords(text).slice(1));
          seen.add(parsed.command?.name ?? "");
          checked++;
        }
      }
    }
  }
  assert.ok(checked >= 25, `only ${checked} examples`);
  for (const c of program.commands) {
    if (c.name === "version") continue;
    assert.ok(seen.has(c.name), `no example runs ${c.name}`);
  }
});

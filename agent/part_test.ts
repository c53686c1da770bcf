import assert from "node:assert/strict";
import type { CommandContext } from "../core/kit/cli_kit.ts";
import { flagHelp, flagOptions, type FlagSpecs, Hub, readFlags } from "./part.ts";

const FLAGS = {
  dir: { type: "string", default: "/run/x", arg: "DIR", help: "where it goes (default {default})" },
  name: { type: "string", arg: "NAME", help: "a name,\nover two lines" },
  quiet: { type: "boolean", help: "\nsays nothing" },
  "a-rather-long-flag-name": { type: "string", arg: "DUR", help: "text after two spaces" },
} as const satisfies FlagSpecs;

const ctx = (values: CommandContext["values"]) => ({ values }) as CommandContext;

Deno.test("flagOptions: the parse table with each default, booleans false", () => {
  assert.deepEqual(flagOptions(FLAGS), {
    dir: { type: "string", default: "/run/x" },
    name: { type: "string" },
    quiet: { type: "boolean", default: false },
    "a-rather-long-flag-name": { type: "string" },
  });
});

Deno.test("flagHelp: one column, the default filled in, continuation lines indented", () => {
  assert.equal(
    flagHelp(FLAGS),
    [
      "  --dir DIR                 where it goes (default /run/x)",
      "  --name NAME               a name,",
      "                            over two lines",
      "  --quiet",
      "                            says nothing",
      "  --a-rather-long-flag-name DUR  text after two spaces",
    ].join("\n"),
  );
});

Deno.test("readFlags: typed values, the declared default when a flag is absent", () => {
  const v = readFlags(ctx({ name: "n", quiet: true }), FLAGS);
  assert.deepEqual(v, {
    dir: "/run/x",
    name: "n",
    quiet: true,
    "a-rather-long-flag-name": undefined,
  });
  assert.equal(readFlags(ctx({}), FLAGS).quiet, false);
});

Deno.test("Hub: subscribers in order, typed payloads, events without payload", () => {
  const hub = new Hub<{ changed: void; snapshot: number }>();
  const seen: string[] = [];
  hub.on("snapshot", (n) => seen.push(`a${n}`));
  hub.on("snapshot", (n) => seen.push(`b${n}`));
  hub.on("changed", () => seen.push("changed"));
  hub.emit("snapshot", 7);
  hub.emit("changed");
  assert.deepEqual(seen, ["a7", "b7", "changed"]);
});

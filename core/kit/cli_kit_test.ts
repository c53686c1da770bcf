import assert from "node:assert/strict";
import {
  closest,
  type Command,
  type DeferredCommand,
  editDistance,
  loadCommands,
  parseInvocation,
  type Program,
  runProgram,
} from "./cli_kit.ts";

const noop = () => Promise.resolve();
const run: Command = {
  name: "run",
  summary: "run",
  help: "Usage: prog run",
  options: { cluster: { type: "string" }, once: { type: "boolean" } },
  run: noop,
};
const program: Program = {
  name: "prog",
  description: "prog",
  commands: [run],
  defaultCommand: "run",
};

Deno.test("cli kit: edit distance and the closest known word within max(2, length/3)", () => {
  assert.equal(editDistance("--buckett", "--bucket"), 1);
  assert.equal(editDistance("aply", "apply"), 1);
  assert.equal(editDistance("", "abc"), 3);
  assert.equal(closest("--regoin", ["--region", "--bucket"]), "--region");
  assert.equal(closest("describ", ["delete", "describe", "diff"]), "describe");
  assert.equal(closest("xyz", ["apply", "get"]), undefined);
});

Deno.test("cli kit: a default command takes flag-only argv; unknown words stay unknown commands", () => {
  const inv = parseInvocation(program, ["--cluster=prod", "--once"]);
  assert.equal(inv.command?.name, "run");
  assert.equal(inv.values.cluster, "prod");
  assert.throws(
    () => parseInvocation(program, ["rnu"]),
    /unknown command "rnu"; did you mean run\?/,
  );
  assert.throws(
    () => parseInvocation(program, ["run", "--clustr", "x"]),
    /unknown flag --clustr for 'prog run'; did you mean --cluster\?/,
  );
});

Deno.test("cli kit: expected OS errors get their own message and hint; others say re-run with --debug", async () => {
  const failing = (e: Error): Program => ({
    name: "prog",
    description: "prog",
    commands: [{ ...run, run: () => Promise.reject(e) }],
  });
  const errLines = async (e: Error) => {
    const err: string[] = [];
    const code = await runProgram(failing(e), ["run"], { out: () => {}, err: (l) => err.push(l) });
    return { code, err };
  };
  const inUse = await errLines(new Deno.errors.AddrInUse("Address already in use (os error 98)"));
  assert.equal(inUse.code, 1);
  assert.deepEqual(inUse.err, [
    "error: address already in use",
    "hint: another process is listening there; stop it or choose another address",
  ]);
  const denied = await errLines(new Deno.errors.PermissionDenied("open '/etc/x' (os error 13)"));
  assert.equal(denied.err[0], "error: permission denied: open '/etc/x'");
  const bug = await errLines(new TypeError("x is undefined"));
  assert.match(bug.err[1], /this is unexpected; re-run with --debug/);
});

Deno.test("cli kit: missing values, values for switches and stray arguments in Podmin's words", () => {
  assert.throws(
    () => parseInvocation(program, ["run", "--cluster"]),
    /^UsageError: flag --cluster needs a value$/,
  );
  assert.throws(
    () => parseInvocation(program, ["run", "--once=yes"]),
    /flag --once takes no value/,
  );
  assert.throws(
    () => parseInvocation(program, ["run", "extra"]),
    /unexpected argument "extra": 'prog run' takes none/,
  );
});

Deno.test("cli kit: a deferred command loads only when argv selects it, then parses and runs as loaded", async () => {
  let loads = 0;
  let ran: unknown;
  const serve: DeferredCommand = {
    name: "serve",
    summary: "serve things",
    load: () => {
      loads++;
      return Promise.resolve({
        name: "serve",
        summary: "serve things",
        help: "Usage: prog serve [--port N]",
        options: { port: { type: "string" } },
        run: (ctx) => {
          ran = ctx.values.port;
          return Promise.resolve(3);
        },
      });
    },
  };
  const p: Program = { name: "prog", description: "prog", commands: [run, serve] };
  const io = () => {
    const lines: string[] = [];
    return { lines, io: { out: (l: string) => lines.push(l), err: (l: string) => lines.push(l) } };
  };
  const help = io();
  assert.equal(await runProgram(p, ["--help"], help.io), 0);
  assert.match(help.lines.join("\n"), /serve\s+serve things/);
  assert.equal(await runProgram(p, ["run", "--once"], io().io), 0);
  assert.equal(loads, 0, "neither the program's help nor another command loads it");
  const served = io();
  assert.equal(await runProgram(p, ["serve", "--port", "8080"], served.io), 3);
  assert.equal(ran, "8080");
  const commandHelp = io();
  assert.equal(await runProgram(p, ["serve", "--help"], commandHelp.io), 0);
  assert.match(commandHelp.lines[0], /^Usage: prog serve \[--port N\]/);
  const bad = io();
  assert.equal(await runProgram(p, ["serve", "--prot", "1"], bad.io), 2);
  assert.match(bad.lines[0], /unknown flag --prot for 'prog serve'; did you mean --port\?/);
  assert.equal(loads, 3);
  assert.throws(() => parseInvocation(p, ["serve"]), /command serve is not loaded/);
  const loaded = await loadCommands(p);
  assert.equal(parseInvocation(loaded, ["serve", "--port=1"]).values.port, "1");
});

/**
 * Conventions shared by the `podmin` and `podmin-agent` command lines:
 * global flags, subcommand dispatch, help text and the error style
 * ("error: message" + "hint: …", non-zero exit, stack only with --debug).
 */

import { parseArgs, type ParseArgsConfig } from "node:util";
import { PodminError, UsageError } from "./errors.ts";

/** Option definitions in node:util parseArgs form. */
export type OptionSpec = NonNullable<ParseArgsConfig["options"]>;

/** Flags every command accepts. */
export const GLOBAL_OPTIONS = {
  bucket: { type: "string" },
  region: { type: "string" },
  debug: { type: "boolean", default: false },
  help: { type: "boolean", short: "h", default: false },
} as const satisfies OptionSpec;

/** Help lines of the global flags. */
export const GLOBAL_HELP = `Global flags:
  --bucket URL     the cluster bucket: s3://NAME (endpoint from AWS_ENDPOINT_URL
                   when set) or file:///absolute/path (a local filesystem store);
                   default: $PODMIN_BUCKET
  --region REGION  AWS region (default: $AWS_REGION, $AWS_DEFAULT_REGION, then us-east-1)
  --debug          print stack traces of errors
  --version        print the version
  -h, --help       show help`;

/** One subcommand. */
export interface Command {
  name: string;
  /** One line for the command list. */
  summary: string;
  /** Full help text (usage, flags, examples). */
  help: string;
  options: OptionSpec;
  /** Accepts positional arguments. */
  positionals?: boolean;
  /** Rewrites argv before parsing (flags whose value is optional, like `--nat64`). */
  rewriteArgs?: (args: string[]) => string[];
  /** Words shell completion offers for the first positional argument (e.g. resource kinds). */
  words?: string[];
  /** Exit code of a failure other than a usage error (default 1; `diff` uses 2 like kubectl). */
  errorExitCode?: number;
  run(ctx: CommandContext): Promise<number | void>;
}

/** What a command receives. */
export interface CommandContext {
  values: Record<string, string | boolean | string[] | boolean[] | undefined>;
  positionals: string[];
  /** Where normal output goes (stdout). */
  out: (line: string) => void;
  /** Where progress and diagnostics go (stderr). */
  err: (line: string) => void;
  /**
   * A transient progress line: on a terminal it is redrawn in place (the next line replaces
   * it); elsewhere it is an ordinary stderr line.
   */
  status: (line: string) => void;
}

/**
 * A command known by its name and summary until argv selects it; its whole definition (help,
 * flags, run) is then loaded. For a command whose help and flags live in the same module as its
 * implementation; a `Command` whose `run` imports its implementation keeps help and parsing
 * cheap, so prefer that.
 */
export interface DeferredCommand {
  name: string;
  /** One line for the command list. */
  summary: string;
  load(): Promise<Command>;
}

/** A program made of subcommands. */
export interface Program {
  name: string;
  description: string;
  commands: (Command | DeferredCommand)[];
  /** Command run when argv names none but has flags (e.g. a systemd unit's flag list). */
  defaultCommand?: string;
  /** Example lines shown by `PROGRAM --help`. */
  examples?: string;
}

function programHelp(p: Program): string {
  const width = Math.max(...p.commands.map((c) => c.name.length));
  const list = p.commands.map((c) => `  ${c.name.padEnd(width)}  ${c.summary}`).join("\n");
  const examples = p.examples ? `\n\nExamples:\n${p.examples}` : "";
  return `${p.description}

Usage: ${p.name} [global flags] COMMAND [flags]

Commands:
${list}

${GLOBAL_HELP}${examples}

Run '${p.name} COMMAND --help' for a command's flags and examples.`;
}

/** Levenshtein distance of two short strings. */
export function editDistance(a: string, b: string): number {
  let prev = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const row = [i];
    for (let j = 1; j <= b.length; j++) {
      row[j] = Math.min(
        prev[j] + 1,
        row[j - 1] + 1,
        prev[j - 1] + (a[i - 1] === b[j - 1] ? 0 : 1),
      );
    }
    prev = row;
  }
  return prev[b.length];
}

/** The known word closest to `word`, when it is close enough to be a slip of the keyboard. */
export function closest(word: string, known: Iterable<string>): string | undefined {
  let best: string | undefined;
  let bestDistance = Infinity;
  for (const k of known) {
    const d = editDistance(word, k);
    if (d < bestDistance) [best, bestDistance] = [k, d];
  }
  const limit = Math.max(2, Math.floor(word.length / 3));
  return bestDistance <= limit ? best : undefined;
}

/** ` (did you mean X?)`-style suffix, or "". */
function didYouMean(word: string, known: Iterable<string>): string {
  const c = closest(word, known);
  return c === undefined ? "" : `; did you mean ${c}?`;
}

function flagNames(options: OptionSpec): string[] {
  return Object.entries(options).flatMap((
    [k, o],
  ) => [`--${k}`, ...(o.short ? [`-${o.short}`] : [])]);
}

function isDeferred(c: Command | DeferredCommand): c is DeferredCommand {
  return "load" in c;
}

/** A program whose every command is loaded. */
export type LoadedProgram = Omit<Program, "commands"> & { commands: Command[] };

/** The program with every deferred command loaded (what needs every flag: completion, tests). */
export async function loadCommands(program: Program): Promise<LoadedProgram> {
  const commands = await Promise.all(program.commands.map((c) => isDeferred(c) ? c.load() : c));
  return { ...program, commands };
}

/** Splits argv into the command name and the rest (global flags may come first). */
function findCommand(program: Program, argv: string[]): { name?: string; rest: string[] } {
  const withValue = new Set(
    Object.entries(GLOBAL_OPTIONS).filter(([, o]) => o.type === "string").map(([k]) => `--${k}`),
  );
  const known = new Set([...flagNames(GLOBAL_OPTIONS), "--version"]);
  const commands = new Set(program.commands.map((c) => c.name));
  let unknownFlag: string | undefined;
  let afterUnknown = false;
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === "--") break;
    if (a.startsWith("-") && a !== "-") {
      const name = a.split("=")[0];
      afterUnknown = false;
      if (withValue.has(a)) i++;
      else if (!known.has(name)) {
        unknownFlag ??= name;
        afterUnknown = !a.includes("=");
      }
      continue;
    }
    if (commands.has(a) || a === "help") {
      return { name: a, rest: [...argv.slice(0, i), ...argv.slice(i + 1)] };
    }
    if (afterUnknown) {
      afterUnknown = false; // most likely the unknown flag's value
      continue;
    }
    throw new UsageError(
      `unknown command ${JSON.stringify(a)}${didYouMean(a, commands)}`,
      { hint: `run '${program.name} --help' for the list of commands` },
    );
  }
  if (unknownFlag && !program.defaultCommand) {
    const all = [
      ...known,
      ...program.commands.flatMap((c) => isDeferred(c) ? [] : flagNames(c.options)),
    ];
    throw new UsageError(`unknown flag ${unknownFlag}${didYouMean(unknownFlag, all)}`, {
      hint: `run '${program.name} --help'`,
    });
  }
  return { rest: argv };
}

/** A parsed command line. */
export interface Invocation {
  /** The command to run; undefined when the program's help is wanted. */
  command?: Command;
  /** The command's help (or the program's, without a command) was asked for. */
  help: boolean;
  values: CommandContext["values"];
  positionals: string[];
}

/** Which command argv selects (undefined: the program's help) and the arguments it parses. */
interface Selection {
  name?: string;
  rest: string[];
  wantsHelp: boolean;
}

function selectCommand(program: Program, argv: string[]): Selection {
  const dashDash = argv.indexOf("--");
  const flagsPart = dashDash < 0 ? argv : argv.slice(0, dashDash);
  const found = findCommand(program, argv);
  const wantsHelp = found.rest.includes("--help") || found.rest.includes("-h");
  if (
    found.name === undefined && flagsPart.includes("--version") &&
    program.commands.some((c) => c.name === "version")
  ) {
    return { name: "version", rest: found.rest.filter((a) => a !== "--version"), wantsHelp };
  }
  if (found.name === undefined && program.defaultCommand && argv.length && !wantsHelp) {
    return { name: program.defaultCommand, rest: found.rest, wantsHelp };
  }
  return { ...found, wantsHelp };
}

/**
 * Parses argv as `runProgram` does, without running anything: unknown commands and flags are
 * usage errors that name the closest known one. A selected deferred command must have been
 * loaded (`loadCommands`).
 */
export function parseInvocation(program: Program, argv: string[]): Invocation {
  const { name, rest, wantsHelp } = selectCommand(program, argv);
  if (name === undefined || name === "help") {
    return { help: name === "help" || wantsHelp, values: {}, positionals: [] };
  }
  const command = program.commands.find((c) => c.name === name)!;
  if (isDeferred(command)) {
    throw new Error(`command ${name} is not loaded: parse with loadCommands(program)`);
  }
  return parseCommandArgs(program, command, rest);
}

/** The program with the deferred command argv selects (if any) loaded. */
async function loadSelected(program: Program, argv: string[]): Promise<Program> {
  const { name } = selectCommand(program, argv);
  const selected = program.commands.find((c) => c.name === name);
  if (!selected || !isDeferred(selected)) return program;
  const loaded = await selected.load();
  return { ...program, commands: program.commands.map((c) => c === selected ? loaded : c) };
}

function parseCommandArgs(program: Program, command: Command, rest: string[]): Invocation {
  const args = command.rewriteArgs ? command.rewriteArgs(rest) : rest;
  const options = { ...GLOBAL_OPTIONS, ...command.options };
  const hint = `run '${program.name} ${command.name} --help'`;
  const loose = parseArgs({ args, options, allowPositionals: true, strict: false, tokens: true });
  for (const t of loose.tokens ?? []) {
    if (t.kind !== "option" || t.name in options) continue;
    const raw = t.rawName;
    throw new UsageError(
      `unknown flag ${raw} for '${program.name} ${command.name}'${
        didYouMean(raw, flagNames(options))
      }`,
      { hint },
    );
  }
  let parsed;
  try {
    parsed = parseArgs({
      args,
      options,
      allowPositionals: command.positionals ?? false,
      strict: true,
    });
  } catch (e) {
    throw new UsageError(
      parseArgsMessage((e as Error).message, `${program.name} ${command.name}`),
      {
        hint,
      },
    );
  }
  return {
    command,
    help: parsed.values.help === true,
    values: parsed.values as CommandContext["values"],
    positionals: parsed.positionals,
  };
}

/** node:util parseArgs messages in Podmin's words (what is wrong, with the offending value). */
function parseArgsMessage(message: string, where: string): string {
  let m = /^Option '(.+?)(?: <value>)?' argument missing/.exec(message);
  if (m) return `flag ${m[1]} needs a value`;
  m = /^Option '(.+?)' does not take an argument/.exec(message);
  if (m) return `flag ${m[1]} takes no value`;
  m = /^Unexpected argument '(.*)'\. This command does not take positional arguments/s.exec(
    message,
  );
  if (m) return `unexpected argument ${JSON.stringify(m[1])}: '${where}' takes none`;
  return message.replace(/\. To specify.*$/s, "");
}

/** Writers for stdout, stderr and the transient status line. */
interface Io {
  out?: (l: string) => void;
  err?: (l: string) => void;
  status?: (l: string) => void;
}

function defaultIo(io: Io): Required<Io> {
  const out = io.out ?? ((l: string) => console.log(l));
  if (io.err) return { out, err: io.err, status: io.status ?? io.err };
  const encoder = new TextEncoder();
  const write = (text: string) => {
    const bytes = encoder.encode(text);
    let off = 0;
    while (off < bytes.length) off += Deno.stderr.writeSync(bytes.subarray(off));
  };
  let transient = false;
  const err = (l: string) => {
    write(`${transient ? "\r\x1b[K" : ""}${l}\n`);
    transient = false;
  };
  if (!Deno.stderr.isTerminal()) return { out, err, status: err };
  return {
    out: (l) => {
      if (transient) write("\r\x1b[K");
      transient = false;
      out(l);
    },
    err,
    status: (l) => {
      write(`\r\x1b[K${l}`);
      transient = true;
    },
  };
}

/** Runs a program and returns its exit code. Never throws. */
export async function runProgram(
  program: Program,
  argv: string[],
  io: Io = {},
): Promise<number> {
  const { out, err, status } = defaultIo(io);
  const debug = argv.includes("--debug");
  let errorExitCode = 1;
  try {
    const inv = parseInvocation(await loadSelected(program, argv), argv);
    if (!inv.command) {
      if (!inv.help) {
        err(programHelp(program));
        return 2;
      }
      out(programHelp(program));
      return 0;
    }
    if (inv.help) {
      out(`${inv.command.help}\n\n${GLOBAL_HELP}`);
      return 0;
    }
    errorExitCode = inv.command.errorExitCode ?? 1;
    const code = await inv.command.run({
      values: inv.values,
      positionals: inv.positionals,
      out,
      err,
      status,
    });
    return code ?? 0;
  } catch (e) {
    const code = reportError(e, { err, debug });
    return code === 1 ? errorExitCode : code;
  }
}

/** Operating-system errors that are expected conditions, with what to do about them. */
const OS_ERRORS: [new (...args: never[]) => Error, string, string][] = [
  [
    Deno.errors.AddrInUse,
    "address already in use",
    "another process is listening there; stop it or choose another address",
  ],
  [
    Deno.errors.AddrNotAvailable,
    "address not available on this machine",
    "choose an address of one of this machine's interfaces",
  ],
  [
    Deno.errors.PermissionDenied,
    "permission denied",
    "run as a user that may do this (root for node paths and network setup)",
  ],
  [
    Deno.errors.ConnectionRefused,
    "connection refused",
    "check that the service is running and the address is right",
  ],
];

/** Prints an error in the Podmin style and returns the exit code (2 for usage errors). */
export function reportError(
  e: unknown,
  options: { err: (l: string) => void; debug: boolean },
): number {
  const { err, debug } = options;
  const os = OS_ERRORS.find(([type]) => e instanceof type);
  if (e instanceof PodminError) {
    err(`error: ${e.message}`);
    if (e.hint) err(`hint: ${e.hint}`);
  } else if (os) {
    const detail = (e as Error).message.replace(/\s*\(os error \d+\)/, "");
    const lower = detail.toLowerCase();
    err(`error: ${os[1]}${lower === os[1] ? "" : `: ${detail}`}`);
    err(`hint: ${os[2]}`);
  } else {
    err(`error: ${e instanceof Error ? e.message : String(e)}`);
    err("hint: this is unexpected; re-run with --debug and report the output");
  }
  if (debug && e instanceof Error && e.stack) err(e.stack);
  return e instanceof UsageError ? 2 : 1;
}

/** Describes a file-system error for a message: `no such file or directory` rather than the OS text. */
export function describeFsError(e: unknown): string {
  if (e instanceof Deno.errors.NotFound) return "no such file or directory";
  if (e instanceof Deno.errors.PermissionDenied) return "permission denied";
  if (e instanceof Deno.errors.IsADirectory) return "is a directory";
  const m = e instanceof Error ? e.message : String(e);
  return m.replace(/\s*\(os error \d+\).*$/, "");
}

/** The value of a string flag, or an error naming the flag. */
export function requireString(ctx: CommandContext, flag: string, hint?: string): string {
  const v = ctx.values[flag];
  if (typeof v !== "string" || v === "") {
    throw new UsageError(`--${flag} is required`, { hint });
  }
  return v;
}

/** The --bucket flag, falling back to $PODMIN_BUCKET. */
export function bucketUrl(ctx: CommandContext): string {
  const v = ctx.values.bucket;
  if (typeof v === "string" && v !== "") return v;
  const env = Deno.env.get("PODMIN_BUCKET");
  if (env) return env;
  throw new UsageError("no cluster bucket given", {
    hint: "pass --bucket s3://NAME or --bucket file:///path, or set PODMIN_BUCKET",
  });
}

/** A string flag's value; undefined when the flag was not given. */
export function stringFlag(ctx: CommandContext, flag: string): string | undefined {
  const v = ctx.values[flag];
  return typeof v === "string" ? v : undefined;
}

/** A boolean flag's value; false when the flag was not given. */
export function booleanFlag(ctx: CommandContext, flag: string): boolean {
  return ctx.values[flag] === true;
}

/** A repeatable string flag's values, in order; empty when the flag was not given. */
export function stringsFlag(ctx: CommandContext, flag: string): string[] {
  const v = ctx.values[flag];
  if (typeof v === "string") return [v];
  return Array.isArray(v) ? v.filter((x): x is string => typeof x === "string") : [];
}

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
  --region REGION  AWS region (default: $AWS_REGION, then us-east-1)
  --debug          print stack traces of errors
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
}

/** A program made of subcommands. */
export interface Program {
  name: string;
  description: string;
  commands: Command[];
  /** Command run when argv names none but has flags (e.g. a systemd unit's flag list). */
  defaultCommand?: string;
}

function programHelp(p: Program): string {
  const width = Math.max(...p.commands.map((c) => c.name.length));
  const list = p.commands.map((c) => `  ${c.name.padEnd(width)}  ${c.summary}`).join("\n");
  return `${p.description}

Usage: ${p.name} [global flags] COMMAND [flags]

Commands:
${list}

${GLOBAL_HELP}

Run '${p.name} COMMAND --help' for a command's flags and examples.`;
}

/** Splits argv into the command name and the rest (global flags may come first). */
function findCommand(argv: string[]): { name?: string; rest: string[] } {
  const withValue = new Set(
    Object.entries(GLOBAL_OPTIONS).filter(([, o]) => o.type === "string").map(([k]) => `--${k}`),
  );
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === "--") break;
    if (a.startsWith("-")) {
      if (withValue.has(a)) i++;
      continue;
    }
    return { name: a, rest: [...argv.slice(0, i), ...argv.slice(i + 1)] };
  }
  return { rest: argv };
}

/** Runs a program and returns its exit code. Never throws. */
export async function runProgram(
  program: Program,
  argv: string[],
  io: { out?: (l: string) => void; err?: (l: string) => void } = {},
): Promise<number> {
  const out = io.out ?? ((l: string) => console.log(l));
  const err = io.err ?? ((l: string) => console.error(l));
  const debug = argv.includes("--debug");
  // `PROGRAM --version` is the program's `version` command.
  if (argv[0] === "--version" && program.commands.some((c) => c.name === "version")) {
    argv = ["version", ...argv.slice(1)];
  }
  try {
    const found = findCommand(argv);
    const wantsHelp = found.rest.includes("--help") || found.rest.includes("-h");
    const { name, rest } = found.name === undefined && program.defaultCommand && argv.length &&
        !wantsHelp
      ? { name: program.defaultCommand, rest: found.rest }
      : found;
    if (name === undefined || name === "help") {
      if (name === undefined && !rest.includes("--help") && !rest.includes("-h")) {
        err(programHelp(program));
        return 2;
      }
      out(programHelp(program));
      return 0;
    }
    const command = program.commands.find((c) => c.name === name);
    if (!command) {
      throw new UsageError(`unknown command ${JSON.stringify(name)}`, {
        hint: `run '${program.name} --help' for the list of commands`,
      });
    }
    let parsed;
    try {
      parsed = parseArgs({
        args: command.rewriteArgs ? command.rewriteArgs(rest) : rest,
        options: { ...GLOBAL_OPTIONS, ...command.options },
        allowPositionals: command.positionals ?? false,
        strict: true,
      });
    } catch (e) {
      throw new UsageError((e as Error).message.replace(/\. To specify.*$/s, ""), {
        hint: `run '${program.name} ${command.name} --help'`,
      });
    }
    if (parsed.values.help) {
      out(`${command.help}\n\n${GLOBAL_HELP}`);
      return 0;
    }
    const code = await command.run({
      values: parsed.values as CommandContext["values"],
      positionals: parsed.positionals,
      out,
      err,
    });
    return code ?? 0;
  } catch (e) {
    return reportError(e, { err, debug });
  }
}

/** Prints an error in the Podmin style and returns the exit code (2 for usage errors). */
export function reportError(
  e: unknown,
  options: { err: (l: string) => void; debug: boolean },
): number {
  const { err, debug } = options;
  if (e instanceof PodminError) {
    err(`error: ${e.message}`);
    if (e.hint) err(`hint: ${e.hint}`);
  } else {
    err(`error: ${e instanceof Error ? e.message : String(e)}`);
    err("hint: this is unexpected; re-run with --debug and report the output");
  }
  if (debug && e instanceof Error && e.stack) err(e.stack);
  return e instanceof UsageError ? 2 : 1;
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

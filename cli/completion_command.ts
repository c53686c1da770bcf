/**
 * `podmin completion bash|zsh|fish`: shell completion of commands, flags and resource kinds,
 * generated from the program's own command list (so it never drifts from the parser).
 */

import {
  type Command,
  GLOBAL_OPTIONS,
  loadCommands,
  type LoadedProgram,
  type OptionSpec,
  type Program,
} from "../core/kit/cli_kit.ts";
import { UsageError } from "../core/kit/errors.ts";

function flags(options: OptionSpec): string[] {
  return Object.entries(options).flatMap((
    [k, o],
  ) => [`--${k}`, ...(o.short ? [`-${o.short}`] : [])]);
}

const GLOBAL_FLAGS = [...flags(GLOBAL_OPTIONS), "--version"];
const VALUE_FLAGS = Object.entries(GLOBAL_OPTIONS).filter(([, o]) => o.type === "string")
  .map(([k]) => `--${k}`);

function bash(program: LoadedProgram): string {
  const cases = program.commands.map((c) =>
    `    ${c.name}) words="${
      [...(c.words ?? []), ...flags(c.options), ...GLOBAL_FLAGS].join(" ")
    }" ;;`
  ).join("\n");
  return `# bash completion for ${program.name}; load with: source <(${program.name} completion bash)
_${program.name}_complete() {
  local cur="\${COMP_WORDS[COMP_CWORD]}" cmd="" i w words
  for ((i = 1; i < COMP_CWORD; i++)); do
    w="\${COMP_WORDS[i]}"
    case "$w" in
      ${VALUE_FLAGS.join("|")}) ((i++)) ;;
      -*) ;;
      *) cmd="$w"; break ;;
    esac
  done
  case "$cmd" in
    "") words="${[...program.commands.map((c) => c.name), ...GLOBAL_FLAGS].join(" ")}" ;;
${cases}
    *) words="" ;;
  esac
  COMPREPLY=($(compgen -W "$words" -- "$cur"))
}
complete -o default -F _${program.name}_complete ${program.name}
`;
}

function zsh(program: LoadedProgram): string {
  return `#compdef ${program.name}
# zsh completion for ${program.name}; load with: source <(${program.name} completion zsh)
autoload -U +X bashcompinit && bashcompinit
${bash(program)}`;
}

function fishQuote(text: string): string {
  return `'${text.replace(/\\/g, "\\\\").replace(/'/g, "\\'")}'`;
}

function fishFlags(program: LoadedProgram, command: Command | undefined): string[] {
  const options = command ? command.options : GLOBAL_OPTIONS;
  const condition = command ? `-n '__fish_seen_subcommand_from ${command.name}'` : "";
  return Object.entries(options).map(([k, o]) =>
    `complete -c ${program.name} ${condition} -l ${k}${o.short ? ` -s ${o.short}` : ""}${
      o.type === "string" ? " -r" : ""
    }`.replace(/ {2,}/g, " ")
  );
}

function fish(program: LoadedProgram): string {
  const lines = [
    `# fish completion for ${program.name}; load with: ${program.name} completion fish | source`,
    `complete -c ${program.name} -f`,
    ...program.commands.map((c) =>
      `complete -c ${program.name} -n '__fish_use_subcommand' -a ${c.name} -d ${
        fishQuote(c.summary)
      }`
    ),
    ...fishFlags(program, undefined),
    `complete -c ${program.name} -l version`,
    ...program.commands.flatMap((c) => [
      ...fishFlags(program, c),
      ...(c.words?.length
        ? [
          `complete -c ${program.name} -n '__fish_seen_subcommand_from ${c.name}' -a ${
            fishQuote(c.words.join(" "))
          }`,
        ]
        : []),
    ]),
  ];
  return lines.join("\n") + "\n";
}

/** The completion command of `program` (which lists this command too). */
export function completionCommand(program: Program): Command {
  return {
    name: "completion",
    summary: "print shell completion for bash, zsh or fish",
    help: `Usage: ${program.name} completion bash|zsh|fish

Prints a completion script for commands, flags and resource kinds.

Examples:
  source <(${program.name} completion bash)    # in ~/.bashrc
  source <(${program.name} completion zsh)     # in ~/.zshrc
  ${program.name} completion fish > ~/.config/fish/completions/${program.name}.fish`,
    options: {},
    positionals: true,
    words: ["bash", "zsh", "fish"],
    async run(ctx) {
      const [shell, ...extra] = ctx.positionals;
      const make = { bash, zsh, fish }[shell as "bash" | "zsh" | "fish"];
      if (!make || extra.length) {
        throw new UsageError(
          `unsupported shell ${JSON.stringify(shell ?? "")}: expected bash, zsh or fish`,
          { hint: `for example: source <(${program.name} completion bash)` },
        );
      }
      ctx.out(make(await loadCommands(program)).trimEnd());
    },
  };
}

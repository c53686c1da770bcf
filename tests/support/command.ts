/** Runs a host command to completion, for the machine harness (never through a shell). */

/** A finished command. */
export interface CommandOutput {
  code: number;
  stdout: string;
  stderr: string;
}

/** A command that exited non-zero where success was required; its output is in the message. */
export class CommandError extends Error {
  /** The failed command's output. */
  readonly output: CommandOutput;
  constructor(command: string[], output: CommandOutput) {
    super(
      `${command.join(" ")} exited ${output.code}` +
        (output.stderr.trim() ? `: ${output.stderr.trim()}` : "") +
        (output.stdout.trim() ? `\n${output.stdout.trim()}` : ""),
    );
    this.name = "CommandError";
    this.output = output;
  }
}

/** Runs `cmd args…`; never throws on a non-zero exit. */
export async function runCommand(
  cmd: string,
  args: string[],
  options: { env?: Record<string, string>; clearEnv?: boolean } = {},
): Promise<CommandOutput> {
  const out = await new Deno.Command(cmd, {
    args,
    env: options.env,
    clearEnv: options.clearEnv,
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  }).output();
  const dec = new TextDecoder();
  return { code: out.code, stdout: dec.decode(out.stdout), stderr: dec.decode(out.stderr) };
}

/** Runs `cmd args…` and returns its stdout; throws `CommandError` when it fails. */
export async function mustRun(cmd: string, args: string[]): Promise<string> {
  const out = await runCommand(cmd, args);
  if (out.code !== 0) throw new CommandError([cmd, ...args], out);
  return out.stdout;
}

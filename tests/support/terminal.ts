/**
 * Runs a program on a pseudo-terminal (util-linux `script`), so that its stdin, stdout and
 * stderr are a real tty, and answers a prompt the way an operator types it: the answer is written
 * only after the prompt has appeared on the terminal.
 */

/** The outcome of a program run on a terminal. */
export interface TerminalRun {
  code: number;
  /** Everything the terminal showed (stdout and stderr, with the echoed answer). */
  screen: string;
  /** Whether the prompt appeared (and so the answer was typed). */
  prompted: boolean;
}

const quote = (s: string) => `'${s.replaceAll("'", `'\\''`)}'`;

/**
 * Runs `command` on a pty; when the screen matches `prompt`, types `answer` and Enter. The program
 * then runs to its end (stdin stays open until it exits).
 */
export async function runOnTerminal(options: {
  command: string[];
  env?: Record<string, string>;
  prompt: RegExp;
  answer: string;
}): Promise<TerminalRun> {
  const child = new Deno.Command("script", {
    args: ["--quiet", "--return", "--command", options.command.map(quote).join(" "), "/dev/null"],
    env: options.env,
    stdin: "piped",
    stdout: "piped",
    stderr: "inherit",
  }).spawn();
  const stdin = child.stdin.getWriter();
  let screen = "";
  let prompted = false;
  for await (const text of child.stdout.pipeThrough(new TextDecoderStream())) {
    screen += text;
    if (!prompted && options.prompt.test(screen)) {
      prompted = true;
      await stdin.write(new TextEncoder().encode(`${options.answer}\r`));
    }
  }
  const status = await child.status;
  await stdin.close().catch(() => {});
  return { code: status.code, screen: screen.replaceAll("\r\n", "\n"), prompted };
}

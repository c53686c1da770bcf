/** Confirmation of destructive commands: `--yes`, or typing the cluster name on a terminal. */

import { UsageError } from "../../core/errors.ts";

/** Resolves when confirmed; throws a UsageError otherwise. */
export async function confirmDestructive(options: {
  yes: boolean;
  cluster: string;
  what: string;
  err: (line: string) => void;
  /** Reads one line from the operator (tests inject it). */
  readLine?: () => Promise<string | null>;
  isTerminal?: boolean;
}): Promise<void> {
  if (options.yes) return;
  const terminal = options.isTerminal ?? Deno.stdin.isTerminal();
  if (!terminal && !options.readLine) {
    throw new UsageError(`refusing to ${options.what} without confirmation`, {
      hint: "pass --yes (there is no terminal to ask on)",
    });
  }
  options.err(`This will ${options.what}.`);
  options.err(`Type the cluster name (${options.cluster}) to confirm:`);
  const line = await (options.readLine ?? readStdinLine)();
  if (line?.trim() !== options.cluster) {
    throw new UsageError("not confirmed; nothing was changed", {
      hint: `type ${options.cluster} exactly, or pass --yes`,
    });
  }
}

async function readStdinLine(): Promise<string | null> {
  const buf = new Uint8Array(1024);
  const n = await Deno.stdin.read(buf);
  return n === null ? null : new TextDecoder().decode(buf.subarray(0, n)).split("\n")[0];
}

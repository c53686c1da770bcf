/**
 * Confirmation before setup creates and before teardown or destroy removes: `--yes`, or an
 * answer typed on a terminal. The question is printed without a newline, so the answer appears
 * on the same line, as people expect from a prompt.
 */

import { UsageError } from "../../core/kit/errors.ts";

/** How the question is asked and answered (tests inject both). */
interface Asking {
  /** Reads one line from the operator. */
  readLine?: () => Promise<string | null>;
  isTerminal?: boolean;
  /** Writes the question (no newline added); default: stderr. */
  prompt?: (text: string) => void;
}

/** Resolves when confirmed; throws a UsageError otherwise. */
export async function confirmDestructive(
  options: Asking & {
    yes: boolean;
    cluster: string;
    what: string;
    err: (line: string) => void;
  },
): Promise<void> {
  if (options.yes) return;
  refuseWithoutTerminal(options);
  options.err(`This will ${options.what}.`);
  (options.prompt ?? writeStderr)(`Type the cluster name (${options.cluster}) to confirm: `);
  const line = await (options.readLine ?? readStdinLine)();
  if (line?.trim() !== options.cluster) {
    throw new UsageError("not confirmed; nothing was changed", {
      hint: `type ${options.cluster} exactly, or pass --yes`,
    });
  }
}

/** Asks `question [y/N]` unless `yes`; resolves on y or yes, throws a UsageError otherwise. */
export async function confirmPlan(
  options: Asking & {
    yes: boolean;
    question: string;
    /** `create cluster prod`: for the refusal without a terminal. */
    what: string;
  },
): Promise<void> {
  if (options.yes) return;
  refuseWithoutTerminal(options);
  (options.prompt ?? writeStderr)(`${options.question} [y/N] `);
  const line = (await (options.readLine ?? readStdinLine)())?.trim().toLowerCase();
  if (line !== "y" && line !== "yes") {
    throw new UsageError("not confirmed; nothing was created", {
      hint: "answer y to go ahead, or pass --yes",
    });
  }
}

function writeStderr(text: string): void {
  const bytes = new TextEncoder().encode(text);
  let off = 0;
  while (off < bytes.length) off += Deno.stderr.writeSync(bytes.subarray(off));
}

async function readStdinLine(): Promise<string | null> {
  const buf = new Uint8Array(1024);
  const n = await Deno.stdin.read(buf);
  return n === null ? null : new TextDecoder().decode(buf.subarray(0, n)).split("\n")[0];
}

/** Without a terminal to ask on (and no injected answer), refuses to `what` at all. */
function refuseWithoutTerminal(options: Asking & { what: string }): void {
  const terminal = options.isTerminal ?? Deno.stdin.isTerminal();
  if (!terminal && !options.readLine) {
    throw new UsageError(`refusing to ${options.what} without confirmation`, {
      hint: "pass --yes (there is no terminal to ask on)",
    });
  }
}

/** `podmin`: the operator's command line. The only writer of desired state. */

import { runProgram } from "../core/kit/cli_kit.ts";
import { programOf } from "./program.ts";
import "./aws_sdk_credentials.ts";

/** Runs `podmin ARGS…` and returns its exit code (the bundle's launcher calls this). */
export function main(args: string[]): Promise<number> {
  return runProgram(programOf(), args);
}

if (import.meta.main) {
  Deno.exit(await main(Deno.args));
}

/** `podmin`: the operator's command line. The only writer of desired state. */

import { runProgram } from "../core/cli_kit.ts";
import { programOf } from "./program.ts";

if (import.meta.main) {
  Deno.exit(await runProgram(programOf(), Deno.args));
}

/** `podmin-agent`: converges one VM to the desired state in the cluster bucket. */

import { runProgram } from "../core/kit/cli_kit.ts";
import { programOf } from "./program.ts";

if (import.meta.main) {
  Deno.exit(await runProgram(programOf(), Deno.args));
}

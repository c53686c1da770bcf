/**
 * `deno task demo`: Podmin's main job on a real single-node cluster on this host, as root on
 * Linux (cli/local/demo_run.ts); otherwise the no-root walkthrough (cli/demo.sh).
 */

import { runDemo } from "./local/demo_run.ts";

if (import.meta.main) {
  Deno.exit(await runDemo({ args: Deno.args }));
}

/** The operator-side working directory of a cluster's OpenTofu configuration. */

import * as path from "node:path";

/** `$PODMIN_HOME/<cluster>` or `~/.local/share/podmin/<cluster>`. */
export function defaultWorkDir(cluster: string): string {
  const home = Deno.env.get("PODMIN_HOME") ??
    path.join(
      Deno.env.get("XDG_DATA_HOME") ?? path.join(Deno.env.get("HOME") ?? "/tmp", ".local", "share"),
      "podmin",
    );
  return path.join(home, cluster);
}

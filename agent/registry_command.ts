/** `podmin-agent registry`: the loopback registry alone (the agent's `run` also hosts it). */

import { booleanFlag, bucketUrl, type Command, stringFlag } from "../core/cli_kit.ts";
import { createLogger } from "../core/log.ts";
import { openStore } from "../core/store_url.ts";
import { REGISTRY_LISTEN } from "../registry/defaults.ts";
import { ImageReader } from "../registry/image_reader.ts";
import { parseListen, serveRegistry } from "../registry/server.ts";

const registry: Command = {
  name: "registry",
  summary: "serve the read-only OCI registry over the bucket (loopback)",
  help: `Usage: podmin-agent registry --bucket URL [--listen HOST:PORT]

Serves the pull side of the OCI distribution API for apps/ and mirror/
repositories straight from the bucket. Every write and listing is refused.

Flags:
  --listen HOST:PORT     address to serve on (default ${REGISTRY_LISTEN}); loopback only
  --allow-non-loopback   serve on a non-loopback --listen address: the registry has no
                         authentication, so only where a firewall restricts its clients`,
  options: {
    listen: { type: "string", default: REGISTRY_LISTEN },
    "allow-non-loopback": { type: "boolean", default: false },
  },
  async run(ctx) {
    const { hostname, port } = parseListen(stringFlag(ctx, "listen") ?? REGISTRY_LISTEN, {
      allowNonLoopback: booleanFlag(ctx, "allow-non-loopback"),
    });
    const store = openStore(bucketUrl(ctx), { region: stringFlag(ctx, "region") });
    const log = createLogger("registry");
    const abort = new AbortController();
    Deno.addSignalListener("SIGTERM", () => abort.abort());
    Deno.addSignalListener("SIGINT", () => abort.abort());
    const server = serveRegistry({
      reader: new ImageReader({ store }),
      log,
      hostname,
      port,
      signal: abort.signal,
    });
    await server.finished;
    return 0;
  },
};

/** The registry command. */
export const registryCommands: Command[] = [registry];

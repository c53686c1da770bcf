/** `podmin-agent registry`: the loopback registry alone (the agent's `run` also hosts it). */

import { booleanFlag, bucketUrl, type Command, stringFlag } from "../core/kit/cli_kit.ts";
import { createLogger } from "../core/kit/log.ts";
import { openStore } from "../core/store/store_url.ts";
import {
  REGISTRY_LISTEN,
  REGISTRY_REDIRECT_MIN_BYTES,
  REGISTRY_REDIRECT_TTL,
} from "../registry/defaults.ts";
import { ImageReader } from "../registry/image_reader.ts";
import { parseListen, parseRedirect, serveRegistry } from "../registry/server.ts";

const registry: Command = {
  name: "registry",
  summary: "serve the read-only OCI registry over the bucket (loopback)",
  help: `Usage: podmin-agent registry --bucket URL [--listen HOST:PORT] [--redirect-min-bytes N|off]
       [--redirect-ttl DUR]

Serves the pull side of the OCI distribution API for apps/ and mirror/
repositories straight from the bucket. Every write and listing is refused.

Flags:
  --listen HOST:PORT     address to serve on (default ${REGISTRY_LISTEN}); loopback only
  --allow-non-loopback   serve on a non-loopback --listen address: the registry has no
                         authentication, so only where a firewall restricts its clients
  --redirect-min-bytes N|off
                         on an S3 bucket, answer a GET of a blob of at least N bytes
                         (KiB/MiB/GiB suffixes) with a 307 to a presigned URL of its key, so
                         the client reads it from S3 and verifies it (default 1MiB); "off"
                         serves every blob through the registry, verified
  --redirect-ttl DUR     lifetime of those URLs, 1s to 1h (default ${REGISTRY_REDIRECT_TTL})`,
  options: {
    listen: { type: "string", default: REGISTRY_LISTEN },
    "allow-non-loopback": { type: "boolean", default: false },
    "redirect-min-bytes": { type: "string", default: String(REGISTRY_REDIRECT_MIN_BYTES) },
    "redirect-ttl": { type: "string", default: REGISTRY_REDIRECT_TTL },
  },
  async run(ctx) {
    const { hostname, port } = parseListen(stringFlag(ctx, "listen") ?? REGISTRY_LISTEN, {
      allowNonLoopback: booleanFlag(ctx, "allow-non-loopback"),
    });
    const redirect = parseRedirect({
      minBytes: stringFlag(ctx, "redirect-min-bytes") ?? String(REGISTRY_REDIRECT_MIN_BYTES),
      ttl: stringFlag(ctx, "redirect-ttl") ?? REGISTRY_REDIRECT_TTL,
    });
    const store = openStore(bucketUrl(ctx), { region: stringFlag(ctx, "region") });
    const log = createLogger("registry");
    const abort = new AbortController();
    Deno.addSignalListener("SIGTERM", () => abort.abort());
    Deno.addSignalListener("SIGINT", () => abort.abort());
    const server = serveRegistry({
      reader: new ImageReader({ store }),
      log,
      redirect,
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

/** `podmin-agent registry`: the loopback registry alone (the agent's `run` also hosts it). */

import { bucketUrl, type Command, stringFlag } from "../core/kit/cli_kit.ts";
import { createLogger } from "../core/kit/log.ts";
import { openStore } from "../core/store/store_url.ts";
import {
  REGISTRY_LISTEN,
  REGISTRY_REDIRECT_MIN_BYTES,
  REGISTRY_REDIRECT_TTL,
} from "../registry/defaults.ts";
import { ImageReader } from "../registry/image_reader.ts";
import { parseListen, parseRedirect, serveRegistry } from "../registry/server.ts";
import { flagHelp, flagOptions, type FlagSpecs, readFlags } from "./part.ts";

/** The flags of `podmin-agent registry`, declared once. */
const FLAGS = {
  listen: {
    type: "string",
    default: REGISTRY_LISTEN,
    arg: "HOST:PORT",
    help: "address to serve on (default {default}); loopback only",
  },
  "allow-non-loopback": {
    type: "boolean",
    help: "serve on a non-loopback --listen address: the registry has no\n" +
      "authentication, so only where a firewall restricts its clients",
  },
  "redirect-min-bytes": {
    type: "string",
    default: REGISTRY_REDIRECT_MIN_BYTES,
    arg: "N|off",
    help: "\non an S3 bucket, answer a GET of a blob of at least N bytes\n" +
      "(KiB/MiB/GiB suffixes) with a 307 to a presigned URL of its key, so\n" +
      'the client reads it from S3 and verifies it (default {default}); "off"\n' +
      "serves every blob through the registry, verified",
  },
  "redirect-ttl": {
    type: "string",
    default: REGISTRY_REDIRECT_TTL,
    arg: "DUR",
    help: "lifetime of those URLs, 1s to 1h (default {default})",
  },
} as const satisfies FlagSpecs;

const registry: Command = {
  name: "registry",
  summary: "serve the read-only OCI registry over the bucket (loopback)",
  help: `Usage: podmin-agent registry --bucket URL [--listen HOST:PORT] [--redirect-min-bytes N|off]
       [--redirect-ttl DUR]

Serves the pull side of the OCI distribution API for apps/ and mirror/
repositories straight from the bucket. Every write and listing is refused.

Flags:
${flagHelp(FLAGS)}`,
  options: flagOptions(FLAGS),
  async run(ctx) {
    const v = readFlags(ctx, FLAGS);
    const { hostname, port } = parseListen(v.listen, {
      allowNonLoopback: v["allow-non-loopback"],
    });
    const redirect = parseRedirect({ minBytes: v["redirect-min-bytes"], ttl: v["redirect-ttl"] });
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

/**
 * The registry host part of `podmin-agent run`: the loopback registry (registry/server.ts) over
 * the cluster bucket, served until the agent stops. A failure to serve is logged, never fatal.
 */

import { createLogger } from "../core/kit/log.ts";
import {
  REGISTRY_LISTEN,
  REGISTRY_REDIRECT_MIN_BYTES,
  REGISTRY_REDIRECT_TTL,
} from "../registry/defaults.ts";
import { ImageReader } from "../registry/image_reader.ts";
import {
  parseListen,
  parseRedirect,
  type RegistryRedirect,
  serveRegistry,
} from "../registry/server.ts";
import type { FlagSpecs, FlagValues, Part, PartContext } from "./part.ts";

/** The registry host part's flags. */
export const REGISTRY_FLAGS = {
  "registry-listen": {
    type: "string",
    default: REGISTRY_LISTEN,
    arg: "ADDR",
    help: "serve the loopback registry here (default {default});\n" +
      '"off" disables it; not started with --once; loopback only',
  },
  "registry-allow-non-loopback": {
    type: "boolean",
    help: "\nallow a non-loopback --registry-listen (no authentication:\n" +
      "only where a firewall restricts who reaches it)",
  },
  "registry-redirect-min-bytes": {
    type: "string",
    default: REGISTRY_REDIRECT_MIN_BYTES,
    arg: "N|off",
    help: "\non an S3 bucket, answer a registry GET of a blob of at least N\n" +
      "bytes (KiB/MiB/GiB suffixes; default {default}) with a 307 to a\n" +
      'presigned URL of its key at the store\'s endpoint; "off" serves\n' +
      "every blob through the registry, verified",
  },
  "registry-redirect-ttl": {
    type: "string",
    default: REGISTRY_REDIRECT_TTL,
    arg: "DUR",
    help: "\nlifetime of those URLs, 1s to 1h (default {default})",
  },
} as const satisfies FlagSpecs;

/** The registry host's flags, checked: a refused address fails the command, not only a log. */
export function registryFlags(v: FlagValues<typeof REGISTRY_FLAGS>): {
  listen: string;
  redirect: RegistryRedirect | undefined;
} {
  if (v["registry-listen"] !== "off") {
    parseListen(v["registry-listen"], {
      allowNonLoopback: v["registry-allow-non-loopback"],
      flag: "--registry-listen",
      allowFlag: "--registry-allow-non-loopback",
    });
  }
  const redirect = parseRedirect({
    minBytes: v["registry-redirect-min-bytes"],
    ttl: v["registry-redirect-ttl"],
    minBytesFlag: "--registry-redirect-min-bytes",
    ttlFlag: "--registry-redirect-ttl",
  });
  return { listen: v["registry-listen"], redirect };
}

/** The registry host part, or undefined for `--registry-listen off`. */
export function registryHostPart(o: {
  context: PartContext;
  /** `--registry-listen` (checked by the flags). */
  listen: string;
  redirect: RegistryRedirect | undefined;
}): Part | undefined {
  if (o.listen === "off") return undefined;
  const { store, log } = o.context;
  const abort = new AbortController();
  return {
    name: "registry",
    start() {
      const { hostname, port } = parseListen(o.listen, { allowNonLoopback: true }); // checked
      try {
        serveRegistry({
          reader: new ImageReader({ store }),
          log: createLogger("registry"),
          redirect: o.redirect,
          hostname,
          port,
          signal: abort.signal,
        });
      } catch (err) {
        // The node's Pods keep running without the registry; deployments still converge.
        log.error("registry not served", { listen: o.listen, error: (err as Error).message });
      }
    },
    stop() {
      abort.abort();
      return Promise.resolve();
    },
  };
}

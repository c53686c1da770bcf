/**
 * The registry host part of `podmin-agent run`: the loopback registry (registry/server.ts) over
 * the cluster bucket, served until the agent stops. A failure to serve is logged, never fatal.
 */

import { createLogger } from "../core/kit/log.ts";
import { ImageReader } from "../registry/image_reader.ts";
import { parseListen, type RegistryRedirect, serveRegistry } from "../registry/server.ts";
import type { Part, PartContext } from "./part.ts";

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

/**
 * The node's own part of `podmin-agent run`: its record under `dns/nodes/` (written every
 * heartbeat, soon after a change of convergence or of its endpoints, removed on a clean shutdown)
 * and the hand-back of freed native memory to the system.
 */

import { HEARTBEAT_MS } from "../../core/bucket/node_record.ts";
import { RecordPacer } from "./record_pacer.ts";
import { UsageError } from "../../core/kit/errors.ts";
import { formatIpv6, parseIpv6, parseIpv6Prefix } from "../../core/model/ipv6.ts";
import { canTrimMalloc, trimMalloc } from "../../ffi/malloc_trim.ts";
import { Loop } from "../loop.ts";
import type { FlagSpecs, FlagValues, Part, PartContext } from "../part.ts";
import { NodeRecordWriter, type NodeRecordWriterOptions } from "./node_record_writer.ts";

/** The node part's flags (its record, and the dataplane's Pod prefix). */
export const NODE_FLAGS = {
  "ipv6-prefix": {
    type: "string",
    arg: "PREFIX",
    help: "the node's delegated Pod prefix (used by the dataplane)",
  },
  "node-address": {
    type: "string",
    arg: "ADDR",
    help: "this node's IPv6 address, for its record under dns/nodes/",
  },
} as const satisfies FlagSpecs;

/** The node part's flags, checked (canonical address; the prefix must be an IPv6 prefix). */
export function nodeFlags(v: FlagValues<typeof NODE_FLAGS>): {
  address?: string;
  podPrefix?: string;
} {
  // The delegated Pod prefix (the dataplane's input): refused when it is not an IPv6 prefix.
  const podPrefix = v["ipv6-prefix"];
  if (podPrefix !== undefined) {
    try {
      parseIpv6Prefix(podPrefix);
    } catch (err) {
      throw new UsageError(`--ipv6-prefix: ${(err as Error).message}`, {
        hint: "the node's delegated Pod prefix, e.g. --ipv6-prefix 2600:1f18:4b2:aa00:1234::/80",
      });
    }
  }
  return { address: optionalIpv6(v["node-address"]), podPrefix };
}

/** An optional IPv6 address flag, canonical. */
function optionalIpv6(value: string | undefined): string | undefined {
  if (value === undefined || value === "") return undefined;
  try {
    return formatIpv6(parseIpv6(value));
  } catch (err) {
    throw new UsageError(`--node-address: ${(err as Error).message}`, {
      hint: "the node's IPv6 address, e.g. --node-address 2600:1f18:4b2:aa00::10",
    });
  }
}

const MAX_BACKOFF_MS = 30_000;
/**
 * How often freed native memory is handed back to the system (ffi/malloc_trim.ts); also right
 * after the Services or the node's Deployments change, the passes that read many objects.
 */
const MALLOC_TRIM_MS = 30_000;

/** Options of `nodePart`: the node record writer's, with the part's context for its store. */
export interface NodePartOptions extends Omit<NodeRecordWriterOptions, "store"> {
  context: PartContext;
  /** The cluster's size, when the mesh knows it (its snapshot's `nodes`). */
  clusterNodes?: () => number | undefined;
}

/** The node record and malloc-trim loops. */
export function nodePart(o: NodePartOptions): Part {
  const { store, hub, log } = o.context;
  const record = new NodeRecordWriter({
    store,
    nodeGroup: o.nodeGroup,
    nodeId: o.nodeId,
    address: o.address,
    podPrefix: o.podPrefix,
    summary: o.summary,
    discovery: o.discovery,
    problem: o.problem,
  });
  const recordLoop = new Loop({
    name: "node-record",
    intervalMs: HEARTBEAT_MS,
    maxBackoffMs: MAX_BACKOFF_MS,
    log,
    pass: async () => {
      await record.write();
      return {};
    },
  });
  const trimLoop = canTrimMalloc()
    ? new Loop({
      name: "malloc-trim",
      intervalMs: MALLOC_TRIM_MS,
      maxBackoffMs: MAX_BACKOFF_MS,
      log,
      pass: () => {
        trimMalloc();
        return Promise.resolve({});
      },
    })
    : undefined;
  const pacer = new RecordPacer({ nodes: o.clusterNodes });
  hub.on("localEndpointsChanged", () => recordLoop.hint());
  if (trimLoop) hub.on("servicesChanged", () => trimLoop.hint());
  hub.on("convergenceChanged", () => {
    // The record follows a change of convergence within a window spread over the cluster (its
    // size from the mesh: a bounded cluster-wide rate, §7.9), not at the next heartbeat.
    const delayMs = pacer.delayMs(performance.now());
    if (delayMs !== undefined) recordLoop.hint({ delayMs });
    trimLoop?.hint();
  });
  return {
    name: "node",
    start() {
      recordLoop.start();
      trimLoop?.start();
    },
    async stop() {
      await Promise.all([recordLoop.stop(), trimLoop?.stop()]);
    },
    async release() {
      // A clean shutdown removes the node's record; a crash leaves it to go stale.
      await record.remove().catch((err) =>
        log.warn("cannot remove the node record", {
          key: record.key,
          error: (err as Error).message,
        })
      );
    },
  };
}

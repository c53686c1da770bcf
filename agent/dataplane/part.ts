/**
 * The dataplane part of `podmin-agent run` (spec §7.6): the eBPF Service dataplane, its input the
 * mesh snapshot joined with the Services; hinted by the Services, the mesh and kubelet's Pod events.
 */

import { UsageError } from "../../core/kit/errors.ts";
import type { ClusterSnapshot } from "../../core/model/endpoint_snapshot.ts";
import type { FlagSpecs, FlagValues, Part, PartContext } from "../part.ts";
import type { ServicesSource } from "../services/part.ts";
import { Dataplane } from "./dataplane.ts";
import { DATAPLANE_STATUS_FILE, NodeDataplane } from "./node_dataplane.ts";

/** The dataplane part's flags. */
export const DATAPLANE_FLAGS = {
  dataplane: {
    type: "string",
    default: "auto",
    arg: "auto|off",
    help: 'the eBPF Service dataplane: "{default}" (default) runs it with\n' +
      "--mesh-listen (its input is the mesh snapshot joined with the\n" +
      "Services); it loads while there are Services, detaches when\n" +
      "there are none; needs root (CAP_BPF, CAP_NET_ADMIN)",
  },
} as const satisfies FlagSpecs;

/** `--dataplane`, checked: whether the dataplane runs (auto: with the mesh). */
export function dataplaneFlags(v: FlagValues<typeof DATAPLANE_FLAGS>, mesh: boolean): boolean {
  if (v.dataplane !== "auto" && v.dataplane !== "off") {
    throw new UsageError(`--dataplane must be auto or off, not ${JSON.stringify(v.dataplane)}`, {
      hint: "auto runs the eBPF Service dataplane whenever --mesh-listen is given",
    });
  }
  return v.dataplane === "auto" && mesh;
}

/** The dataplane part, or undefined when it is off (`--dataplane off`, or no mesh). */
export function dataplanePart(o: {
  context: PartContext;
  enabled: boolean;
  /** `--ipv6-prefix`: the node's delegated Pod prefix. */
  podPrefix?: string;
  services: ServicesSource;
  /** The mesh's newest cluster snapshot (undefined until the first). */
  meshSnapshot: () => ClusterSnapshot | undefined;
}): Part | undefined {
  if (!o.enabled) return undefined;
  const { hub, stateDir, log } = o.context;
  const services = o.services.reader();
  const dataplane = new NodeDataplane({
    dataplane: new Dataplane({ podPrefix: o.podPrefix, log }),
    services,
    meshSnapshot: o.meshSnapshot,
    stateDir,
    log,
  });
  for (const event of ["servicesChanged", "meshSnapshot", "podsEvent"] as const) {
    hub.on(event, () => dataplane.hint());
  }
  return {
    name: "dataplane",
    statusFile: DATAPLANE_STATUS_FILE,
    // DataplaneLoop runs its passes through Loop (dataplane_loop.ts).
    start: () => dataplane.start(),
    stop: () => dataplane.stop(),
  };
}

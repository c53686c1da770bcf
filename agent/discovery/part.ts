/**
 * Discovery's part of `podmin-agent run`: its flags. Kubelet's Pods API is watched by the mesh
 * part (`DiscoveryMesh`), which reports this node's ready endpoints; discovery has no loop of its
 * own.
 */

import type { FlagSpecs } from "../part.ts";
import { PODS_API_SOCKET } from "./pods_api.ts";

/** Discovery's flags: kubelet's Pods API, which the mesh part watches. */
export const DISCOVERY_FLAGS = {
  "pods-api-socket": {
    type: "string",
    default: PODS_API_SOCKET,
    arg: "PATH",
    help: "kubelet's Pods API (default {default})",
  },
  "kubelet-version": {
    type: "string",
    arg: "X.Y.Z",
    help: "the node's kubelet (vmconfig passes it): one without the Pods API\n" +
      "(before 1.36) is reported at once by the status and the node record",
  },
} as const satisfies FlagSpecs;

/**
 * Discovery's part of `podmin-agent run`: its flags. Kubelet's Pods API is watched by the mesh
 * part (`DiscoveryMesh`), which reports this node's ready endpoints; discovery has no loop of its
 * own.
 */

import { UsageError } from "../../core/kit/errors.ts";
import type { FlagSpecs, FlagValues } from "../part.ts";
import { PODS_API_SOCKET } from "./pods_api.ts";
import { kubeletMinor } from "./pods_api_problem.ts";

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

/** Discovery's flags, checked. */
export function discoveryFlags(v: FlagValues<typeof DISCOVERY_FLAGS>): {
  podsApiSocket: string;
  kubeletVersion?: string;
} {
  return {
    podsApiSocket: v["pods-api-socket"],
    kubeletVersion: kubeletVersionFlag(v["kubelet-version"]),
  };
}

/** `--kubelet-version`: empty (an unset unit variable) is unknown; otherwise X.Y.Z. */
function kubeletVersionFlag(v: string | undefined): string | undefined {
  if (v === undefined || v === "") return undefined;
  if (!kubeletMinor(v)) {
    throw new UsageError(`--kubelet-version: ${JSON.stringify(v)} is not a version`, {
      hint: "the kubelet's version as X.Y.Z, e.g. --kubelet-version 1.36.3",
    });
  }
  return v.replace(/^v/, "");
}

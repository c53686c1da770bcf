/** `podmin-agent pods`: what kubelet's local Pods API reports on this node (diagnostics). */

import { booleanFlag, type Command, stringFlag } from "../../core/kit/cli_kit.ts";
import { PODS_API_SOCKET, PodsApiClient, PodsWatch } from "./pods_api.ts";
import type { PodInfo } from "./pod_proto.ts";

function line(p: PodInfo): string {
  return `${p.namespace}\t${p.name}\t${p.phase || "-"}\t${p.ready ? "Ready" : "NotReady"}\t${
    p.ips.join(",") || "-"
  }`;
}

const pods: Command = {
  name: "pods",
  summary: "list this node's Pods from kubelet's local Pods API (what discovery sees)",
  help: `Usage: podmin-agent pods [--socket PATH] [--watch] [-o text|json]

Lists the Pods kubelet reports through its local Pods API (gRPC v1alpha1.Pods),
with phase, readiness and IPv6 addresses. With --watch, prints the whole view
again after every change until interrupted (with -o json: one {"pods":[…]} line
per view).

Flags:
  --socket PATH   the Pods API socket (default ${PODS_API_SOCKET})
  --watch         follow WatchPods instead of one ListPods
  -o json         one JSON object per Pod and line

Example:
  podmin-agent pods -o json`,
  options: {
    socket: { type: "string", default: PODS_API_SOCKET },
    watch: { type: "boolean", default: false },
    output: { type: "string", short: "o", default: "text" },
  },
  async run(ctx) {
    const socket = stringFlag(ctx, "socket") ?? PODS_API_SOCKET;
    const json = stringFlag(ctx, "output") === "json";
    const print = (list: PodInfo[]) => {
      for (const p of list.sort((a, b) => (a.namespace + a.name < b.namespace + b.name ? -1 : 1))) {
        ctx.out(json ? JSON.stringify(p) : line(p));
      }
    };
    if (!booleanFlag(ctx, "watch")) {
      const client = new PodsApiClient(socket);
      try {
        print(await client.list());
      } finally {
        client.close();
      }
      return 0;
    }
    const watch = new PodsWatch({
      socket,
      onChange: () => {
        if (json) ctx.out(JSON.stringify({ pods: watch.view().pods }));
        else {
          ctx.out("---");
          print(watch.view().pods);
        }
      },
    });
    watch.start();
    await new Promise<void>((resolve) => {
      Deno.addSignalListener("SIGTERM", resolve);
      Deno.addSignalListener("SIGINT", resolve);
    });
    watch.stop();
    return 0;
  },
};

/** The agent's discovery commands. */
export const podsCommands: Command[] = [pods];

/**
 * `podmin get` and `podmin describe`: Deployments and Services as the bucket holds them — their
 * help and flags; each loads its implementation (cli/get_run.ts) when it runs.
 */

import type { Command } from "../core/kit/cli_kit.ts";

const get: Command = {
  name: "get",
  summary: "list Deployments or Services",
  help: `Usage: podmin get KIND [NAME…] [-n NS | -A] [-l SELECTOR] [-o table|wide|json|yaml|name]

KIND is deployments (deployment, deploy) or services (service, svc). Without
NAME every object is listed, in all namespaces unless -n is given; NAMEs are
looked up in -n's namespace (default "default").

Flags:
  -n, --namespace NS        only this namespace
  -A, --all-namespaces      every namespace (the default when listing)
  -l, --selector SELECTOR   metadata.labels match: k=v, k!=v, k, !k, k in (a,b),
                            k notin (a,b), comma-separated (all must hold)
  -o, --output FORMAT       table (default); wide (adds images or selected
                            Deployments, and labels); json or yaml (the stored
                            specs, Services with status.vip: 'apply -f -' takes
                            them back unchanged); name (KIND/NAME lines)

Examples:
  podmin --bucket s3://my-cluster get deployments
  podmin --bucket s3://my-cluster get deploy web -n default -o yaml
  podmin --bucket s3://my-cluster get svc -A -l app=web -o wide`,
  options: {
    namespace: { type: "string", short: "n" },
    "all-namespaces": { type: "boolean", short: "A", default: false },
    selector: { type: "string", short: "l" },
    output: { type: "string", short: "o", default: "table" },
  },
  positionals: true,
  words: ["deployments", "services"],
  run: async (ctx) => (await import("./get_run.ts")).runGet(ctx),
};

const describe: Command = {
  name: "describe",
  summary: "show one Deployment or Service in detail",
  help: `Usage: podmin describe deployment|service NAME [-n NS]

A Deployment: NodeGroup, spec digest, labels, each container's image and
whether the image store holds it, declared secrets, the Services selecting it.
A Service: VIP, ports, selector, the Deployments it selects and its Ready
endpoints. Which nodes run a Deployment, at which spec and whether Ready, and
the Service endpoints come from the agents' node records (dns/nodes/).

Flags:
  -n, --namespace NS  namespace (default "default")

Examples:
  podmin --bucket s3://my-cluster describe deployment web
  podmin --bucket s3://my-cluster describe svc web -n staging`,
  options: { namespace: { type: "string", short: "n" } },
  positionals: true,
  words: ["deployment", "service"],
  run: async (ctx) => (await import("./get_run.ts")).runDescribe(ctx),
};

/** The read commands of Deployments and Services. */
export const getCommands: Command[] = [get, describe];

/**
 * `podmin local up | down | status | exec`: a real single-node cluster on this host — its help
 * and flags; the implementation (cli/local/local_run.ts) loads when it runs.
 */

import type { Command } from "../../core/kit/cli_kit.ts";
import { LOCAL_DEFAULTS } from "./local_defaults.ts";

const HELP = `Usage: podmin local up|down|status [flags]
       podmin local exec -- COMMAND [ARG...]

A real single-node Podmin cluster on this Linux host (root): the filesystem
bucket under the state directory, podmin-agent with its loopback registry,
containerd, runc, the ptp/host-local CNI plugins, CoreDNS for Service names
and a standalone kubelet, configured by the same generators as a cloud node. The node's files live under
the state directory and appear at their real paths (/etc/containerd,
/var/lib/kubelet, …) only inside a private mount namespace; the node shares
the host's network, so Pod addresses are reachable from the host. CoreDNS
answers on an address 'up' adds to the host's loopback (in the Pod prefix's
/64, outside the /80): Pods use it as their nameserver, and
'dig @ADDRESS AAAA NAME.NAMESPACE.svc.cluster.local' works from the host.

  up       bring the node up (again: a no-op while it runs; after a crash it
           removes what is left and starts over)
  down     stop it and remove exactly what 'up' made (the bucket stays unless
           --purge)
  status   the daemons, the agent's last pass, the Pods with their addresses
  exec     run a command inside the node's view, e.g. 'crictl ps'

Flags:
  --state-dir DIR       where the node lives (default ${LOCAL_DEFAULTS.stateDir})
  --bin-dir DIR         programs to use (repeatable): containerd,
                        containerd-shim-runc-v2, kubelet, crictl, coredns, runc;
                        without it the pinned versions are downloaded and
                        verified
  --cni-bin-dir DIR     ptp, host-local, loopback (default /opt/cni/bin or
                        /usr/lib/cni)
  --dependency-catalog FILE
                        pins to download instead of the embedded default
                        (the JSON shape of podmin setup --dependency-catalog)
  --agent-binary PATH   podmin-agent to run (default: from this source tree, or
                        podmin-agent beside this program or on PATH)
  --cluster ID          cluster id (default ${LOCAL_DEFAULTS.cluster})
  --nodegroup NAME      the node's NodeGroup (default ${LOCAL_DEFAULTS.nodeGroup})
  --pod-prefix PREFIX   IPv6 /80 the Pods get addresses from
                        (default ${LOCAL_DEFAULTS.podPrefix})
  --registry-port N     loopback registry port (default ${LOCAL_DEFAULTS.registryPort})
  --sandbox-image REF   Pod sandbox image (default ${LOCAL_DEFAULTS.sandboxImage}); mirrored
                        into the bucket when reachable, else a pause image is built here
  --interval DURATION   the agent's index poll interval (default 2s)
  --secrets-interval D  the agent's value refresh interval (default 60s)
  --purge               with down: also remove the default bucket

The global --bucket selects another bucket (s3://NAME or file:///path).

Example:
  sudo podmin local up
  podmin --bucket file://${LOCAL_DEFAULTS.stateDir}/bucket push oci:./web:1.0 apps/web:1.0
  podmin --bucket file://${LOCAL_DEFAULTS.stateDir}/bucket apply -f web.yaml
  sudo podmin local status
  sudo podmin local exec -- crictl logs CONTAINER-ID
  sudo podmin local down`;

const local: Command = {
  name: "local",
  summary: "a real single-node cluster on this host: local up | down | status | exec",
  help: HELP,
  positionals: true,
  options: {
    "state-dir": { type: "string", default: LOCAL_DEFAULTS.stateDir },
    "bin-dir": { type: "string", multiple: true },
    "cni-bin-dir": { type: "string" },
    "dependency-catalog": { type: "string" },
    "agent-binary": { type: "string" },
    cluster: { type: "string", default: LOCAL_DEFAULTS.cluster },
    nodegroup: { type: "string", default: LOCAL_DEFAULTS.nodeGroup },
    "pod-prefix": { type: "string", default: LOCAL_DEFAULTS.podPrefix },
    "registry-port": { type: "string", default: String(LOCAL_DEFAULTS.registryPort) },
    "sandbox-image": { type: "string", default: LOCAL_DEFAULTS.sandboxImage },
    interval: { type: "string", default: "2s" },
    "secrets-interval": { type: "string", default: "60s" },
    purge: { type: "boolean", default: false },
  },
  run: async (ctx) => (await import("./local_run.ts")).runLocal(ctx),
};

/** The `local` command. */
export const localCommands: Command[] = [local];

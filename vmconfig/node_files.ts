/**
 * The node's configuration files, rendered by vmconfig's own Bash generators
 * (lib/generate.sh, embedded in assets.ts) — the one owner of their content.
 * configure.sh calls the same functions on a cloud node; `podmin local` and the
 * tests call them through here, so a local node and a cloud node get the same
 * bytes for the same inputs.
 */

import { VMCONFIG_ASSETS } from "./assets.ts";

/** The libraries a generator needs, in the order configure.sh sources them. */
const LIBS = ["lib/common.sh", "lib/validate.sh", "lib/generate.sh"] as const;

/** Options of `runGenerator`. */
export interface GeneratorCall {
  /** A `gen_*` function of lib/generate.sh. */
  name: string;
  args: string[];
}

/** Raised when a generator refuses its input; carries its own message. */
export class GeneratorError extends Error {
  constructor(call: GeneratorCall, stderr: string) {
    super(`vmconfig ${call.name} ${call.args.join(" ")}: ${stderr.trim() || "failed"}`);
    this.name = "GeneratorError";
  }
}

/** Runs one generator of lib/generate.sh and returns what it printed. */
export async function runGenerator(call: GeneratorCall): Promise<string> {
  if (!/^gen_[a-z0-9_]+$/.test(call.name)) throw new GeneratorError(call, "not a generator");
  const script = LIBS.map((p) => VMCONFIG_ASSETS[p]).join("\n") + '\n"$@"\n';
  const out = await new Deno.Command("bash", {
    args: ["-c", script, "podmin-vmconfig", call.name, ...call.args],
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
    env: { LC_ALL: "C" },
  }).output();
  const dec = new TextDecoder();
  if (!out.success) throw new GeneratorError(call, dec.decode(out.stderr));
  return dec.decode(out.stdout);
}

/**
 * Service DNS on a node, as lib/generate.sh names it (COREFILE, DNS_ZONE_DIR, CLUSTER_DOMAIN,
 * DNS_PORT; a test checks they agree): CoreDNS reads the Corefile and serves the zone file the
 * agent writes into `zoneDir` (its `--dns-dir`).
 */
export const NODE_DNS = {
  corefile: "/etc/podmin/coredns/Corefile",
  zoneDir: "/run/podmin/dns",
  domain: "cluster.local",
  port: 53,
} as const;

/** Inputs of a node's configuration (what configure.sh reads from its env layers). */
export interface NodeFileInputs {
  containerdVersion: string;
  kubeletVersion: string;
  /** Node-local reference of the mirrored sandbox image. */
  sandboxImage: string;
  /** Group id allowed on containerd's socket. */
  socketGid: number;
  registryHostname: string;
  registryHost: string;
  registryPort: number;
  /** The Pod prefix host-local allocates from (the delegated prefix on AWS). */
  podPrefix: string;
  /** The address CoreDNS binds and kubelet names as the Pods' nameserver (the node's IPv6). */
  dnsAddress: string;
  /** Where CoreDNS forwards other names: resolver addresses (space-separated) or a resolv.conf. */
  dnsUpstream: string;
}

/** Real path on the node → content, for every file configure.sh generates for containerd, CRI, kubelet, CNI and CoreDNS. */
export async function renderNodeFiles(i: NodeFileInputs): Promise<Record<string, string>> {
  const gen = (name: string, ...args: Array<string | number>) =>
    runGenerator({ name, args: args.map(String) });
  return {
    "/etc/containerd/config.toml": await gen(
      "gen_containerd_config",
      i.containerdVersion,
      i.sandboxImage,
      i.socketGid,
    ),
    [`/etc/containerd/certs.d/${i.registryHostname}/hosts.toml`]: await gen(
      "gen_hosts_toml",
      i.registryHostname,
      i.registryHost,
      i.registryPort,
    ),
    "/etc/crictl.yaml": await gen("gen_crictl_yaml"),
    "/etc/podmin/kubelet/config.yaml": await gen(
      "gen_kubelet_config",
      i.kubeletVersion,
      i.dnsAddress,
    ),
    "/etc/cni/net.d/10-podmin.conflist": await gen("gen_cni_conflist", i.podPrefix),
    [NODE_DNS.corefile]: await gen(
      "gen_corefile",
      i.dnsAddress,
      NODE_DNS.port,
      `${NODE_DNS.zoneDir}/${NODE_DNS.domain}.db`,
      NODE_DNS.domain,
      i.dnsUpstream,
    ),
  };
}

/**
 * nftables rule sets that do a Service dataplane's job the way kube-proxy writes them, for the
 * dataplane cost benchmark (`dataplane_cost.ts`), so eBPF is compared with what a Kubernetes node
 * would run for the same Services:
 *
 * - `nftablesModeRules`: kube-proxy's nftables mode (pkg/proxy/nftables, GA in 1.33): a verdict
 *   map from (VIP, protocol, port) to a chain per Service, `numgen random` choosing an
 *   endpoint chain that DNATs, the mark-for-masquerade rules for traffic from outside the Pod
 *   CIDR and for hairpin, the forward-path checks of new connections against the no-endpoint map
 *   and the cluster-IP set, the firewall check in prerouting, masquerading in postrouting.
 * - `iptablesModeRules`: kube-proxy's iptables mode written in nft syntax: one services chain
 *   with a rule per Service port (matched linearly, as KUBE-SERVICES is), a chain per Service with
 *   its masquerade rule and a random choice per endpoint, a chain per endpoint (KUBE-SEP).
 *
 * Both hold only what a ClusterIP Service with ready endpoints needs (no NodePorts, no
 * load balancers); chain and map names follow kube-proxy's, with short hashes replaced by
 * indexes.
 */

/** One Service port and its endpoints. */
export interface RuleService {
  vip: string;
  port: number;
  protocol: "tcp" | "udp";
  targetPort: number;
  endpoints: string[];
}

/** The cluster's address ranges the rules mention. */
export interface RuleCluster {
  /** The Pods' CIDR: traffic from outside it to a Service is masqueraded. */
  podCidr: string;
  /** The Service CIDR: unallocated cluster IPs in it are dropped. */
  serviceCidr: string;
}

/** The table kube-proxy's nftables mode uses. */
export const NFTABLES_MODE_TABLE = "kube-proxy";
/** The table of the iptables-mode rules written in nft syntax. */
export const IPTABLES_MODE_TABLE = "kube-proxy-iptables";

const MASQ_BIT = "0x00004000";

/** Rules per `nft -f` transaction after the first (see `nftablesModeRules`). */
const BATCH = 1000;

/**
 * kube-proxy nftables mode for `services`: `nft -f` scripts to load in order, the first creating
 * table ip6 kube-proxy. The endpoint choices (`numgen random mod N vmap { … }`, an anonymous map
 * each) are added in batches of 1,000 rules: in one transaction nftables 1.0.6 took 91 s for
 * 10,000 of them, in batches 10 s. The rule set loaded is the same.
 */
export function nftablesModeRules(services: RuleService[], cluster: RuleCluster): string[] {
  const out: string[] = [];
  const choices: string[] = [];
  const elements = services.map((s, i) =>
    `${s.vip} . ${s.protocol} . ${s.port} : goto ${serviceChain(i, s)}`
  );
  out.push(
    `table ip6 ${NFTABLES_MODE_TABLE} {`,
    `  map service-ips {`,
    `    type ipv6_addr . inet_proto . inet_service : verdict`,
    ...(elements.length ? [`    elements = { ${elements.join(",\n      ")} }`] : []),
    `  }`,
    `  map no-endpoint-services { type ipv6_addr . inet_proto . inet_service : verdict; }`,
    `  map firewall-ips { type ipv6_addr . inet_proto . inet_service : verdict; }`,
    `  set cluster-ips {`,
    `    type ipv6_addr`,
    ...(services.length
      ? [`    elements = { ${[...new Set(services.map((s) => s.vip))].join(", ")} }`]
      : []),
    `  }`,
    `  chain mark-for-masquerade { meta mark set meta mark or ${MASQ_BIT}; }`,
    `  chain masquerading {`,
    `    meta mark & ${MASQ_BIT} == 0 return`,
    `    meta mark set meta mark xor ${MASQ_BIT}`,
    `    masquerade fully-random`,
    `  }`,
    `  chain firewall-check { ip6 daddr . meta l4proto . th dport vmap @firewall-ips; }`,
    `  chain filter-prerouting {`,
    `    type filter hook prerouting priority dstnat - 10; policy accept;`,
    `    ct state new jump firewall-check`,
    `  }`,
    `  chain service-endpoints-check {`,
    `    ip6 daddr . meta l4proto . th dport vmap @no-endpoint-services`,
    `  }`,
    `  chain cluster-ips-check {`,
    `    ip6 daddr @cluster-ips reject`,
    `    ip6 daddr ${cluster.serviceCidr} drop`,
    `  }`,
    `  chain filter-forward {`,
    `    type filter hook forward priority filter; policy accept;`,
    `    ct state new jump service-endpoints-check`,
    `    ct state new jump cluster-ips-check`,
    `  }`,
    `  chain services { ip6 daddr . meta l4proto . th dport vmap @service-ips; }`,
    `  chain nat-prerouting { type nat hook prerouting priority dstnat; policy accept; jump services; }`,
    `  chain nat-postrouting {`,
    `    type nat hook postrouting priority srcnat; policy accept;`,
    `    jump masquerading`,
    `  }`,
  );
  services.forEach((s, i) => {
    const eps = s.endpoints.map((_, j) => endpointChain(i, j, s));
    if (eps.length) {
      choices.push(
        `add rule ip6 ${NFTABLES_MODE_TABLE} ${
          serviceChain(i, s)
        } numgen random mod ${eps.length} vmap { ${
          eps.map((c, j) => `${j} : goto ${c}`).join(", ")
        } }`,
      );
    }
    out.push(
      `  chain ${serviceChain(i, s)} {`,
      `    ip6 daddr ${s.vip} ${s.protocol} dport ${s.port} ip6 saddr != ${cluster.podCidr} jump mark-for-masquerade`,
      `  }`,
    );
    s.endpoints.forEach((ep, j) => out.push(...endpointRules(eps[j], ep, s)));
  });
  out.push(`}`);
  const scripts = [out.join("\n") + "\n"];
  for (let i = 0; i < choices.length; i += BATCH) {
    scripts.push(choices.slice(i, i + BATCH).join("\n") + "\n");
  }
  return scripts;
}

/** kube-proxy iptables mode in nft syntax: `nft -f` scripts (one) creating its own table. */
export function iptablesModeRules(services: RuleService[], cluster: RuleCluster): string[] {
  const out: string[] = [
    `table ip6 ${IPTABLES_MODE_TABLE} {`,
    `  chain mark-for-masquerade { meta mark set meta mark or ${MASQ_BIT}; }`,
    `  chain postrouting {`,
    `    type nat hook postrouting priority srcnat; policy accept;`,
    `    meta mark & ${MASQ_BIT} == 0 return`,
    `    meta mark set meta mark xor ${MASQ_BIT}`,
    `    masquerade fully-random`,
    `  }`,
  ];
  services.forEach((s, i) => {
    const eps = s.endpoints.map((_, j) => endpointChain(i, j, s));
    // KUBE-SVC: the masquerade rule, then one rule per endpoint taken with probability
    // 1/(endpoints left), the last unconditionally (iptables' `-m statistic --mode random`).
    const picks = eps.map((c, j) =>
      j === eps.length - 1
        ? `    goto ${c}`
        : `    numgen random mod ${eps.length - j} == 0 goto ${c}`
    );
    out.push(
      `  chain ${serviceChain(i, s)} {`,
      `    ip6 daddr ${s.vip} ${s.protocol} dport ${s.port} ip6 saddr != ${cluster.podCidr} jump mark-for-masquerade`,
      ...picks,
      `  }`,
    );
    s.endpoints.forEach((ep, j) => out.push(...endpointRules(eps[j], ep, s)));
  });
  // KUBE-SERVICES: one rule per Service port, evaluated in order.
  out.push(
    `  chain services {`,
    ...services.map((s, i) =>
      `    ip6 daddr ${s.vip} ${s.protocol} dport ${s.port} goto ${serviceChain(i, s)}`
    ),
    `  }`,
    `  chain prerouting { type nat hook prerouting priority dstnat; policy accept; jump services; }`,
    `}`,
  );
  return [out.join("\n") + "\n"];
}

function serviceChain(i: number, s: RuleService): string {
  return `service-${i}-bench-svc${i}-${s.protocol}-p${s.port}`;
}

function endpointChain(i: number, j: number, s: RuleService): string {
  return `endpoint-${i}-${j}-bench-svc${i}-${s.protocol}-p${s.port}`;
}

function endpointRules(chain: string, ep: string, s: RuleService): string[] {
  return [
    `  chain ${chain} {`,
    `    ip6 saddr ${ep} jump mark-for-masquerade`,
    `    meta l4proto ${s.protocol} dnat to [${ep}]:${s.targetPort}`,
    `  }`,
  ];
}

#!/bin/bash
# Podmin vmconfig: routes the delegated Pod prefix through the Pod ENI (every boot, before
# containerd and kubelet; podmin-pod-network.service).
#
# - IPv6 forwarding on; router advertisements still accepted on both ENIs (accept_ra=2).
# - Pod-sourced traffic: "from PREFIX" uses the main table only for routes more specific than a
#   /64 (the node's Pod /128 routes: Pod-to-Pod on the node stays local; the node's own addresses
#   are in the local table), then table POD_ROUTE_TABLE whose default route leaves through the Pod
#   ENI, so EC2 sees Pod addresses only on the ENI that owns them. The subnet's on-link /64 routes
#   (router advertisements give one per ENI) are suppressed too: through them a Pod's packet to
#   another node or another node's Pod, all in the same /64, would leave through whichever ENI the
#   main table lists first, the node ENI included.
# - Unallocated Pod addresses are unreachable instead of bouncing back to the VPC; ptp adds one
#   /128 route per Pod, which is more specific.
# The Pod ENI must have its ordinary IPv6 address and default router first (bounded wait).
# shellcheck source-path=SCRIPTDIR
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=../lib/common.sh
source "$here/lib/common.sh"
# shellcheck source=../lib/validate.sh
source "$here/lib/validate.sh"
PODMIN_LOG_TAG=podmin-pod-network

check_root_prefix
declare -A env=()
env_read "$PODMIN_ENV_DIR/podmin-pod-network.env" schema_env_pod_network - env ||
  die "invalid $PODMIN_ENV_DIR/podmin-pod-network.env"
pod_if=${env[POD_INTERFACE]} node_if=${env[NODE_INTERFACE]} prefix=${env[POD_PREFIX]}
table=${env[POD_ROUTE_TABLE]}

sysctl_set() { printf '%s' "$2" >"/proc/sys/net/ipv6/conf/$1"; }
for dev in "$node_if" "$pod_if"; do
  [[ -d /sys/class/net/$dev || -e /proc/sys/net/ipv6/conf/$dev ]] || die "no interface $dev"
  sysctl_set "$dev/accept_ra" 2
done
sysctl_set all/forwarding 1
ip link set dev "$pod_if" up

deadline=$((SECONDS + env[POD_ENI_WAIT_SECONDS])) gateway=
while :; do
  if [[ -n $(ip -o -6 addr show dev "$pod_if" scope global -tentative) ]]; then
    route=$(ip -6 route show default dev "$pod_if" | head -n 1)
    if [[ $route =~ via\ ([0-9a-fA-F:]+) ]]; then
      gateway=${BASH_REMATCH[1]}
      break
    fi
  fi
  ((SECONDS < deadline)) || die "the Pod ENI $pod_if has no IPv6 address or default router"
  sleep 1
done

ip -6 route replace default via "$gateway" dev "$pod_if" table "$table"
ip -6 route replace unreachable "$prefix" metric 1024
rule_exists() { [[ -n $(ip -6 rule show priority "$1") ]]; }
# A rule 1000 of an older version (suppress_prefixlength 0) is replaced.
if [[ $(ip -6 rule show priority 1000) != *"suppress_prefixlength 64"* ]]; then
  ip -6 rule del priority 1000 2>/dev/null || true
  ip -6 rule add priority 1000 from "$prefix" lookup main suppress_prefixlength 64
fi
rule_exists 1001 || ip -6 rule add priority 1001 from "$prefix" lookup "$table"
log "Pod prefix $prefix routed through $pod_if (via $gateway, table $table)"

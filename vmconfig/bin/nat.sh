#!/bin/bash
# Podmin vmconfig: the NAT VM's dataplane (every boot; podmin-nat.service).
#
# Applies the sysctls (forwarding, conntrack max), the nftables ruleset (IPv4 source NAT for the
# allowlisted sources; NAT64 source allowlist and non-global destination filter in a raw-priority
# prerouting chain, i.e. before Jool translates) and, when NAT64 is enabled, a Jool instance in
# netfilter mode with the configured pool6 and pool4. Jool's modules must match the running
# kernel. NAT64_JOOL says where Jool comes from: "archive" (the pinned dependency: modules in
# /usr/lib/modules/$(uname -r)/extra/podmin/, /usr/local/sbin/jool) or "debian" (jool-dkms
# built them for this kernel, modprobe finds them; jool-tools' /usr/bin/jool).
#
# With the stable NAT64 ENI (NAT64_INTERFACE, attached by bootstrap.sh) translated traffic leaves
# through that ENI, the one with the EIP and without source/destination check: routing table
# NAT64_ROUTE_TABLE holds its subnet and a default route via the subnet's VPC router
# (NAT64_IPV4_GATEWAY) and, for IPv6, via the router its router advertisements name; policy rules
# send there IPv4 from pool4 (Jool's output), IPv4 forwarded from that ENI (source NAT) and IPv6
# from the NAT64 prefix (Jool's replies to the nodes). The main table (the boot ENI, the VM's own
# traffic) stays as the system configured it. First it waits (NAT64_ENI_WAIT_SECONDS, default
# 300) until the interface holds pool4 and has an IPv6 router. Rules and table are rewritten on
# every run, so the result does not depend on what an earlier run left.
# shellcheck source-path=SCRIPTDIR
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=../lib/common.sh
source "$here/lib/common.sh"
# shellcheck source=../lib/validate.sh
source "$here/lib/validate.sh"
PODMIN_LOG_TAG=podmin-nat

check_root_prefix
declare -A env=()
env_read "$PODMIN_ENV_DIR/podmin-nat.env" schema_env_nat - env || die "invalid podmin-nat.env"
[[ -d /sys/class/net/${env[NAT_WAN_INTERFACE]} ]] || die "no interface ${env[NAT_WAN_INTERFACE]}"
[[ -d /sys/class/net/${env[NAT_METRICS_INTERFACE]} ]] ||
  die "no metrics interface ${env[NAT_METRICS_INTERFACE]}"

modprobe nf_conntrack
sysctl -q -p "$(r "${env[NAT_SYSCTL]}")"
nft -f "$(r "${env[NAT_RULESET]}")"
log "applied ${env[NAT_RULESET]} (WAN ${env[NAT_WAN_INTERFACE]})"

# has_ipv4 IFACE ADDR: ADDR is configured on IFACE.
has_ipv4() {
  local line
  while IFS= read -r line; do
    [[ $line =~ inet\ ([0-9.]+)/ && ${BASH_REMATCH[1]} == "$2" ]] && return 0
  done < <(ip -o -4 addr show dev "$1" 2>/dev/null)
  return 1
}

# policy_rule FAMILY PRIORITY TABLE SELECTOR...: exactly one rule at PRIORITY,
# "SELECTOR lookup TABLE".
policy_rule() {
  local family=$1 priority=$2 table=$3
  shift 3
  while [[ -n $(ip "$family" rule show priority "$priority") ]]; do
    ip "$family" rule del priority "$priority"
  done
  ip "$family" rule add priority "$priority" "$@" lookup "$table"
}

# route_via_nat64_eni: the stable ENI's routing table and the rules that select it.
route_via_nat64_eni() {
  local dev=${env[NAT64_INTERFACE]} pool4=${env[NAT64_POOL4_ADDRESS]}
  local subnet=${env[NAT64_IPV4_SUBNET]:-} gateway=${env[NAT64_IPV4_GATEWAY]:-}
  local table=${env[NAT64_ROUTE_TABLE]:-} wait_seconds=${NAT64_ENI_WAIT_SECONDS:-300} router='' route
  local family
  [[ -n $subnet && -n $gateway && -n $table ]] ||
    die "NAT64_INTERFACE needs NAT64_IPV4_SUBNET, NAT64_IPV4_GATEWAY and NAT64_ROUTE_TABLE"
  is_uint_range "$wait_seconds" 1 3600 || die "invalid NAT64_ENI_WAIT_SECONDS"
  ip link set dev "$dev" up
  local deadline=$((SECONDS + wait_seconds))
  while :; do
    if has_ipv4 "$dev" "$pool4"; then
      route=$(ip -6 route show default dev "$dev" | head -n 1)
      if [[ $route =~ via\ ([0-9a-fA-F:]+) ]]; then
        router=${BASH_REMATCH[1]}
        break
      fi
    fi
    ((SECONDS < deadline)) ||
      die "the NAT64 interface $dev has no address $pool4 or no IPv6 router after ${wait_seconds}s"
    sleep 1
  done
  for family in -4 -6; do
    # (Listing a table that does not exist yet fails: nothing to flush.)
    if [[ -n $(ip "$family" route show table "$table" 2>/dev/null) ]]; then
      ip "$family" route flush table "$table"
    fi
  done
  ip -4 route add "$subnet" dev "$dev" scope link src "$pool4" table "$table"
  ip -4 route add default via "$gateway" dev "$dev" table "$table"
  ip -6 route add default via "$router" dev "$dev" table "$table"
  policy_rule -4 1100 "$table" from "$pool4"
  policy_rule -4 1101 "$table" iif "$dev"
  policy_rule -6 1100 "$table" from "${env[NAT64_PREFIX]}"
  log "NAT64 egress through $dev: table $table, IPv4 via $gateway, IPv6 via $router"
}

if [[ ${env[NAT64_ENABLED]} == true ]]; then
  [[ -n ${env[NAT64_POOL4_ADDRESS]:-} && -n ${env[NAT64_JOOL]:-} ]] ||
    die "NAT64 needs NAT64_POOL4_ADDRESS and NAT64_JOOL in podmin-nat.env"
  if [[ -n ${env[NAT64_INTERFACE]:-} ]]; then
    [[ -d /sys/class/net/${env[NAT64_INTERFACE]} ]] ||
      die "no NAT64 interface ${env[NAT64_INTERFACE]} (the stable NAT64 ENI is not attached)"
    route_via_nat64_eni
  fi
  kver=$(uname -r)
  modprobe -a nf_defrag_ipv4 nf_defrag_ipv6
  if [[ ${env[NAT64_JOOL]} == archive ]]; then
    moddir=$(r "/usr/lib/modules/$kver/extra/podmin")
    for m in jool_common jool; do
      [[ -f $moddir/$m.ko ]] || die "no Jool module $m for kernel $kver (the jool dependency must match)"
      magic=$(modinfo -F vermagic "$moddir/$m.ko") || die "unreadable module $m.ko"
      [[ ${magic%% *} == "$kver" ]] || die "$m.ko was built for ${magic%% *}, not $kver"
    done
    for m in jool_common jool; do
      [[ -d /sys/module/$m ]] || insmod "$moddir/$m.ko"
    done
    jool=$(r /usr/local/sbin/jool)
  else
    modprobe jool ||
      die "no Jool module for kernel $kver (Debian's jool-dkms builds it when linux-headers-$kver is installed)"
    jool=$(r /usr/bin/jool)
  fi
  log "Jool from ${env[NAT64_JOOL]} ($jool)"
  if "$jool" instance display 2>/dev/null | grep -qw podmin; then "$jool" instance remove podmin; fi
  "$jool" instance add podmin --netfilter --pool6 "${env[NAT64_PREFIX]}"
  for proto in --tcp --udp --icmp; do
    "$jool" -i podmin pool4 add "$proto" "${env[NAT64_POOL4_ADDRESS]}" 61001-65535
  done
  log "NAT64 ${env[NAT64_PREFIX]} -> ${env[NAT64_POOL4_ADDRESS]} (Jool instance podmin)"
fi

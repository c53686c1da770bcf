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

if [[ ${env[NAT64_ENABLED]} == true ]]; then
  [[ -n ${env[NAT64_POOL4_ADDRESS]:-} && -n ${env[NAT64_JOOL]:-} ]] ||
    die "NAT64 needs NAT64_POOL4_ADDRESS and NAT64_JOOL in podmin-nat.env"
  if [[ -n ${env[NAT64_INTERFACE]:-} && ! -d /sys/class/net/${env[NAT64_INTERFACE]} ]]; then
    die "no NAT64 interface ${env[NAT64_INTERFACE]} (the stable NAT64 ENI is not attached)"
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

#!/bin/bash
# Podmin vmconfig: first-boot detection. Run once by configure.sh when detected.env is absent.
#
#   bootstrap.sh KIND REGION
#
# Writes the immutable detected.env (instance identity and network facts) and, when absent,
# mutable.env with the defaults. On a node it also makes sure the Pod ENI has its delegated
# prefix: it waits until the Pod ENI has an ordinary IPv6 address (in the instance metadata and
# configured on the interface) and only then asks EC2 for a prefix (AssignIpv6Addresses) when
# the ENI has none yet.
#
# Overrides (tests): PODMIN_NETNS (interfaces live in this named network namespace),
# PODMIN_EC2_ENDPOINT (default https://ec2.<region>.api.aws, the dual-stack endpoint).
# shellcheck source-path=SCRIPTDIR
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=../lib/common.sh
source "$here/lib/common.sh"
# shellcheck source=../lib/validate.sh
source "$here/lib/validate.sh"
# shellcheck source=../lib/aws.sh
source "$here/lib/aws.sh"
PODMIN_LOG_TAG=podmin-bootstrap

kind=${1:-} region=${2:-}
if ! is_kind "$kind" || ! is_region "$region"; then die "usage: bootstrap.sh node|nat REGION"; fi
check_root_prefix
[[ ! -e $(r "$PODMIN_ETC/detected.env") ]] || die "detected.env exists: bootstrap runs once"
wait_seconds=${POD_ENI_WAIT_SECONDS:-300}
is_uint_range "$wait_seconds" 1 3600 || die "invalid POD_ENI_WAIT_SECONDS"

ipcmd() {
  if [[ -n ${PODMIN_NETNS:-} ]]; then ip -n "$PODMIN_NETNS" "$@"; else ip "$@"; fi
}

# iface_of_mac MAC: the name of the interface with this MAC address.
iface_of_mac() {
  local line re="^[0-9]+: ([^:@ ]+)[:@].* link/ether $1 "
  while IFS= read -r line; do
    if [[ $line =~ $re ]]; then
      printf '%s' "${BASH_REMATCH[1]}"
      return 0
    fi
  done < <(ipcmd -o link show)
  return 1
}

# has_ipv6 IFACE ADDR: ADDR is configured on IFACE, global scope, DAD finished.
has_ipv6() {
  local want have line
  want=$(ipv6_hex "$2") || return 1
  while IFS= read -r line; do
    [[ $line =~ inet6\ ([0-9a-fA-F:]+)/ ]] || continue
    have=$(ipv6_hex "${BASH_REMATCH[1]}") || continue
    [[ $have == "$want" ]] && return 0
  done < <(ipcmd -o -6 addr show dev "$1" scope global -tentative 2>/dev/null)
  return 1
}

first_line() { printf '%s' "${1%%$'\n'*}"; }

declare -A det=()
imds_token || die "no instance metadata"
det[DETECTED_IMDS_MODE]=$(imds_mode)
det[DETECTED_INSTANCE_ID]=$(imds_get meta-data/instance-id) || die "no instance id"
det[DETECTED_AVAILABILITY_ZONE]=$(imds_get meta-data/placement/availability-zone) ||
  die "no availability zone"

if [[ $kind == node ]]; then
  node_mac='' pod_mac=''
  macs=$(imds_get meta-data/network/interfaces/macs/) || die "no network interfaces in metadata"
  for m in $macs; do
    m=${m%/}
    [[ $m =~ ^[0-9a-f]{2}(:[0-9a-f]{2}){5}$ ]] || die "malformed MAC in metadata: $m"
    dev=$(imds_get "meta-data/network/interfaces/macs/$m/device-number") || die "no device number"
    case $dev in
    0) node_mac=$m ;;
    1) pod_mac=$m ;;
    esac
  done
  [[ -n $node_mac ]] || die "no node-address ENI (device 0)"
  [[ -n $pod_mac ]] || die "no Pod-prefix ENI (device 1): the launch template declares two ENIs"
  det[DETECTED_NODE_INTERFACE]=$(iface_of_mac "$node_mac") || die "no interface with MAC $node_mac"
  det[DETECTED_POD_INTERFACE]=$(iface_of_mac "$pod_mac") || die "no interface with MAC $pod_mac"
  det[DETECTED_NODE_IPV6]=$(first_line "$(imds_get "meta-data/network/interfaces/macs/$node_mac/ipv6s")") ||
    die "the node ENI has no IPv6 address"
  det[DETECTED_POD_ENI_ID]=$(imds_get "meta-data/network/interfaces/macs/$pod_mac/interface-id") ||
    die "no Pod ENI id"
  pod_if=${det[DETECTED_POD_INTERFACE]}

  # 1. The Pod ENI needs an ordinary IPv6 address, in EC2 and on the interface, before a prefix.
  log "waiting up to ${wait_seconds}s for an IPv6 address on the Pod ENI ($pod_if)"
  deadline=$((SECONDS + wait_seconds)) pod_ip=
  ipcmd link set dev "$pod_if" up || true
  while :; do
    if ips=$(imds_get "meta-data/network/interfaces/macs/$pod_mac/ipv6s" 2>/dev/null); then
      for ip6 in $ips; do
        if is_ipv6 "$ip6" && has_ipv6 "$pod_if" "$ip6"; then
          pod_ip=$ip6
          break
        fi
      done
    fi
    [[ -n $pod_ip ]] && break
    ((SECONDS < deadline)) || die "the Pod ENI ($pod_if) has no configured IPv6 address after ${wait_seconds}s"
    sleep 1
  done
  det[DETECTED_POD_IPV6]=$pod_ip
  log "Pod ENI $pod_if has $pod_ip"

  # 2. Only now: the delegated prefix (assigned here when the ENI has none yet).
  prefix=$(imds_get "meta-data/network/interfaces/macs/$pod_mac/ipv6-prefix" 2>/dev/null) || prefix=
  prefix=$(first_line "$prefix")
  if [[ -z $prefix ]]; then
    eni=${det[DETECTED_POD_ENI_ID]}
    is_eni_id "$eni" || die "malformed Pod ENI id: $eni"
    endpoint=${PODMIN_EC2_ENDPOINT:-https://ec2.${region}.api.aws}
    log "assigning a delegated IPv6 prefix to $eni"
    aws_curl ec2 "$region" --max-time 60 -o /dev/null \
      --data "Action=AssignIpv6Addresses&Version=2016-11-15&NetworkInterfaceId=${eni}&Ipv6PrefixCount=1" \
      "$endpoint/" || die "AssignIpv6Addresses failed for $eni"
    deadline=$((SECONDS + wait_seconds))
    while :; do
      prefix=$(imds_get "meta-data/network/interfaces/macs/$pod_mac/ipv6-prefix" 2>/dev/null) || prefix=
      prefix=$(first_line "$prefix")
      [[ -n $prefix ]] && break
      ((SECONDS < deadline)) || die "the delegated prefix did not appear in the metadata"
      sleep 1
    done
  fi
  det[DETECTED_POD_PREFIX]=$prefix
  log "delegated Pod prefix $prefix"
else
  line=$(ipcmd -o -4 route show default | head -n 1) || line=
  [[ $line =~ \ dev\ ([^ ]+) ]] || die "no IPv4 default route: cannot detect the NAT interface"
  det[DETECTED_DEFAULT_INTERFACE]=${BASH_REMATCH[1]}
fi

# Validate what was detected exactly as configure.sh will read it, then write it once.
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
env_render det >"$tmp"
ensure_dir "$PODMIN_ETC" root "$PODMIN_GROUP" 0750
put_file "$PODMIN_ETC/detected.env.new" root "$PODMIN_GROUP" 0640 <"$tmp" || true
# shellcheck disable=SC2034 # filled through a nameref
declare -A check=()
env_read "$PODMIN_ETC/detected.env.new" schema_detected "$kind" check ||
  die "detected values are invalid (see above)"
mv -f "$(r "$PODMIN_ETC/detected.env.new")" "$(r "$PODMIN_ETC/detected.env")"
log "wrote $PODMIN_ETC/detected.env"

if [[ ! -e $(r "$PODMIN_ETC/mutable.env") ]]; then
  # shellcheck disable=SC2034 # filled through a nameref
  declare -A mut=()
  env_defaults schema_mutable "$kind" mut
  {
    echo "# Podmin mutable settings: change with update-mutable-env.sh, then configure.sh applies them."
    env_render mut
  } | put_file "$PODMIN_ETC/mutable.env" root "$PODMIN_GROUP" 0640 || true
  log "wrote $PODMIN_ETC/mutable.env"
fi

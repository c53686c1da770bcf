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
# On a NAT VM whose NAT64_POOL4_ADDRESS is "detect" (environment, from user-data.env) it attaches
# the stable NAT64 ENI named by its instance tag podmin:nat64-eni (instance metadata tags) as
# device 1 (AttachNetworkInterface, retried while a previous instance still holds the ENI),
# waits until the interface is there with the ENI's private IPv4 address and records that
# address as the Jool pool4 address (DETECTED_NAT64_POOL4_ADDRESS) and the ENI's subnet
# (DETECTED_NAT64_SUBNET_IPV4_CIDR: nat.sh routes through its first address, the VPC router).
# When NAT64_SOURCE_IPV6_CIDRS is "detect", it records the VPC's IPv6 CIDR blocks (the boot
# ENI's metadata) as the NAT64 source allowlist (DETECTED_NAT64_SOURCE_IPV6_CIDRS).
#
# Environment: POD_ENI_WAIT_SECONDS (node, default 300), NAT64_ENI_WAIT_SECONDS (nat, default
# 900: a replaced instance may hold the ENI for a while), NAT64_POOL4_ADDRESS and
# NAT64_SOURCE_IPV6_CIDRS (nat, empty unless NAT64 is on).
# Overrides (tests): PODMIN_NETNS (interfaces live in this named network namespace),
# PODMIN_EC2_ENDPOINT (default https://ec2.<region>.api.aws, the dual-stack endpoint),
# PODMIN_EC2_RETRY_SECONDS (pause between attach attempts, default 5).
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
if [[ $kind == node ]]; then
  wait_seconds=${POD_ENI_WAIT_SECONDS:-300}
  is_uint_range "$wait_seconds" 1 3600 || die "invalid POD_ENI_WAIT_SECONDS"
else
  wait_seconds=${NAT64_ENI_WAIT_SECONDS:-900}
  is_uint_range "$wait_seconds" 1 3600 || die "invalid NAT64_ENI_WAIT_SECONDS"
fi
retry_seconds=${PODMIN_EC2_RETRY_SECONDS:-5}
is_uint_range "$retry_seconds" 1 60 || die "invalid PODMIN_EC2_RETRY_SECONDS"

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

# has_ipv4 IFACE ADDR: ADDR is configured on IFACE.
has_ipv4() {
  local line
  while IFS= read -r line; do
    [[ $line =~ inet\ ([0-9.]+)/ && ${BASH_REMATCH[1]} == "$2" ]] && return 0
  done < <(ipcmd -o -4 addr show dev "$1" 2>/dev/null)
  return 1
}

first_line() { printf '%s' "${1%%$'\n'*}"; }

# mac_of_eni ENI: the metadata MAC of the attached ENI with this id, and its device number
# ("MAC DEVICE"); fails while the ENI is not attached to this instance.
mac_of_eni() {
  local macs m id dev
  macs=$(imds_get meta-data/network/interfaces/macs/ 2>/dev/null) || return 1
  for m in $macs; do
    m=${m%/}
    [[ $m =~ ^[0-9a-f]{2}(:[0-9a-f]{2}){5}$ ]] || die "malformed MAC in metadata: $m"
    id=$(imds_get "meta-data/network/interfaces/macs/$m/interface-id" 2>/dev/null) || continue
    [[ $id == "$1" ]] || continue
    dev=$(imds_get "meta-data/network/interfaces/macs/$m/device-number" 2>/dev/null) || return 1
    printf '%s %s' "$m" "$dev"
    return 0
  done
  return 1
}

# attach_nat64_eni: attaches the stable NAT64 ENI (instance tag podmin:nat64-eni) as device 1
# and records it, its interface and its private IPv4 address (the Jool pool4 address).
attach_nat64_eni() {
  local deadline=$((SECONDS + wait_seconds)) eni='' found='' mac dev iface ipv4='' out code subnet
  local instance=${det[DETECTED_INSTANCE_ID]}
  while ! eni=$(imds_get meta-data/tags/instance/podmin:nat64-eni 2>/dev/null); do
    ((SECONDS < deadline)) ||
      die "no instance tag podmin:nat64-eni in the instance metadata (are instance metadata tags on?)"
    sleep 1
  done
  is_eni_id "$eni" || die "malformed ENI id in the instance tag podmin:nat64-eni: $eni"
  if found=$(mac_of_eni "$eni"); then
    log "the NAT64 ENI $eni is already attached"
  else
    aws_role_credentials || die "no instance role credentials"
    log "attaching the NAT64 ENI $eni to $instance as device 1"
    while ! out=$(ec2_call "$region" "Action=AttachNetworkInterface&NetworkInterfaceId=${eni}&InstanceId=${instance}&DeviceIndex=1"); do
      code=$(ec2_error_code "$out") || code=
      case $code in
      InvalidNetworkInterface.InUse | RequestLimitExceeded)
        ((SECONDS < deadline)) || die "the NAT64 ENI $eni is still in use after ${wait_seconds}s"
        log "AttachNetworkInterface: $code (a previous instance may still hold $eni); retrying"
        sleep "$retry_seconds"
        ;;
      *) die "AttachNetworkInterface failed for $eni: ${code:-no EC2 answer}" ;;
      esac
    done
  fi
  # The attachment shows in the metadata, then the kernel's interface, then its address (DHCP).
  while :; do
    if [[ -z $found ]]; then found=$(mac_of_eni "$eni") || found=; fi
    if [[ -n $found ]]; then
      read -r mac dev <<<"$found"
      [[ $dev == 1 ]] || die "the NAT64 ENI $eni is attached as device $dev, not 1"
      if iface=$(iface_of_mac "$mac"); then
        ipcmd link set dev "$iface" up 2>/dev/null || true
        if [[ -z $ipv4 ]]; then
          ipv4=$(imds_get "meta-data/network/interfaces/macs/$mac/local-ipv4s" 2>/dev/null) || ipv4=
          ipv4=$(first_line "$ipv4")
          [[ -z $ipv4 ]] || is_ipv4 "$ipv4" || die "malformed private IPv4 of $eni: $ipv4"
        fi
        [[ -n $ipv4 ]] && has_ipv4 "$iface" "$ipv4" && break
      fi
    fi
    ((SECONDS < deadline)) ||
      die "the NAT64 ENI $eni (${iface:-no interface yet}) has no IPv4 address ${ipv4:-} after ${wait_seconds}s"
    sleep 1
  done
  subnet=$(imds_get "meta-data/network/interfaces/macs/$mac/subnet-ipv4-cidr-block") ||
    die "no IPv4 subnet of $eni in the metadata"
  check_type ipv4_subnet "$subnet" || die "malformed IPv4 subnet of $eni: $subnet"
  ipv4_in_cidr "$ipv4" "$subnet" || die "the address $ipv4 of $eni is not in its subnet $subnet"
  det[DETECTED_NAT64_ENI_ID]=$eni
  det[DETECTED_NAT64_INTERFACE]=$iface
  det[DETECTED_NAT64_POOL4_ADDRESS]=$ipv4
  det[DETECTED_NAT64_SUBNET_IPV4_CIDR]=$subnet
  log "NAT64 ENI $eni is $iface with $ipv4 (the Jool pool4 address) in $subnet"
}

# detect_vpc_ipv6_cidrs: records the IPv6 CIDR blocks of the VPC (metadata of the boot ENI,
# device 0) as the NAT64 source allowlist; each must be a VPC-sized block (/32 to /64).
detect_vpc_ipv6_cidrs() {
  local macs m='' boot='' blocks b out=''
  macs=$(imds_get meta-data/network/interfaces/macs/) || die "no network interfaces in metadata"
  while IFS= read -r m; do
    m=${m%/}
    [[ -n $m ]] || continue
    [[ $m =~ ^[0-9a-f]{2}(:[0-9a-f]{2}){5}$ ]] || die "malformed MAC in metadata: $m"
    if [[ $(imds_get "meta-data/network/interfaces/macs/$m/device-number") == 0 ]]; then
      boot=$m
      break
    fi
  done <<<"$macs"
  [[ -n $boot ]] || die "no boot ENI (device 0) in the metadata"
  blocks=$(imds_get "meta-data/network/interfaces/macs/$boot/vpc-ipv6-cidr-blocks" 2>/dev/null) ||
    blocks=
  while IFS= read -r b; do
    [[ -n $b ]] || continue
    check_type vpc_ipv6_cidr "$b" || die "malformed VPC IPv6 CIDR block in the metadata: $b"
    [[ ,$out, == *,"$b",* ]] || out+=${out:+,}$b
  done <<<"$blocks"
  [[ -n $out ]] || die "NAT64_SOURCE_IPV6_CIDRS=detect, but the VPC has no IPv6 CIDR block"
  det[DETECTED_NAT64_SOURCE_IPV6_CIDRS]=$out
  log "NAT64 source allowlist: the VPC's IPv6 CIDR blocks $out"
}

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
    aws_role_credentials || die "no instance role credentials"
    log "assigning a delegated IPv6 prefix to $eni"
    out=$(ec2_call "$region" "Action=AssignIpv6Addresses&NetworkInterfaceId=${eni}&Ipv6PrefixCount=1") ||
      die "AssignIpv6Addresses failed for $eni: $(ec2_error_code "$out" || echo no EC2 answer)"
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
  if [[ ${NAT64_SOURCE_IPV6_CIDRS:-} == detect ]]; then detect_vpc_ipv6_cidrs; fi
  if [[ ${NAT64_POOL4_ADDRESS:-} == detect ]]; then attach_nat64_eni; fi
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

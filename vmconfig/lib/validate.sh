# shellcheck shell=bash
# Podmin vmconfig: validators and the strict env-file reader (sourced; needs common.sh).
#
# Env files are never sourced or evaluated. Each line is empty, a '#' comment, or KEY=VALUE with
# KEY matching ^[A-Z][A-Z0-9_]*$; VALUE is literal (no quotes, escapes or expansion). Files are
# regular files (no symlinks) at absolute normalized paths, at most 64 KiB, without NUL or other
# control characters (so no CR either). Unknown and duplicate keys are errors, and every value
# must match its key's type. The first problem makes the whole file invalid.

readonly ENV_MAX_BYTES=65536

# --- scalar validators (return 0 when valid) ----------------------------------------------------

has_control_chars() { [[ $1 =~ [[:cntrl:]] ]]; }
is_bool() { [[ $1 == true || $1 == false ]]; }
is_uint() { [[ $1 =~ ^(0|[1-9][0-9]{0,17})$ ]]; }
# is_uint_range V LO HI
is_uint_range() { is_uint "$1" && (($1 >= $2 && $1 <= $3)); }
is_dns_label() { [[ $1 =~ ^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$ ]]; }
is_dns_subdomain() {
  local l
  ((${#1} >= 1 && ${#1} <= 253)) || return 1
  [[ $1 != .* && $1 != *. && $1 != *..* ]] || return 1
  local -a labels
  IFS=. read -r -a labels <<<"$1"
  for l in "${labels[@]}"; do is_dns_label "$l" || return 1; done
}
is_bucket() { [[ $1 =~ ^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$ && $1 != *..* ]]; }
is_region() { [[ $1 =~ ^[a-z]{2}(-[a-z]+)+-[0-9]{1,2}$ ]]; }
is_arch() { [[ $1 == amd64 || $1 == arm64 ]]; }
is_kind() { [[ $1 == node || $1 == nat ]]; }
is_duration() { [[ $1 =~ ^[1-9][0-9]{0,6}(ms|s|m|h)?$ ]]; }
is_containerd_log_level() { [[ $1 =~ ^(trace|debug|info|warn|error|fatal|panic)$ ]]; }
# Linux interface names: 1-15 characters, no '/', ':', whitespace; not "." or "..".
is_iface() { [[ $1 =~ ^[A-Za-z0-9_][A-Za-z0-9_.-]{0,14}$ && $1 != . && $1 != .. ]]; }
# An exact S3 object s3://BUCKET/KEY: key segments of [A-Za-z0-9._~+=,@-], none empty, "." or
# "..", at most 1024 characters (it becomes one systemd argument: no spaces, '%' or '$').
is_s3_object() {
  local bucket=${1#s3://} key seg
  [[ $1 == s3://* && $bucket == */* ]] || return 1
  key=${bucket#*/} bucket=${bucket%%/*}
  is_bucket "$bucket" && ((${#key} >= 1 && ${#key} <= 1024)) || return 1
  [[ $key =~ ^[A-Za-z0-9._~+=,@/-]+$ && $key != */ ]] || return 1
  local -a segs
  IFS=/ read -r -a segs <<<"$key"
  for seg in "${segs[@]}"; do [[ -n $seg && $seg != . && $seg != .. ]] || return 1; done
  [[ $key != /* && $key != *//* ]]
}
# is_otlp_url URL: http(s)://HOST[:PORT][/PATH], HOST a DNS name, an IPv4 address or a bracketed
# IPv6 address; nothing that could break out of a Fluent Bit configuration line.
is_otlp_url() {
  [[ $1 =~ ^https?://([A-Za-z0-9.-]{1,253}|\[[0-9A-Fa-f:.]{2,45}\])(:[0-9]{1,5})?(/[A-Za-z0-9._~/-]{0,512})?$ ]] || return 1
  local port=${BASH_REMATCH[2]#:}
  [[ -z $port ]] || ((10#$port >= 1 && 10#$port <= 65535))
}
is_instance_id() { [[ $1 =~ ^i-[0-9a-f]{8,17}$ ]]; }
is_eni_id() { [[ $1 =~ ^eni-[0-9a-f]{8,17}$ ]]; }
is_zone() { [[ $1 =~ ^[a-z]{2}(-[a-z]+)+-[0-9]{1,2}[a-z]$ ]]; }
is_imds_mode() { [[ $1 == IPv4 || $1 == IPv6 ]]; }
# An OCI image reference HOST/PATH:TAG or HOST/PATH@sha256:HEX (lower-case repository).
is_image_ref() {
  [[ $1 =~ ^[a-z0-9]([a-z0-9.-]*[a-z0-9])?(:[0-9]{1,5})?(/[a-z0-9]+((\.|_|__|-+)[a-z0-9]+)*)+(:[A-Za-z0-9_][A-Za-z0-9._-]{0,127}|@sha256:[0-9a-f]{64})$ ]]
}
# A loopback address: 127.0.0.0/8 or ::1 (the node-local registry never leaves the node).
is_loopback_ip() { [[ $1 == ::1 ]] || { is_ipv4 "$1" && [[ $1 == 127.* ]]; }; }

is_ipv4() {
  local o='(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])'
  [[ $1 =~ ^$o\.$o\.$o\.$o$ ]]
}

# ipv4_int A.B.C.D: the address as an integer.
ipv4_int() {
  local a b c d
  IFS=. read -r a b c d <<<"$1"
  printf '%d' $(((a << 24) | (b << 16) | (c << 8) | d))
}

# ipv4_of_int N: the dotted form of an integer address.
ipv4_of_int() {
  printf '%d.%d.%d.%d' $((($1 >> 24) & 255)) $((($1 >> 16) & 255)) $((($1 >> 8) & 255)) $(($1 & 255))
}

# is_ipv4_cidr A.B.C.D/N [MINLEN [MAXLEN]]: valid, no host bits set, MINLEN <= N <= MAXLEN.
is_ipv4_cidr() {
  local addr=${1%/*} len=${1##*/}
  [[ $1 == */* ]] && is_ipv4 "$addr" && [[ $len =~ ^([0-9]|[12][0-9]|3[0-2])$ ]] || return 1
  ((len >= ${2:-0} && len <= ${3:-32})) || return 1
  local host=$(((1 << (32 - len)) - 1))
  (($(ipv4_int "$addr") & host)) && return 1
  return 0
}

# ipv4_in_cidr A.B.C.D NET/N: the address lies inside the CIDR.
ipv4_in_cidr() {
  local mask=$(((0xffffffff << (32 - ${2##*/})) & 0xffffffff))
  ((($(ipv4_int "$1") & mask) == $(ipv4_int "${2%/*}")))
}

# ipv4_subnet_gateway NET/N: the VPC router of an EC2 subnet, its first host address.
ipv4_subnet_gateway() { ipv4_of_int $(($(ipv4_int "${1%/*}") + 1)); }

# ipv6_hex ADDR: prints the 32 lower-case hex digits of an IPv6 address, or fails.
ipv6_hex() {
  local a=$1 v4 head tail g i n out=
  [[ $a =~ ^[0-9A-Fa-f:.]{2,45}$ && $a != *:::* ]] || return 1
  a=${a,,}
  if [[ $a == *.* ]]; then
    v4=${a##*:}
    is_ipv4 "$v4" || return 1
    local o1 o2 o3 o4
    IFS=. read -r o1 o2 o3 o4 <<<"$v4"
    a=${a%"$v4"}$(printf '%x:%x' $((o1 * 256 + o2)) $((o3 * 256 + o4)))
  fi
  [[ $a == :* && $a != ::* ]] && return 1
  [[ $a == *: && $a != *:: ]] && return 1
  local -a groups=() hg=() tg=()
  if [[ $a == *::* ]]; then
    head=${a%%::*} tail=${a#*::}
    [[ $tail == *::* ]] && return 1
    [[ -n $head ]] && IFS=: read -r -a hg <<<"$head"
    [[ -n $tail ]] && IFS=: read -r -a tg <<<"$tail"
    n=$((8 - ${#hg[@]} - ${#tg[@]}))
    ((n >= 1)) || return 1
    groups=("${hg[@]}")
    for ((i = 0; i < n; i++)); do groups+=(0); done
    groups+=("${tg[@]}")
  else
    IFS=: read -r -a groups <<<"$a"
  fi
  ((${#groups[@]} == 8)) || return 1
  for g in "${groups[@]}"; do
    [[ $g =~ ^[0-9a-f]{1,4}$ ]] || return 1
    out+=$(printf '%04x' $((16#$g)))
  done
  printf '%s' "$out"
}

is_ipv6() { ipv6_hex "$1" >/dev/null; }

# hex_prefix_equal HEX1 HEX2 BITS: the first BITS bits of two 32-digit hex strings are equal.
hex_prefix_equal() {
  local a=$1 b=$2 full=$(($3 / 4)) rem=$(($3 % 4))
  [[ ${a:0:full} == "${b:0:full}" ]] || return 1
  ((rem == 0)) && return 0
  local mask=$(((0xf << (4 - rem)) & 0xf))
  (((16#${a:full:1} & mask) == (16#${b:full:1} & mask)))
}

# is_ipv6_cidr ADDR/N [MINLEN [MAXLEN]]: valid, no host bits set, MINLEN <= N <= MAXLEN.
is_ipv6_cidr() {
  local addr=${1%/*} len=${1##*/} min=${2:-0} max=${3:-128} hex
  [[ $1 == */* && $len =~ ^(0|[1-9][0-9]{0,2})$ ]] && ((len >= min && len <= max && len <= 128)) ||
    return 1
  hex=$(ipv6_hex "$addr") || return 1
  # host bits: everything after LEN must be zero.
  local full=$((len / 4)) rem=$((len % 4))
  if ((rem)); then
    (((16#${hex:full:1} & ((1 << (4 - rem)) - 1)) == 0)) || return 1
    full=$((full + 1))
  fi
  [[ ${hex:full} =~ ^0*$ ]]
}

# ipv6_cidr_within INNER OUTER: INNER (a CIDR) lies inside OUTER (a CIDR).
ipv6_cidr_within() {
  local ilen=${1##*/} olen=${2##*/} ih oh
  ((ilen >= olen)) || return 1
  ih=$(ipv6_hex "${1%/*}") && oh=$(ipv6_hex "${2%/*}") || return 1
  hex_prefix_equal "$ih" "$oh" "$olen"
}

# is_list TYPE VALUE: a comma-separated list of TYPE values, no empty entries, no spaces.
is_list() {
  local type=$1 v=$2 item
  [[ -n $v && $v != ,* && $v != *, && $v != *,,* && $v != *' '* ]] || return 1
  local -a items
  IFS=, read -r -a items <<<"$v"
  for item in "${items[@]}"; do check_type "$type" "$item" || return 1; done
}

# check_type TYPE VALUE: dispatches to the validator of TYPE ("uint:LO:HI", "list:TYPE", ...).
check_type() {
  local type=$1 v=$2
  has_control_chars "$v" && return 1
  case $type in
  bool) is_bool "$v" ;;
  kind) is_kind "$v" ;;
  arch) is_arch "$v" ;;
  dns_label) is_dns_label "$v" ;;
  dns_subdomain) is_dns_subdomain "$v" ;;
  bucket) is_bucket "$v" ;;
  region) is_region "$v" ;;
  duration) is_duration "$v" ;;
  containerd_log_level) is_containerd_log_level "$v" ;;
  iface) is_iface "$v" ;;
  instance_id) is_instance_id "$v" ;;
  eni_id) is_eni_id "$v" ;;
  zone) is_zone "$v" ;;
  imds_mode) is_imds_mode "$v" ;;
  image) is_image_ref "$v" ;;
  loopback_ip) is_loopback_ip "$v" ;;
  s3_object) is_s3_object "$v" ;;
  otlp_url) is_otlp_url "$v" ;;
  ipv4) is_ipv4 "$v" ;;
  ipv4_or_detect) [[ $v == detect ]] || is_ipv4 "$v" ;;
  jool_source) [[ $v == archive || $v == debian ]] ;;
  ipv4_cidr) is_ipv4_cidr "$v" ;;
  # An EC2 subnet: /16 to /28.
  ipv4_subnet) is_ipv4_cidr "$v" 16 28 ;;
  ipv6) is_ipv6 "$v" ;;
  ip) is_ipv6 "$v" || is_ipv4 "$v" ;;
  ipv6_cidr) is_ipv6_cidr "$v" ;;
  ipv6_cidr96) is_ipv6_cidr "$v" 96 96 ;;
  ipv6_prefix) is_ipv6_cidr "$v" 48 124 ;;
  # A VPC's IPv6 block (EC2: /44 to /60; Amazon-provided /56), never broader than a /32.
  vpc_ipv6_cidr) is_ipv6_cidr "$v" 32 64 ;;
  # NAT64 sources: an explicit list, or exactly "detect" (the VPC's IPv6 blocks, read at boot).
  ipv6_cidrs_or_detect) [[ $v == detect ]] || is_list ipv6_cidr "$v" ;;
  path) is_abs_path "$v" ;;
  uint:*:*)
    local lo hi
    IFS=: read -r _ lo hi <<<"$type"
    is_uint_range "$v" "$lo" "$hi"
    ;;
  list:*) is_list "${type#list:}" "$v" ;;
  *)
    log "internal error: unknown type $type"
    return 1
    ;;
  esac
}

# --- schemas -------------------------------------------------------------------------------------
# Each schema prints one line per key: KEY TYPE PRESENCE DEFAULT, where PRESENCE is "required" or
# "optional" and DEFAULT is "-" for none. Keys not listed are unknown, hence rejected.

schema_user_data() {
  local kind=$1
  cat <<'S'
PODMIN_KIND kind required -
PODMIN_CLUSTER dns_label required -
PODMIN_BUCKET bucket required -
PODMIN_REGION region required -
PODMIN_ARCH arch required -
S
  case $kind in
  node)
    cat <<'S'
PODMIN_NODEGROUP dns_label required -
REGISTRY_HOSTNAME dns_subdomain required -
SANDBOX_IMAGE image required -
POD_ENI_WAIT_SECONDS uint:1:3600 optional 300
WORKLOAD_CA_PUBLISH s3_object optional -
TELEMETRY_OTLP_ENDPOINT otlp_url optional -
TELEMETRY_OTLP_CA s3_object optional -
S
    ;;
  nat)
    cat <<'S'
PODMIN_NODEGROUP dns_label optional -
NAT_IPV4_SOURCE_CIDRS list:ipv4_cidr required -
NAT_CONNTRACK_MAX uint:1024:67108864 optional 262144
NAT64_ENABLED bool optional false
NAT64_SOURCE_IPV6_CIDRS ipv6_cidrs_or_detect optional -
NAT64_POOL4_ADDRESS ipv4_or_detect optional -
NAT64_PREFIX ipv6_cidr96 optional 64:ff9b::/96
NAT64_BLOCKED_IPV6_CIDRS list:ipv6_cidr optional -
S
    ;;
  esac
}

schema_detected() {
  cat <<'S'
DETECTED_INSTANCE_ID instance_id required -
DETECTED_AVAILABILITY_ZONE zone required -
DETECTED_IMDS_MODE imds_mode required -
S
  case $1 in
  node)
    cat <<'S'
DETECTED_NODE_INTERFACE iface required -
DETECTED_NODE_IPV6 ipv6 required -
DETECTED_POD_INTERFACE iface required -
DETECTED_POD_ENI_ID eni_id required -
DETECTED_POD_IPV6 ipv6 required -
DETECTED_POD_PREFIX ipv6_prefix required -
S
    ;;
  nat)
    cat <<'S'
DETECTED_DEFAULT_INTERFACE iface required -
DETECTED_NAT64_ENI_ID eni_id optional -
DETECTED_NAT64_INTERFACE iface optional -
DETECTED_NAT64_POOL4_ADDRESS ipv4 optional -
DETECTED_NAT64_SUBNET_IPV4_CIDR ipv4_subnet optional -
DETECTED_NAT64_SOURCE_IPV6_CIDRS list:vpc_ipv6_cidr optional -
S
    ;;
  esac
}

schema_mutable() {
  cat <<'S'
SSM_AGENT_ENABLED bool optional true
S
  case $1 in
  node)
    cat <<'S'
KUBE_LOG_LEVEL uint:0:10 optional 2
CONTAINERD_LOG_LEVEL containerd_log_level optional info
AGENT_INTERVAL duration optional 2s
AGENT_SECRETS_INTERVAL duration optional 60s
LOCAL_REGISTRY_HOST loopback_ip optional 127.0.0.1
LOCAL_REGISTRY_PORT uint:1:65535 optional 5000
DNS_UPSTREAMS list:ip optional fd00:ec2::253
S
    ;;
  nat)
    cat <<'S'
NAT_METRICS_INTERFACE iface optional -
S
    ;;
  esac
}

# --- the env-file reader -------------------------------------------------------------------------

# env_check_file PATH: PATH (a real path under PODMIN_ROOT) is absolute, normalized, a regular
# file, not a symlink anywhere below the root, at most 64 KiB and free of NUL bytes.
env_check_file() {
  local p=$1 f size
  is_abs_path "$p" || {
    log "$p: not an absolute normalized path"
    return 1
  }
  no_symlink_below_root "$p" || return 1
  f=$(r "$p")
  [[ -f $f ]] || {
    log "$p: not a regular file"
    return 1
  }
  size=$(stat -c %s "$f")
  ((size <= ENV_MAX_BYTES)) || {
    log "$p: larger than $ENV_MAX_BYTES bytes"
    return 1
  }
  if [[ $(tr -d '\000' <"$f" | wc -c) -ne $size ]]; then
    log "$p: contains a NUL byte"
    return 1
  fi
}

# env_read PATH SCHEMA_FN KIND ARRAY [partial]: reads and validates PATH into the associative array
# ARRAY (declared by the caller). Unknown or duplicate keys, bad values or (unless "partial")
# missing required keys are errors. Defaults are not applied here.
env_read() {
  local p=$1 schema=$2 kind=$3 partial=${5:-}
  local -n _out=$4
  local line key value n=0 ok=0
  local -A types=() presence=()
  local k t pr d
  while read -r k t pr d; do
    types[$k]=$t
    presence[$k]=$pr
  done < <("$schema" "$kind")
  env_check_file "$p" || return 1
  while IFS= read -r line || [[ -n $line ]]; do
    n=$((n + 1))
    if has_control_chars "$line"; then
      log "$p:$n: control character"
      ok=1
      continue
    fi
    [[ -z $line || $line == '#'* ]] && continue
    if [[ ! $line =~ ^([A-Z][A-Z0-9_]{0,63})=(.*)$ ]]; then
      log "$p:$n: expected KEY=VALUE"
      ok=1
      continue
    fi
    key=${BASH_REMATCH[1]} value=${BASH_REMATCH[2]}
    if [[ -z ${types[$key]:-} ]]; then
      log "$p:$n: unknown key $key"
      ok=1
      continue
    fi
    if [[ -v "_out[$key]" ]]; then
      log "$p:$n: duplicate key $key"
      ok=1
      continue
    fi
    if ! check_type "${types[$key]}" "$value"; then
      log "$p:$n: invalid value for $key (expected ${types[$key]})"
      ok=1
      continue
    fi
    _out["$key"]=$value
  done <"$(r "$p")"
  if [[ $partial != partial ]]; then
    for key in "${!presence[@]}"; do
      if [[ ${presence[$key]} == required && ! -v "_out[$key]" ]]; then
        log "$p: missing required key $key"
        ok=1
      fi
    done
  fi
  return $ok
}

# env_defaults SCHEMA_FN KIND ARRAY: fills absent optional keys that have a default.
env_defaults() {
  local -n _arr=$3
  local k t pr d
  while read -r k t pr d; do
    if [[ $d != - && ! -v "_arr[$k]" ]]; then _arr["$k"]=$d; fi
  done < <("$1" "$2")
}

# env_render ARRAY: prints the array as sorted KEY=VALUE lines (deterministic output).
env_render() {
  local -n _a=$1
  local k
  while IFS= read -r k; do
    [[ -n $k ]] && printf '%s=%s\n' "$k" "${_a[$k]}"
  done < <(printf '%s\n' "${!_a[@]}" | sort)
}

# --- cross-key rules -----------------------------------------------------------------------------

# nat_rules ARRAY: the NAT kind's rules across keys (after defaults).
nat_rules() {
  local -n _n=$1
  local _ok=0 _cidr
  if [[ ${_n[NAT64_ENABLED]} == true ]]; then
    [[ -n ${_n[NAT64_SOURCE_IPV6_CIDRS]:-} ]] || {
      log "NAT64_ENABLED=true requires NAT64_SOURCE_IPV6_CIDRS"
      _ok=1
    }
    [[ -n ${_n[NAT64_POOL4_ADDRESS]:-} ]] || {
      log "NAT64_ENABLED=true requires NAT64_POOL4_ADDRESS"
      _ok=1
    }
    # "detect": bootstrap attached the stable NAT64 ENI and recorded its private IPv4 and subnet.
    if [[ ${_n[NAT64_POOL4_ADDRESS]:-} == detect ]]; then
      if [[ -z ${_n[DETECTED_NAT64_POOL4_ADDRESS]:-} || -z ${_n[DETECTED_NAT64_INTERFACE]:-} ||
        -z ${_n[DETECTED_NAT64_ENI_ID]:-} || -z ${_n[DETECTED_NAT64_SUBNET_IPV4_CIDR]:-} ]]; then
        log "NAT64_POOL4_ADDRESS=detect requires DETECTED_NAT64_ENI_ID, DETECTED_NAT64_INTERFACE, DETECTED_NAT64_POOL4_ADDRESS and DETECTED_NAT64_SUBNET_IPV4_CIDR"
        _ok=1
      elif ! ipv4_in_cidr "${_n[DETECTED_NAT64_POOL4_ADDRESS]}" "${_n[DETECTED_NAT64_SUBNET_IPV4_CIDR]}" ||
        [[ ${_n[DETECTED_NAT64_POOL4_ADDRESS]} == "$(ipv4_subnet_gateway "${_n[DETECTED_NAT64_SUBNET_IPV4_CIDR]}")" ]]; then
        log "DETECTED_NAT64_POOL4_ADDRESS must be a host address of DETECTED_NAT64_SUBNET_IPV4_CIDR"
        _ok=1
      fi
    fi
    # "detect": bootstrap recorded the VPC's IPv6 CIDR blocks.
    if [[ ${_n[NAT64_SOURCE_IPV6_CIDRS]:-} == detect && -z ${_n[DETECTED_NAT64_SOURCE_IPV6_CIDRS]:-} ]]; then
      log "NAT64_SOURCE_IPV6_CIDRS=detect requires DETECTED_NAT64_SOURCE_IPV6_CIDRS"
      _ok=1
    fi
    if [[ ${_n[NAT64_PREFIX]} != 64:ff9b::/96 && -z ${_n[NAT64_BLOCKED_IPV6_CIDRS]:-} ]]; then
      log "a custom NAT64_PREFIX requires matching NAT64_BLOCKED_IPV6_CIDRS"
      _ok=1
    fi
  fi
  if [[ -n ${_n[NAT64_BLOCKED_IPV6_CIDRS]:-} ]]; then
    local -a _blocked
    IFS=, read -r -a _blocked <<<"${_n[NAT64_BLOCKED_IPV6_CIDRS]}"
    for _cidr in "${_blocked[@]}"; do
      ipv6_cidr_within "$_cidr" "${_n[NAT64_PREFIX]}" || {
        log "NAT64_BLOCKED_IPV6_CIDRS entry $_cidr is not inside NAT64_PREFIX ${_n[NAT64_PREFIX]}"
        _ok=1
      }
    done
  fi
  return $_ok
}

# node_rules ARRAY: the node kind's rules across keys.
node_rules() {
  local -n _d=$1
  local ok=0
  if [[ ${_d[SANDBOX_IMAGE]} != "${_d[REGISTRY_HOSTNAME]}/mirror/"* ]]; then
    log "SANDBOX_IMAGE must be served from ${_d[REGISTRY_HOSTNAME]}/mirror/"
    ok=1
  fi
  if [[ -n ${_d[DETECTED_POD_IPV6]:-} && -n ${_d[DETECTED_POD_PREFIX]:-} ]] &&
    ipv6_cidr_within "${_d[DETECTED_POD_IPV6]}/128" "${_d[DETECTED_POD_PREFIX]}"; then
    log "the Pod ENI's own address must not lie inside the delegated prefix"
    ok=1
  fi
  return $ok
}

# Schemas of the per-service env files read by Podmin's own boot scripts.
schema_env_pod_network() {
  cat <<'S'
NODE_INTERFACE iface required -
POD_INTERFACE iface required -
POD_PREFIX ipv6_prefix required -
POD_ROUTE_TABLE uint:1:252 required -
POD_ENI_WAIT_SECONDS uint:1:3600 required -
S
}

schema_env_nat() {
  cat <<'S'
NAT_WAN_INTERFACE iface required -
NAT_METRICS_INTERFACE iface required -
NAT_CONNTRACK_MAX uint:1024:67108864 required -
NAT64_ENABLED bool required -
NAT64_PREFIX ipv6_cidr96 required -
NAT64_POOL4_ADDRESS ipv4 optional -
NAT64_INTERFACE iface optional -
NAT64_IPV4_SUBNET ipv4_subnet optional -
NAT64_IPV4_GATEWAY ipv4 optional -
NAT64_ROUTE_TABLE uint:1:252 optional -
NAT64_JOOL jool_source optional -
NAT_RULESET path required -
NAT_SYSCTL path required -
S
}

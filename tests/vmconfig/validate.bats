#!/usr/bin/env bats
# Validators and the strict env-file reader of vmconfig/lib/validate.sh.

load helpers

setup() {
  load_libs
  new_root
}

@test "booleans are exactly true or false" {
  is_bool true
  is_bool false
  for v in True FALSE yes no 1 0 '' 'true ' ' false' 'true\n'; do
    run is_bool "$v"
    [ "$status" -ne 0 ] || { echo "accepted: [$v]"; false; }
  done
}

@test "control characters are detected" {
  for v in $'a\tb' $'a\rb' $'a\nb' $'\e[0m' $'x\x7f' $'\x01'; do
    has_control_chars "$v" || { echo "missed: [$v]"; false; }
  done
  run has_control_chars 'plain value with spaces, = and "quotes"'
  [ "$status" -ne 0 ]
}

@test "paths must be absolute and normalized" {
  for p in / /opt /opt/podmin/etc/mutable.env /a-b/c.d; do is_abs_path "$p"; done
  for p in '' relative/path ./x /a//b /a/./b /a/../b /a/b/ /a/.. /a/. $'/a\tb' '//'; do
    run is_abs_path "$p"
    [ "$status" -ne 0 ] || { echo "accepted: [$p]"; false; }
  done
}

@test "symlinks below the root are refused" {
  mkdir -p "$PODMIN_ROOT/real"
  ln -s real "$PODMIN_ROOT/link"
  no_symlink_below_root /real/file
  run no_symlink_below_root /link/file
  [ "$status" -ne 0 ]
  [[ $output == *"refusing symlink: /link"* ]]
  ln -s /etc/passwd "$PODMIN_ROOT/real/file"
  run no_symlink_below_root /real/file
  [ "$status" -ne 0 ]
}

@test "IPv6 addresses and prefixes" {
  [ "$(ipv6_hex 64:ff9b::10.0.0.1)" = 0064ff9b00000000000000000a000001 ]
  [ "$(ipv6_hex 2600:1F18::1)" = 26001f18000000000000000000000001 ]
  for a in 1::2::3 :1:2:3:4:5:6:7 1:2:3:4:5:6:7:8: 1:2:3:4:5:6:7:8:9 12345:: fe80::1%eth0 ::g ''; do
    run ipv6_hex "$a"
    [ "$status" -ne 0 ] || { echo "accepted: [$a]"; false; }
  done
  is_ipv6_cidr 2600:1f18:4b2:aa00:1234::/80
  is_ipv6_cidr 64:ff9b::/96 96 96
  run is_ipv6_cidr 64:ff9b::/64 96 96
  [ "$status" -ne 0 ]
  run is_ipv6_cidr 2600:1f18:4b2:aa00:1234::1/80 # host bits set
  [ "$status" -ne 0 ]
  run is_ipv6_cidr 2600:1f18::/129
  [ "$status" -ne 0 ]
  ipv6_cidr_within 64:ff9b::a00:0/104 64:ff9b::/96
  run ipv6_cidr_within 64:ff9c::a00:0/104 64:ff9b::/96
  [ "$status" -ne 0 ]
  run ipv6_cidr_within 64:ff9b::/64 64:ff9b::/96
  [ "$status" -ne 0 ]
}

@test "IPv4 addresses and CIDRs" {
  is_ipv4_cidr 10.0.0.0/16
  is_ipv4_cidr 0.0.0.0/0
  for c in 10.0.0.1/16 10.0.0.0/33 010.0.0.0/8 10.0.0/8 256.0.0.0/8 10.0.0.0 10.0.0.0/08; do
    run is_ipv4_cidr "$c"
    [ "$status" -ne 0 ] || { echo "accepted: [$c]"; false; }
  done
}

@test "typed values: lists, ranges, names, images, loopback" {
  check_type list:ipv4_cidr 10.0.0.0/16,192.168.0.0/24
  for v in '10.0.0.0/16,' ',10.0.0.0/16' '10.0.0.0/16,,10.1.0.0/16' '10.0.0.0/16, 10.1.0.0/16' ''; do
    run check_type list:ipv4_cidr "$v"
    [ "$status" -ne 0 ] || { echo "accepted: [$v]"; false; }
  done
  check_type uint:1024:67108864 262144
  for v in 1023 067108864 67108865 -1 1e6 ''; do
    run check_type uint:1024:67108864 "$v"
    [ "$status" -ne 0 ] || { echo "accepted: [$v]"; false; }
  done
  check_type image registry.podmin.internal/mirror/registry.k8s.io/pause:3.10
  run check_type image Registry.podmin.internal/mirror/pause:3.10
  [ "$status" -ne 0 ]
  check_type loopback_ip 127.0.0.1
  check_type loopback_ip ::1
  run check_type loopback_ip 10.0.0.5
  [ "$status" -ne 0 ]
  check_type iface ens5
  for v in a/b eth0:1 0123456789abcdef .. ''; do
    run check_type iface "$v"
    [ "$status" -ne 0 ] || { echo "accepted: [$v]"; false; }
  done
  check_type duration 2s
  run check_type duration 0s
  [ "$status" -ne 0 ]
}

@test "exact S3 objects (WORKLOAD_CA_PUBLISH): one systemd argument, no traversal" {
  check_type s3_object s3://trust-bundles/podmin/prod-ca.pem
  check_type s3_object s3://my.bucket/a=b,c@d~e+f_g.pem
  for v in s3://trust-bundles s3://trust-bundles/ s3://trust-bundles/a/ s3://trust-bundles//a \
    s3://trust-bundles/a//b s3://trust-bundles/../x s3://trust-bundles/a/./b 's3://b-ucket/a b' \
    's3://trust-bundles/a%b' "s3://trust-bundles/\$HOME" s3://Bad_Bucket/a s3://a..b/c \
    https://trust-bundles/a.pem ''; do
    run check_type s3_object "$v"
    [ "$status" -ne 0 ] || { echo "accepted: [$v]"; false; }
  done
  long=$(printf 'a%.0s' {1..1025})
  run check_type s3_object "s3://trust-bundles/$long"
  [ "$status" -ne 0 ]
}

@test "OTLP endpoints (TELEMETRY_OTLP_ENDPOINT): http(s), a host, a port, a plain path" {
  for v in https://otel.example.com:4318/v1/logs https://otel:4318/ http://10.0.0.5:4318 \
    'https://[2001:db8::7]:4318/v1/logs' https://collector; do
    check_type otlp_url "$v"
  done
  for v in ftp://otel:4318 https:// 'https://otel:4318/a b' 'https://otel:99999/' \
    "https://otel:4318/\$x" "https://otel:4318/a?b=c" 'https://otel"x' "https://otel:0/" ''; do
    run check_type otlp_url "$v"
    [ "$status" -ne 0 ] || { echo "accepted: [$v]"; false; }
  done
}

@test "user-data.env of a node: WORKLOAD_CA_PUBLISH is optional and typed" {
  base=$'PODMIN_KIND=node\nPODMIN_CLUSTER=prod\nPODMIN_BUCKET=prod-bucket\nPODMIN_REGION=us-east-1\nPODMIN_ARCH=amd64\nPODMIN_NODEGROUP=workers\nREGISTRY_HOSTNAME=registry.podmin.internal\nSANDBOX_IMAGE=registry.podmin.internal/mirror/registry.k8s.io/pause:3.10\n'
  put /opt/podmin/etc/user-data.env "${base}WORKLOAD_CA_PUBLISH=s3://trust-bundles/podmin/ca.pem"
  declare -A ud=()
  env_read /opt/podmin/etc/user-data.env schema_user_data node ud
  [ "${ud[WORKLOAD_CA_PUBLISH]}" = s3://trust-bundles/podmin/ca.pem ]
  put /opt/podmin/etc/user-data.env "${base}WORKLOAD_CA_PUBLISH=s3://trust-bundles/a b"
  declare -A bad=()
  run env_read /opt/podmin/etc/user-data.env schema_user_data node bad
  [ "$status" -ne 0 ]
  [[ $output == *"invalid value for WORKLOAD_CA_PUBLISH"* ]]
  put /opt/podmin/etc/user-data.env "${base%$'\n'}"
  declare -A none=()
  env_read /opt/podmin/etc/user-data.env schema_user_data node none
  [ -z "${none[WORKLOAD_CA_PUBLISH]:-}" ]
}

write_mutable() { put /opt/podmin/etc/mutable.env "$1"; }

@test "env files: a valid file is read, comments and blank lines skipped" {
  write_mutable '# comment\n\nKUBE_LOG_LEVEL=3\nAGENT_INTERVAL=5s\nSSM_AGENT_ENABLED=false\n'
  declare -A got=()
  env_read /opt/podmin/etc/mutable.env schema_mutable node got
  [ "${got[KUBE_LOG_LEVEL]}" = 3 ]
  [ "${got[SSM_AGENT_ENABLED]}" = false ]
  env_defaults schema_mutable node got
  [ "${got[LOCAL_REGISTRY_PORT]}" = 5000 ]
  [ "${got[AGENT_INTERVAL]}" = 5s ]
}

@test "env files: DNS_UPSTREAMS defaults to the VPC resolver; a list of IPv6/IPv4 addresses only" {
  write_mutable 'KUBE_LOG_LEVEL=3\n'
  declare -A got=()
  env_read /opt/podmin/etc/mutable.env schema_mutable node got
  env_defaults schema_mutable node got
  [ "${got[DNS_UPSTREAMS]}" = fd00:ec2::253 ]
  write_mutable 'DNS_UPSTREAMS=fd00:ec2::253,10.0.0.2\n'
  declare -A two=()
  env_read /opt/podmin/etc/mutable.env schema_mutable node two
  [ "${two[DNS_UPSTREAMS]}" = fd00:ec2::253,10.0.0.2 ]
  for v in resolver.example 'fd00:ec2::253 10.0.0.2' 'fd00:ec2::253,' '[fd00:ec2::253]:53' \
    fd00:ec2::253/128 /etc/resolv.conf; do
    write_mutable "DNS_UPSTREAMS=$v\n"
    declare -A bad=()
    run env_read /opt/podmin/etc/mutable.env schema_mutable node bad
    [ "$status" -ne 0 ] || { echo "accepted: [$v]"; false; }
    [[ $output == *"invalid value for DNS_UPSTREAMS"* ]]
  done
}

@test "env files: a last line without newline is read" {
  write_mutable 'KUBE_LOG_LEVEL=3'
  declare -A got=()
  env_read /opt/podmin/etc/mutable.env schema_mutable node got
  [ "${got[KUBE_LOG_LEVEL]}" = 3 ]
}

@test "env files: unknown keys are rejected" {
  write_mutable 'KUBE_LOG_LEVEL=3\nNOT_A_KEY=1\n'
  declare -A got=()
  run env_read /opt/podmin/etc/mutable.env schema_mutable node got
  [ "$status" -ne 0 ]
  [[ $output == *"mutable.env:2: unknown key NOT_A_KEY"* ]]
}

@test "env files: keys of another kind or layer are unknown" {
  write_mutable 'NAT_METRICS_INTERFACE=ens5\n'
  declare -A got=()
  run env_read /opt/podmin/etc/mutable.env schema_mutable node got
  [ "$status" -ne 0 ]
  write_mutable 'PODMIN_CLUSTER=prod\n'
  run env_read /opt/podmin/etc/mutable.env schema_mutable node got
  [[ $output == *"unknown key PODMIN_CLUSTER"* ]]
}

@test "env files: duplicate keys are rejected" {
  write_mutable 'KUBE_LOG_LEVEL=3\nKUBE_LOG_LEVEL=3\n'
  declare -A got=()
  run env_read /opt/podmin/etc/mutable.env schema_mutable node got
  [ "$status" -ne 0 ]
  [[ $output == *"duplicate key KUBE_LOG_LEVEL"* ]]
}

@test "env files: booleans other than true/false are rejected" {
  for v in True yes 1 'true '; do
    write_mutable "SSM_AGENT_ENABLED=$v\n"
    declare -A got=()
    run env_read /opt/podmin/etc/mutable.env schema_mutable node got
    [ "$status" -ne 0 ] || { echo "accepted: [$v]"; false; }
    [[ $output == *"invalid value for SSM_AGENT_ENABLED"* ]]
  done
}

@test "env files: control characters, CRLF and NUL are rejected" {
  for content in 'KUBE_LOG_LEVEL=3\r\n' 'AGENT_INTERVAL=2s\t\n' 'KUBE_LOG_LEVEL=\x1b3\n' 'SSM_AGENT_ENABLED=tr\x7fue\n'; do
    write_mutable "$content"
    declare -A got=()
    run env_read /opt/podmin/etc/mutable.env schema_mutable node got
    [ "$status" -ne 0 ] || { echo "accepted: [$content]"; false; }
    [[ $output == *"control character"* ]]
  done
  printf 'KUBE_LOG_LEVEL=3\0\n' >"$PODMIN_ROOT/opt/podmin/etc/mutable.env"
  run env_read /opt/podmin/etc/mutable.env schema_mutable node got
  [ "$status" -ne 0 ]
  [[ $output == *"NUL byte"* ]]
}

@test "env files: malformed lines are rejected" {
  for line in 'export KUBE_LOG_LEVEL=3' 'kube_log_level=3' 'KUBE_LOG_LEVEL =3' 'KUBE_LOG_LEVEL' '=3' ' KUBE_LOG_LEVEL=3'; do
    write_mutable "$line\n"
    declare -A got=()
    run env_read /opt/podmin/etc/mutable.env schema_mutable node got
    [ "$status" -ne 0 ] || { echo "accepted: [$line]"; false; }
  done
}

@test "env files: missing required keys are rejected unless partial" {
  put /opt/podmin/etc/user-data.env 'PODMIN_KIND=node\nPODMIN_CLUSTER=prod\n'
  declare -A got=()
  run env_read /opt/podmin/etc/user-data.env schema_user_data node got
  [ "$status" -ne 0 ]
  [[ $output == *"missing required key PODMIN_BUCKET"* ]]
  env_read /opt/podmin/etc/user-data.env schema_user_data node got partial
}

@test "env files: symlinks, relative or non-normalized paths, directories and huge files are refused" {
  write_mutable 'KUBE_LOG_LEVEL=3\n'
  ln -s mutable.env "$PODMIN_ROOT/opt/podmin/etc/link.env"
  declare -A got=()
  run env_read /opt/podmin/etc/link.env schema_mutable node got
  [ "$status" -ne 0 ]
  [[ $output == *"refusing symlink"* ]]
  for p in opt/podmin/etc/mutable.env /opt/podmin//etc/mutable.env /opt/podmin/./etc/mutable.env \
    /opt/podmin/bin/../etc/mutable.env; do
    run env_read "$p" schema_mutable node got
    [ "$status" -ne 0 ] || { echo "accepted: [$p]"; false; }
    [[ $output == *"not an absolute normalized path"* ]]
  done
  run env_read /opt/podmin/etc schema_mutable node got
  [[ $output == *"not a regular file"* ]]
  head -c 70000 /dev/zero | tr '\0' '#' >"$PODMIN_ROOT/opt/podmin/etc/mutable.env"
  run env_read /opt/podmin/etc/mutable.env schema_mutable node got
  [[ $output == *"larger than 65536 bytes"* ]]
}

@test "NAT rules: NAT64 needs sources and a pool4 address; custom prefixes need blocked CIDRs inside" {
  declare -A c=([NAT64_ENABLED]=true [NAT64_PREFIX]=64:ff9b::/96)
  run nat_rules c
  [ "$status" -ne 0 ]
  [[ $output == *"requires NAT64_SOURCE_IPV6_CIDRS"* && $output == *"requires NAT64_POOL4_ADDRESS"* ]]
  c[NAT64_SOURCE_IPV6_CIDRS]=2600:1f18::/56
  c[NAT64_POOL4_ADDRESS]=10.0.0.10
  nat_rules c
  c[NAT64_PREFIX]=2001:db8:64::/96
  run nat_rules c
  [[ $output == *"custom NAT64_PREFIX requires matching NAT64_BLOCKED_IPV6_CIDRS"* ]]
  c[NAT64_BLOCKED_IPV6_CIDRS]=64:ff9b::a00:0/104
  run nat_rules c
  [[ $output == *"is not inside NAT64_PREFIX"* ]]
  c[NAT64_BLOCKED_IPV6_CIDRS]=2001:db8:64::a00:0/104
  nat_rules c
  # shellcheck disable=SC2034 # read through a nameref
  declare -A off=([NAT64_ENABLED]=false [NAT64_PREFIX]=64:ff9b::/96)
  nat_rules off
}

@test "NAT rules: pool4 \"detect\" needs the detected NAT64 ENI, interface and address" {
  check_type ipv4_or_detect detect
  check_type ipv4_or_detect 10.0.1.5
  for v in Detect detected '' 10.0.1.256 'detect ' auto; do
    run check_type ipv4_or_detect "$v"
    [ "$status" -ne 0 ] || { echo "accepted: [$v]"; false; }
  done
  # The detected address itself is a plain IPv4 address; "detect" never reaches the services.
  run check_type ipv4 detect
  [ "$status" -ne 0 ]
  check_type jool_source archive
  check_type jool_source debian
  run check_type jool_source apt
  [ "$status" -ne 0 ]
  declare -A c=([NAT64_ENABLED]=true [NAT64_PREFIX]=64:ff9b::/96
    [NAT64_SOURCE_IPV6_CIDRS]=2600:1f18::/56 [NAT64_POOL4_ADDRESS]=detect)
  run nat_rules c
  [ "$status" -ne 0 ]
  [[ $output == *"NAT64_POOL4_ADDRESS=detect requires DETECTED_NAT64_ENI_ID"* ]]
  c[DETECTED_NAT64_ENI_ID]=eni-0123456789abcdef0
  c[DETECTED_NAT64_INTERFACE]=ens6
  run nat_rules c
  [ "$status" -ne 0 ]
  c[DETECTED_NAT64_POOL4_ADDRESS]=10.0.1.5
  run nat_rules c
  [ "$status" -ne 0 ]
  [[ $output == *"and DETECTED_NAT64_SUBNET_IPV4_CIDR"* ]]
  c[DETECTED_NAT64_SUBNET_IPV4_CIDR]=10.0.1.0/24
  nat_rules c
  # The address must be a host of that subnet, not its VPC router.
  for s in 10.0.2.0/24 10.0.1.0/30; do
    c[DETECTED_NAT64_SUBNET_IPV4_CIDR]=$s
    run nat_rules c
    [ "$status" -ne 0 ] || { echo "accepted: [$s]"; false; }
    [[ $output == *"must be a host address of DETECTED_NAT64_SUBNET_IPV4_CIDR"* ]]
  done
  c[DETECTED_NAT64_SUBNET_IPV4_CIDR]=10.0.1.0/24
  c[DETECTED_NAT64_POOL4_ADDRESS]=10.0.1.1
  run nat_rules c
  [ "$status" -ne 0 ]
}

@test "IPv4 subnets: EC2 sizes, membership, the VPC router's address" {
  check_type ipv4_subnet 10.99.0.0/27
  check_type ipv4_subnet 10.0.0.0/16
  check_type ipv4_subnet 10.0.255.240/28
  for v in 10.0.0.0/15 10.99.0.0/29 10.99.0.1/27 10.99.0.0 detect ''; do
    run check_type ipv4_subnet "$v"
    [ "$status" -ne 0 ] || { echo "accepted: [$v]"; false; }
  done
  ipv4_in_cidr 10.99.0.20 10.99.0.0/27
  ipv4_in_cidr 10.99.0.31 10.99.0.0/27
  ipv4_in_cidr 203.0.113.9 0.0.0.0/0
  for a in 10.99.0.32 10.98.255.255 11.99.0.20; do
    run ipv4_in_cidr "$a" 10.99.0.0/27
    [ "$status" -ne 0 ] || { echo "inside: [$a]"; false; }
  done
  [ "$(ipv4_subnet_gateway 10.99.0.0/27)" = 10.99.0.1 ]
  [ "$(ipv4_subnet_gateway 10.0.255.0/24)" = 10.0.255.1 ]
  [ "$(ipv4_subnet_gateway 172.31.0.0/16)" = 172.31.0.1 ]
  [ "$(ipv4_of_int 4294967295)" = 255.255.255.255 ]
}

@test "NAT64 sources: exactly \"detect\" or a strict list; detected VPC blocks are /32 to /64" {
  check_type ipv6_cidrs_or_detect detect
  check_type ipv6_cidrs_or_detect 2600:1f18:4b2:aa00::/56
  check_type ipv6_cidrs_or_detect 2600:1f18:4b2:aa00::/56,2600:1f18:77:c100::/56
  for v in Detect DETECT 'detect ' ' detect' detected auto '' detect,2600:1f18::/56 \
    2600:1f18::/56,detect 2600:1f18::1/56 '2600:1f18::/56,' '2600:1f18::/56, 2600:1f19::/56' \
    2600:1f18::/129 10.0.0.0/16; do
    run check_type ipv6_cidrs_or_detect "$v"
    [ "$status" -ne 0 ] || { echo "accepted: [$v]"; false; }
  done
  check_type vpc_ipv6_cidr 2600:1f18:4b2:aa00::/56
  check_type vpc_ipv6_cidr 2600:1f18:4b0::/44
  check_type list:vpc_ipv6_cidr 2600:1f18:4b2:aa00::/56,2600:1f18:77:c100::/56
  for v in ::/0 2600::/16 2600:1f18:4b2:aa00::/96 2600:1f18:4b2:aa00::1/56 detect ''; do
    run check_type vpc_ipv6_cidr "$v"
    [ "$status" -ne 0 ] || { echo "accepted: [$v]"; false; }
  done
  declare -A c=([NAT64_ENABLED]=true [NAT64_PREFIX]=64:ff9b::/96
    [NAT64_SOURCE_IPV6_CIDRS]=detect [NAT64_POOL4_ADDRESS]=10.0.1.5)
  run nat_rules c
  [ "$status" -ne 0 ]
  [[ $output == *"NAT64_SOURCE_IPV6_CIDRS=detect requires DETECTED_NAT64_SOURCE_IPV6_CIDRS"* ]]
  c[DETECTED_NAT64_SOURCE_IPV6_CIDRS]=2600:1f18:4b2:aa00::/56
  nat_rules c
}

@test "detected.env of a NAT VM: the NAT64 keys are typed" {
  put /opt/podmin/etc/detected.env 'DETECTED_INSTANCE_ID=i-0123456789abcdef0\nDETECTED_AVAILABILITY_ZONE=us-east-1a\nDETECTED_IMDS_MODE=IPv4\nDETECTED_DEFAULT_INTERFACE=ens5\nDETECTED_NAT64_ENI_ID=eni-0123456789abcdef0\nDETECTED_NAT64_INTERFACE=ens6\nDETECTED_NAT64_POOL4_ADDRESS=10.0.1.5\nDETECTED_NAT64_SUBNET_IPV4_CIDR=10.0.1.0/24\nDETECTED_NAT64_SOURCE_IPV6_CIDRS=2600:1f18:4b2:aa00::/56,2600:1f18:77:c100::/56\n'
  declare -A got=()
  env_read /opt/podmin/etc/detected.env schema_detected nat got
  [ "${got[DETECTED_NAT64_POOL4_ADDRESS]}" = 10.0.1.5 ]
  [ "${got[DETECTED_NAT64_SUBNET_IPV4_CIDR]}" = 10.0.1.0/24 ]
  [ "${got[DETECTED_NAT64_SOURCE_IPV6_CIDRS]}" = 2600:1f18:4b2:aa00::/56,2600:1f18:77:c100::/56 ]
  put /opt/podmin/etc/detected.env 'DETECTED_INSTANCE_ID=i-0123456789abcdef0\nDETECTED_AVAILABILITY_ZONE=us-east-1a\nDETECTED_IMDS_MODE=IPv4\nDETECTED_DEFAULT_INTERFACE=ens5\nDETECTED_NAT64_ENI_ID=i-0123456789abcdef0\nDETECTED_NAT64_POOL4_ADDRESS=detect\nDETECTED_NAT64_SUBNET_IPV4_CIDR=10.0.1.5/24\nDETECTED_NAT64_SOURCE_IPV6_CIDRS=detect\n'
  # shellcheck disable=SC2034 # filled through a nameref
  declare -A bad=()
  run env_read /opt/podmin/etc/detected.env schema_detected nat bad
  [ "$status" -ne 0 ]
  [[ $output == *"invalid value for DETECTED_NAT64_ENI_ID"* ]]
  [[ $output == *"invalid value for DETECTED_NAT64_POOL4_ADDRESS"* ]]
  [[ $output == *"invalid value for DETECTED_NAT64_SUBNET_IPV4_CIDR"* ]]
  [[ $output == *"invalid value for DETECTED_NAT64_SOURCE_IPV6_CIDRS"* ]]
  # A node's detected.env has no NAT64 keys.
  run env_read /opt/podmin/etc/detected.env schema_detected node bad
  [[ $output == *"unknown key DETECTED_NAT64_ENI_ID"* ]]
  # The allowlist is never broader than a VPC block.
  put /opt/podmin/etc/detected.env 'DETECTED_INSTANCE_ID=i-0123456789abcdef0\nDETECTED_AVAILABILITY_ZONE=us-east-1a\nDETECTED_IMDS_MODE=IPv4\nDETECTED_DEFAULT_INTERFACE=ens5\nDETECTED_NAT64_SOURCE_IPV6_CIDRS=::/0\n'
  run env_read /opt/podmin/etc/detected.env schema_detected nat bad
  [[ $output == *"invalid value for DETECTED_NAT64_SOURCE_IPV6_CIDRS"* ]]
}

@test "node rules: the sandbox image comes from the registry's mirror/" {
  declare -A c=([REGISTRY_HOSTNAME]=registry.podmin.internal
    [SANDBOX_IMAGE]=registry.k8s.io/pause:3.10)
  run node_rules c
  [ "$status" -ne 0 ]
  c[SANDBOX_IMAGE]=registry.podmin.internal/mirror/registry.k8s.io/pause:3.10
  node_rules c
}

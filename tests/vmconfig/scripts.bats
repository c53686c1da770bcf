#!/usr/bin/env bats
bats_require_minimum_version 1.5.0
# vmconfig's scripts refusing bad input: archives, dependency lists, delivered env files.

load helpers

setup() {
  load_libs
  new_root
  work=$BATS_TEST_TMPDIR/work
  mkdir -p "$work/vmc" "$work/files"
  cp -r "$VMCONFIG/bin" "$VMCONFIG/lib" "$VMCONFIG/units" "$work/vmc/"
  tar -czf "$work/vmconfig.tgz" -C "$work/vmc" bin lib units
}

# dep NAME FILE: one line of a dependency list.
dep() { printf '%s 1.0.0 %s %s %s\n' "$1" "$(sha256sum "$2" | cut -d' ' -f1)" "$(stat -c %s "$2")" "$2"; }

# nat_list [JOOL_TGZ]: a NAT kind dependency list.
nat_list() {
  dep vmconfig "$work/vmconfig.tgz"
  dep jool "$1"
}

good_jool() {
  mkdir -p "$work/jool/bin" "$work/jool/modules/6.1.0-test"
  printf '#!/bin/sh\n' >"$work/jool/bin/jool"
  : >"$work/jool/modules/6.1.0-test/jool.ko"
  : >"$work/jool/modules/6.1.0-test/jool_common.ko"
}

@test "install.sh installs a valid NAT set with fixed owners and modes" {
  good_jool
  tar -czf "$work/jool.tgz" -C "$work/jool" bin modules
  nat_list "$work/jool.tgz" >"$work/list"
  run "$work/vmc/bin/install.sh" --kind nat --deps-list "$work/list"
  [ "$status" -eq 0 ]
  [ "$(stat -c '%u:%g %a' "$PODMIN_ROOT/usr/local/sbin/jool")" = "0:0 755" ]
  [ "$(stat -c '%a' "$PODMIN_ROOT/opt/podmin/lib/validate.sh")" = 644 ]
  grep -q '^podmin:' "$PODMIN_ROOT/etc/passwd"
  # Idempotent: a second run changes nothing.
  run "$work/vmc/bin/install.sh" --kind nat --deps-list "$work/list"
  [ "$status" -eq 0 ]
  [[ $output == *"(0 changed)"* ]]
  [ "$(grep -c '^podmin:' "$PODMIN_ROOT/etc/passwd")" = 1 ]
}

@test "install.sh installs a NAT set without jool: Jool comes from Debian later" {
  dep vmconfig "$work/vmconfig.tgz" >"$work/list"
  run "$work/vmc/bin/install.sh" --kind nat --deps-list "$work/list"
  [ "$status" -eq 0 ]
  [[ $output == *"jool: no pinned archive; configure.sh installs Debian's jool-dkms and jool-tools"* ]]
  [ ! -e "$PODMIN_ROOT/usr/local/sbin/jool" ]
  [ -x "$PODMIN_ROOT/opt/podmin/bin/nat.sh" ]
  [ "$(cut -d' ' -f1 "$PODMIN_ROOT/opt/podmin/etc/dependencies.list")" = vmconfig ]
  # A jool archive without modules is still refused.
  mkdir -p "$work/jool/bin"
  printf '#!/bin/sh\n' >"$work/jool/bin/jool"
  tar -czf "$work/jool.tgz" -C "$work/jool" bin
  nat_list "$work/jool.tgz" >"$work/list"
  run "$work/vmc/bin/install.sh" --kind nat --deps-list "$work/list"
  [ "$status" -ne 0 ]
  [[ $output == *"archive holds no modules/<kernel-release>/ directory"* ]]
}

@test "install.sh refuses an archive holding a symlink, and installs nothing" {
  good_jool
  ln -s /etc/shadow "$work/jool/bin/evil"
  tar -czf "$work/jool.tgz" -C "$work/jool" bin modules
  nat_list "$work/jool.tgz" >"$work/list"
  run "$work/vmc/bin/install.sh" --kind nat --deps-list "$work/list"
  [ "$status" -ne 0 ]
  [[ $output == *"archive holds a link or special file: bin/evil"* ]]
  [ ! -e "$PODMIN_ROOT/usr/local/sbin/jool" ]
  [ ! -e "$PODMIN_ROOT/opt/podmin/bin" ]
}

@test "install.sh refuses '..' and absolute member names" {
  good_jool
  mkdir -p "$work/jool/x"
  tar -czf "$work/jool.tgz" -C "$work/jool" bin modules --transform 's,^bin/jool,../../bin/jool,'
  nat_list "$work/jool.tgz" >"$work/list"
  run "$work/vmc/bin/install.sh" --kind nat --deps-list "$work/list"
  [ "$status" -ne 0 ]
  [[ $output == *"unsafe member name"* ]]
  tar -czf "$work/jool.tgz" -P -C / "$work/jool/bin/jool"
  nat_list "$work/jool.tgz" >"$work/list"
  run "$work/vmc/bin/install.sh" --kind nat --deps-list "$work/list"
  [ "$status" -ne 0 ]
  [[ $output == *"unsafe member name in archive: /"* ]]
  [ ! -e "$PODMIN_ROOT/usr/local/sbin/jool" ]
}

@test "install.sh refuses unknown, duplicate and missing dependencies and incomplete archives" {
  good_jool
  tar -czf "$work/jool.tgz" -C "$work/jool" bin modules
  { nat_list "$work/jool.tgz"; dep kubelet "$work/jool.tgz"; } >"$work/list"
  run "$work/vmc/bin/install.sh" --kind nat --deps-list "$work/list"
  [[ $output == *"unknown dependency for kind nat: kubelet"* ]]
  { nat_list "$work/jool.tgz"; dep jool "$work/jool.tgz"; } >"$work/list"
  run "$work/vmc/bin/install.sh" --kind nat --deps-list "$work/list"
  [[ $output == *"duplicate dependency: jool"* ]]
  dep jool "$work/jool.tgz" >"$work/list"
  run "$work/vmc/bin/install.sh" --kind nat --deps-list "$work/list"
  [[ $output == *"missing dependency: vmconfig"* ]]
  rm "$work/jool/modules/6.1.0-test/jool.ko"
  tar -czf "$work/jool.tgz" -C "$work/jool" bin modules
  nat_list "$work/jool.tgz" >"$work/list"
  run "$work/vmc/bin/install.sh" --kind nat --deps-list "$work/list"
  [ "$status" -ne 0 ]
  [[ $output == *"archive lacks modules/6.1.0-test/jool.ko"* ]]
  [ ! -e "$PODMIN_ROOT/opt/podmin/bin" ]
}

# node_list: a node kind dependency list of stand-in programs (CoreDNS as its release tarball).
node_list() {
  local b
  for b in containerd containerd-shim-runc-v2 ctr ptp host-local loopback crictl coredns; do
    mkdir -p "$work/files/bin"
    printf '#!/bin/sh\necho %s\n' "$b" >"$work/files/bin/$b"
  done
  tar -czf "$work/containerd.tgz" -C "$work/files" bin/containerd bin/containerd-shim-runc-v2 bin/ctr
  tar -czf "$work/cni.tgz" -C "$work/files/bin" ptp host-local loopback
  tar -czf "$work/crictl.tgz" -C "$work/files/bin" crictl
  for b in runc kubelet podmin-agent; do printf '#!/bin/sh\n' >"$work/files/$b"; done
  dep vmconfig "$work/vmconfig.tgz"
  dep containerd "$work/containerd.tgz"
  dep cni-plugins "$work/cni.tgz"
  dep crictl "$work/crictl.tgz"
  for b in runc kubelet podmin-agent; do dep "$b" "$work/files/$b"; done
}

@test "install.sh on a node: CoreDNS is required and installed from its release tarball" {
  node_list >"$work/list"
  run "$work/vmc/bin/install.sh" --kind node --deps-list "$work/list"
  [ "$status" -ne 0 ]
  [[ $output == *"missing dependency: coredns"* ]]
  # A tarball without the coredns program is refused before anything is installed.
  tar -czf "$work/coredns.tgz" -C "$work/files/bin" crictl
  { node_list; dep coredns "$work/coredns.tgz"; } >"$work/list"
  run "$work/vmc/bin/install.sh" --kind node --deps-list "$work/list"
  [ "$status" -ne 0 ]
  [[ $output == *"coredns 1.0.0: archive lacks coredns"* ]]
  [ ! -e "$PODMIN_ROOT/opt/podmin/bin" ]
  tar -czf "$work/coredns.tgz" -C "$work/files/bin" coredns
  { node_list; dep coredns "$work/coredns.tgz"; } >"$work/list"
  run "$work/vmc/bin/install.sh" --kind node --deps-list "$work/list"
  [ "$status" -eq 0 ]
  [ "$(stat -c '%u:%g %a' "$PODMIN_ROOT/usr/local/bin/coredns")" = "0:0 755" ]
  [ "$("$PODMIN_ROOT/usr/local/bin/coredns")" = coredns ]
  [ "$(stat -c '%a' "$PODMIN_ROOT/etc/systemd/system/podmin-coredns.service")" = 644 ]
  grep -qx 'coredns 1.0.0 [0-9a-f]*' "$PODMIN_ROOT/opt/podmin/etc/dependencies.list"
}

# vendor_deb NAME OUT PATH...: a Debian package laid out as its vendor's (each PATH a program).
vendor_deb() {
  local name=$1 out=$2 pkg=$work/deb-${2##*/} f
  shift 2
  mkdir -p "$pkg/DEBIAN"
  printf 'Package: %s\nVersion: 1.0.0\nArchitecture: amd64\nMaintainer: test\nDescription: t\n' \
    "$name" >"$pkg/DEBIAN/control"
  for f in "$@"; do
    mkdir -p "$pkg/${f%/*}"
    printf '#!/bin/sh\necho %s\n' "${f##*/}" >"$pkg/$f"
    chmod 0755 "$pkg/$f"
  done
  dpkg-deb --root-owner-group --build "$pkg" "$out" >/dev/null
}

@test "install.sh on a node: Fluent Bit and the SSM Agent from their vendors' .deb, units only with them" {
  node_list >/dev/null
  tar -czf "$work/coredns.tgz" -C "$work/files/bin" coredns
  { node_list; dep coredns "$work/coredns.tgz"; } >"$work/list"
  run "$work/vmc/bin/install.sh" --kind node --deps-list "$work/list"
  [ "$status" -eq 0 ]
  # Without the packages, neither unit is installed.
  [ ! -e "$PODMIN_ROOT/etc/systemd/system/podmin-fluent-bit.service" ]
  [ ! -e "$PODMIN_ROOT/etc/systemd/system/amazon-ssm-agent.service" ]
  vendor_deb fluent-bit "$work/fluent-bit.deb" opt/fluent-bit/bin/fluent-bit \
    lib/systemd/system/fluent-bit.service etc/fluent-bit/fluent-bit.conf
  vendor_deb amazon-ssm-agent "$work/ssm.deb" usr/bin/amazon-ssm-agent usr/bin/ssm-agent-worker \
    usr/bin/ssm-document-worker usr/bin/ssm-session-worker usr/bin/ssm-session-logger \
    lib/systemd/system/amazon-ssm-agent.service
  { node_list; dep coredns "$work/coredns.tgz"; dep fluent-bit "$work/fluent-bit.deb"
    dep amazon-ssm-agent "$work/ssm.deb"; } >"$work/list"
  run "$work/vmc/bin/install.sh" --kind node --deps-list "$work/list"
  [ "$status" -eq 0 ]
  [ "$(stat -c '%u:%g %a' "$PODMIN_ROOT/opt/fluent-bit/bin/fluent-bit")" = "0:0 755" ]
  [ "$("$PODMIN_ROOT/opt/fluent-bit/bin/fluent-bit")" = fluent-bit ]
  [ "$("$PODMIN_ROOT/usr/bin/amazon-ssm-agent")" = amazon-ssm-agent ]
  [ -x "$PODMIN_ROOT/usr/bin/ssm-session-logger" ]
  [ "$(stat -c '%a' "$PODMIN_ROOT/etc/systemd/system/podmin-fluent-bit.service")" = 644 ]
  [ "$(stat -c '%a' "$PODMIN_ROOT/etc/systemd/system/amazon-ssm-agent.service")" = 644 ]
  # The vendor's own unit and configuration are not installed: Podmin's units run them.
  [ ! -e "$PODMIN_ROOT/lib/systemd/system/fluent-bit.service" ]
  [ ! -e "$PODMIN_ROOT/etc/fluent-bit" ]
  grep -qx 'fluent-bit 1.0.0 [0-9a-f]*' "$PODMIN_ROOT/opt/podmin/etc/dependencies.list"
  # A package without the program is refused before anything changes.
  vendor_deb fluent-bit "$work/empty.deb" etc/fluent-bit/fluent-bit.conf
  { node_list; dep coredns "$work/coredns.tgz"; dep fluent-bit "$work/empty.deb"; } >"$work/list"
  run "$work/vmc/bin/install.sh" --kind node --deps-list "$work/list"
  [ "$status" -ne 0 ]
  [[ $output == *"fluent-bit 1.0.0: archive lacks opt/fluent-bit/bin/fluent-bit"* ]]
}

@test "install.sh refuses to install through a symlinked destination directory" {
  good_jool
  tar -czf "$work/jool.tgz" -C "$work/jool" bin modules
  nat_list "$work/jool.tgz" >"$work/list"
  mkdir -p "$PODMIN_ROOT/usr/local" "$BATS_TEST_TMPDIR/elsewhere"
  ln -s "$BATS_TEST_TMPDIR/elsewhere" "$PODMIN_ROOT/usr/local/sbin"
  run "$work/vmc/bin/install.sh" --kind nat --deps-list "$work/list"
  [ "$status" -ne 0 ]
  [[ $output == *"unsafe install destination /usr/local/sbin/jool"* ]]
  [ -z "$(ls "$BATS_TEST_TMPDIR/elsewhere")" ]
}

# A configured NAT VM root (user-data.env, detected.env, mutable.env), without running anything.
nat_root() {
  good_jool
  tar -czf "$work/jool.tgz" -C "$work/jool" bin modules
  nat_list "$work/jool.tgz" >"$work/list"
  "$work/vmc/bin/install.sh" --kind nat --deps-list "$work/list" 2>/dev/null
  put /opt/podmin/etc/user-data.env 'PODMIN_KIND=nat\nPODMIN_CLUSTER=prod\nPODMIN_BUCKET=prod-bucket\nPODMIN_REGION=us-east-1\nPODMIN_ARCH=arm64\nNAT_IPV4_SOURCE_CIDRS=10.0.0.0/16\n'
  put /opt/podmin/etc/detected.env 'DETECTED_INSTANCE_ID=i-0123456789abcdef0\nDETECTED_AVAILABILITY_ZONE=us-east-1a\nDETECTED_IMDS_MODE=IPv4\nDETECTED_DEFAULT_INTERFACE=ens5\n'
  put /opt/podmin/etc/mutable.env 'SSM_AGENT_ENABLED=true\n'
  export SYSTEMCTL=$work/systemctl
  printf '#!/bin/sh\necho "$*" >>"%s"\n' "$work/systemctl.log" >"$SYSTEMCTL"
  chmod +x "$SYSTEMCTL"
}

@test "configure.sh on a NAT root generates env and ruleset; a second run is a no-op" {
  nat_root
  run "$PODMIN_ROOT/opt/podmin/bin/configure.sh"
  [ "$status" -eq 0 ]
  grep -qx 'NAT_METRICS_INTERFACE=ens5' "$PODMIN_ROOT/opt/env/podmin-nat.env"
  grep -qx 'NAT_CONNTRACK_MAX=262144' "$PODMIN_ROOT/opt/env/podmin-nat.env"
  grep -q 'restart podmin-nat' "$work/systemctl.log"
  : >"$work/systemctl.log"
  run "$PODMIN_ROOT/opt/podmin/bin/configure.sh"
  [ "$status" -eq 0 ]
  run ! grep -q restart "$work/systemctl.log"
}

# A NAT VM root whose NAT64 pool4 address was detected and whose Jool comes from Debian.
nat64_detect_root() {
  dep vmconfig "$work/vmconfig.tgz" >"$work/list"
  "$work/vmc/bin/install.sh" --kind nat --deps-list "$work/list" 2>/dev/null
  put /opt/podmin/etc/user-data.env 'PODMIN_KIND=nat\nPODMIN_CLUSTER=prod\nPODMIN_BUCKET=prod-bucket\nPODMIN_REGION=us-east-1\nPODMIN_ARCH=arm64\nNAT_IPV4_SOURCE_CIDRS=10.0.0.0/16\nNAT64_ENABLED=true\nNAT64_SOURCE_IPV6_CIDRS=detect\nNAT64_POOL4_ADDRESS=detect\n'
  put /opt/podmin/etc/detected.env 'DETECTED_INSTANCE_ID=i-0123456789abcdef0\nDETECTED_AVAILABILITY_ZONE=us-east-1a\nDETECTED_IMDS_MODE=IPv4\nDETECTED_DEFAULT_INTERFACE=ens5\nDETECTED_NAT64_ENI_ID=eni-0123456789abcdef0\nDETECTED_NAT64_INTERFACE=ens6\nDETECTED_NAT64_POOL4_ADDRESS=10.0.1.5\nDETECTED_NAT64_SUBNET_IPV4_CIDR=10.0.1.0/24\nDETECTED_NAT64_SOURCE_IPV6_CIDRS=2600:1f18:4b2:aa00::/56,2600:1f18:77:c100::/56\n'
  put /opt/podmin/etc/mutable.env 'SSM_AGENT_ENABLED=true\n'
  export SYSTEMCTL=$work/systemctl APT_GET=$work/apt-get
  printf '#!/bin/sh\necho "$*" >>"%s"\n' "$work/systemctl.log" >"$SYSTEMCTL"
  printf '#!/bin/sh\necho "$*" >>"%s"\n' "$work/apt-get.log" >"$APT_GET"
  chmod +x "$SYSTEMCTL" "$APT_GET"
}

@test "configure.sh with pool4 detect and no pinned jool: detected address, Jool from Debian once" {
  nat64_detect_root
  run "$PODMIN_ROOT/opt/podmin/bin/configure.sh"
  [ "$status" -eq 0 ]
  env=$PODMIN_ROOT/opt/env/podmin-nat.env
  grep -qx 'NAT64_POOL4_ADDRESS=10.0.1.5' "$env"
  grep -qx 'NAT64_INTERFACE=ens6' "$env"
  grep -qx 'NAT64_JOOL=debian' "$env"
  [[ $output == *"Jool: no pinned jool dependency; installing Debian's jool-dkms jool-tools linux-headers-$(uname -r)"* ]]
  run ! grep -q detect "$env"
  [ "$(wc -l <"$work/apt-get.log")" = 2 ]
  grep -q " update$" "$work/apt-get.log"
  grep -q -- "--no-install-recommends install jool-dkms jool-tools linux-headers-$(uname -r)$" "$work/apt-get.log"
  # Egress through the stable ENI: WAN and metrics on ens6, its subnet's router, table 110.
  grep -qx 'NAT_WAN_INTERFACE=ens6' "$env"
  grep -qx 'NAT_METRICS_INTERFACE=ens6' "$env"
  grep -qx 'NAT64_IPV4_SUBNET=10.0.1.0/24' "$env"
  grep -qx 'NAT64_IPV4_GATEWAY=10.0.1.1' "$env"
  grep -qx 'NAT64_ROUTE_TABLE=110' "$env"
  # Sources "detect": the detected VPC blocks are the allowlist.
  ruleset=$PODMIN_ROOT/etc/podmin/nat/nat.nft
  grep -qx '    elements = { 2600:1f18:4b2:aa00::/56, 2600:1f18:77:c100::/56 }' "$ruleset"
  grep -q 'oifname "ens6" masquerade$' "$ruleset"
  run ! grep -q -e detect -e ens5 "$ruleset"
  # Again: nothing to install, nothing restarted.
  : >"$work/systemctl.log"
  run "$PODMIN_ROOT/opt/podmin/bin/configure.sh"
  [ "$status" -eq 0 ]
  [ "$(wc -l <"$work/apt-get.log")" = 2 ]
  run ! grep -q restart "$work/systemctl.log"
}

@test "configure.sh: a failing apt-get stops the boot; the host's apt-get is never used under a root" {
  nat64_detect_root
  printf '#!/bin/sh\necho "$*" >>"%s"\nexit 100\n' "$work/apt-get.log" >"$APT_GET"
  PODMIN_APT_RETRY_SECONDS=1 run "$PODMIN_ROOT/opt/podmin/bin/configure.sh"
  [ "$status" -ne 0 ]
  [[ $output == *"apt-get failed (attempt 3 of 3)"* ]]
  [[ $output == *"could not install Jool from Debian"* ]]
  [ "$(grep -c ' update$' "$work/apt-get.log")" = 3 ]
  [ ! -e "$PODMIN_ROOT/opt/env/podmin-nat.env" ]
  [ ! -s "$work/systemctl.log" ]
  unset APT_GET
  run "$PODMIN_ROOT/opt/podmin/bin/configure.sh"
  [ "$status" -ne 0 ]
  [[ $output == *"refusing to run the host's apt-get (set APT_GET)"* ]]
}

@test "configure.sh refuses sources detect without the detected VPC blocks" {
  nat64_detect_root
  put /opt/podmin/etc/detected.env 'DETECTED_INSTANCE_ID=i-0123456789abcdef0\nDETECTED_AVAILABILITY_ZONE=us-east-1a\nDETECTED_IMDS_MODE=IPv4\nDETECTED_DEFAULT_INTERFACE=ens5\nDETECTED_NAT64_ENI_ID=eni-0123456789abcdef0\nDETECTED_NAT64_INTERFACE=ens6\nDETECTED_NAT64_POOL4_ADDRESS=10.0.1.5\nDETECTED_NAT64_SUBNET_IPV4_CIDR=10.0.1.0/24\n'
  run "$PODMIN_ROOT/opt/podmin/bin/configure.sh"
  [ "$status" -ne 0 ]
  [[ $output == *"NAT64_SOURCE_IPV6_CIDRS=detect requires DETECTED_NAT64_SOURCE_IPV6_CIDRS"* ]]
  [ ! -e "$PODMIN_ROOT/opt/env/podmin-nat.env" ]
  [ ! -s "$work/apt-get.log" ]
}

@test "configure.sh refuses pool4 detect without the detected NAT64 ENI" {
  nat64_detect_root
  put /opt/podmin/etc/detected.env 'DETECTED_INSTANCE_ID=i-0123456789abcdef0\nDETECTED_AVAILABILITY_ZONE=us-east-1a\nDETECTED_IMDS_MODE=IPv4\nDETECTED_DEFAULT_INTERFACE=ens5\n'
  run "$PODMIN_ROOT/opt/podmin/bin/configure.sh"
  [ "$status" -ne 0 ]
  [[ $output == *"NAT64_POOL4_ADDRESS=detect requires DETECTED_NAT64_ENI_ID"* ]]
  [ ! -e "$PODMIN_ROOT/opt/env/podmin-nat.env" ]
  [ ! -s "$work/apt-get.log" ]
}

# stub NAME [EXIT]: a recorder for a command on PATH (kernel and sysctl side of nat.sh).
stub() {
  mkdir -p "$work/stubs"
  printf '#!/bin/sh\necho "$*" >>"%s"\nexit %s\n' "$work/$1.log" "${2:-0}" >"$work/stubs/$1"
  chmod +x "$work/stubs/$1"
}

@test "nat.sh: NAT64 off needs no Jool; a pinned module for another kernel is refused" {
  nat_root
  for c in modprobe sysctl nft insmod; do stub "$c"; done
  put /opt/env/podmin-nat.env "NAT_WAN_INTERFACE=lo\nNAT_METRICS_INTERFACE=lo\nNAT_CONNTRACK_MAX=262144\nNAT64_ENABLED=false\nNAT64_PREFIX=64:ff9b::/96\nNAT_RULESET=/etc/podmin/nat/nat.nft\nNAT_SYSCTL=/etc/sysctl.d/90-podmin-nat.conf\n"
  PATH=$work/stubs:$PATH run "$PODMIN_ROOT/opt/podmin/bin/nat.sh"
  [ "$status" -eq 0 ]
  [ "$(cat "$work/nft.log")" = "-f $PODMIN_ROOT/etc/podmin/nat/nat.nft" ]
  [ ! -e "$work/insmod.log" ]
  # NAT64 with the pinned archive: modules must be built for the running kernel.
  kver=$(uname -r)
  mkdir -p "$PODMIN_ROOT/usr/lib/modules/$kver/extra/podmin"
  : >"$PODMIN_ROOT/usr/lib/modules/$kver/extra/podmin/jool_common.ko"
  : >"$PODMIN_ROOT/usr/lib/modules/$kver/extra/podmin/jool.ko"
  printf '#!/bin/sh\necho "6.1.0-other SMP mod_unload"\n' >"$work/stubs/modinfo"
  chmod +x "$work/stubs/modinfo"
  put /opt/env/podmin-nat.env "NAT_WAN_INTERFACE=lo\nNAT_METRICS_INTERFACE=lo\nNAT_CONNTRACK_MAX=262144\nNAT64_ENABLED=true\nNAT64_PREFIX=64:ff9b::/96\nNAT64_POOL4_ADDRESS=10.0.1.5\nNAT64_JOOL=archive\nNAT_RULESET=/etc/podmin/nat/nat.nft\nNAT_SYSCTL=/etc/sysctl.d/90-podmin-nat.conf\n"
  PATH=$work/stubs:$PATH run "$PODMIN_ROOT/opt/podmin/bin/nat.sh"
  [ "$status" -ne 0 ]
  [[ $output == *"jool_common.ko was built for 6.1.0-other, not $kver"* ]]
  [ ! -e "$work/insmod.log" ]
  # A NAT64 interface that is not there (the stable ENI is not attached) stops it too.
  put /opt/env/podmin-nat.env "NAT_WAN_INTERFACE=lo\nNAT_METRICS_INTERFACE=lo\nNAT_CONNTRACK_MAX=262144\nNAT64_ENABLED=true\nNAT64_PREFIX=64:ff9b::/96\nNAT64_INTERFACE=podmin-absent0\nNAT64_POOL4_ADDRESS=10.0.1.5\nNAT64_JOOL=debian\nNAT_RULESET=/etc/podmin/nat/nat.nft\nNAT_SYSCTL=/etc/sysctl.d/90-podmin-nat.conf\n"
  PATH=$work/stubs:$PATH run "$PODMIN_ROOT/opt/podmin/bin/nat.sh"
  [ "$status" -ne 0 ]
  [[ $output == *"no NAT64 interface podmin-absent0"* ]]
  # A NAT64 interface needs its routing settings (checked before any route is touched).
  put /opt/env/podmin-nat.env "NAT_WAN_INTERFACE=lo\nNAT_METRICS_INTERFACE=lo\nNAT_CONNTRACK_MAX=262144\nNAT64_ENABLED=true\nNAT64_PREFIX=64:ff9b::/96\nNAT64_INTERFACE=lo\nNAT64_POOL4_ADDRESS=10.0.1.5\nNAT64_JOOL=debian\nNAT_RULESET=/etc/podmin/nat/nat.nft\nNAT_SYSCTL=/etc/sysctl.d/90-podmin-nat.conf\n"
  PATH=$work/stubs:$PATH run "$PODMIN_ROOT/opt/podmin/bin/nat.sh"
  [ "$status" -ne 0 ]
  [[ $output == *"NAT64_INTERFACE needs NAT64_IPV4_SUBNET, NAT64_IPV4_GATEWAY and NAT64_ROUTE_TABLE"* ]]
  # The routing settings are typed like every other key.
  put /opt/env/podmin-nat.env "NAT_WAN_INTERFACE=lo\nNAT_METRICS_INTERFACE=lo\nNAT_CONNTRACK_MAX=262144\nNAT64_ENABLED=true\nNAT64_PREFIX=64:ff9b::/96\nNAT64_INTERFACE=lo\nNAT64_IPV4_SUBNET=10.0.1.5/24\nNAT64_IPV4_GATEWAY=10.0.1\nNAT64_ROUTE_TABLE=253\nNAT64_POOL4_ADDRESS=10.0.1.5\nNAT64_JOOL=debian\nNAT_RULESET=/etc/podmin/nat/nat.nft\nNAT_SYSCTL=/etc/sysctl.d/90-podmin-nat.conf\n"
  PATH=$work/stubs:$PATH run "$PODMIN_ROOT/opt/podmin/bin/nat.sh"
  [ "$status" -ne 0 ]
  [[ $output == *"invalid value for NAT64_IPV4_SUBNET"* ]]
  [[ $output == *"invalid value for NAT64_IPV4_GATEWAY"* ]]
  [[ $output == *"invalid value for NAT64_ROUTE_TABLE"* ]]
}

@test "configure.sh refuses an invalid user-data.env and replaces nothing" {
  nat_root
  put /opt/podmin/etc/user-data.env 'PODMIN_KIND=nat\nPODMIN_CLUSTER=prod\nPODMIN_BUCKET=prod-bucket\nPODMIN_REGION=us-east-1\nPODMIN_ARCH=arm64\nNAT_IPV4_SOURCE_CIDRS=10.0.0.0/16\nNAT64_ENABLED=yes\n'
  run "$PODMIN_ROOT/opt/podmin/bin/configure.sh"
  [ "$status" -ne 0 ]
  [[ $output == *"invalid value for NAT64_ENABLED"* ]]
  [ ! -e "$PODMIN_ROOT/opt/env/podmin-nat.env" ]
  [ ! -s "$work/systemctl.log" ]
}

@test "update-mutable-env.sh rejects bad files and keeps the accepted mutable.env" {
  nat_root
  accepted=$(cat "$PODMIN_ROOT/opt/podmin/etc/mutable.env")
  upd=$PODMIN_ROOT/opt/podmin/bin/update-mutable-env.sh
  put /recv/mutable.env 'SSM_AGENT_ENABLED=False\n'
  run "$upd" --no-configure /recv/mutable.env
  [ "$status" -ne 0 ]
  put /recv/mutable.env 'NAT_METRICS_INTERFACE=ens6\nNAT_METRICS_INTERFACE=ens7\n'
  run "$upd" --no-configure /recv/mutable.env
  [[ $output == *"duplicate key"* ]]
  put /recv/mutable.env 'KUBE_LOG_LEVEL=2\n' # a node key: unknown on a NAT VM
  run "$upd" --no-configure /recv/mutable.env
  [[ $output == *"unknown key KUBE_LOG_LEVEL"* ]]
  put /recv/real.env 'NAT_METRICS_INTERFACE=ens6\n'
  ln -s real.env "$PODMIN_ROOT/recv/link.env"
  run "$upd" --no-configure /recv/link.env
  [[ $output == *"refusing symlink"* ]]
  run "$upd" --no-configure recv/real.env
  [[ $output == *"not an absolute normalized path"* ]]
  run "$upd" --no-configure /recv/../recv/real.env
  [[ $output == *"not an absolute normalized path"* ]]
  [ "$(cat "$PODMIN_ROOT/opt/podmin/etc/mutable.env")" = "$accepted" ]
  # A valid file merges: delivered keys replace, others stay.
  run "$upd" --no-configure /recv/real.env
  [ "$status" -eq 0 ]
  grep -qx 'NAT_METRICS_INTERFACE=ens6' "$PODMIN_ROOT/opt/podmin/etc/mutable.env"
  grep -qx 'SSM_AGENT_ENABLED=true' "$PODMIN_ROOT/opt/podmin/etc/mutable.env"
}

@test "restart.sh never drives the host's systemd under a root prefix" {
  unset SYSTEMCTL
  run "$VMCONFIG/bin/restart.sh" --enable kubelet
  [ "$status" -ne 0 ]
  [[ $output == *"refusing to drive the host's systemd"* ]]
  SYSTEMCTL=/bin/echo run --separate-stderr "$VMCONFIG/bin/restart.sh" --enable 'a b' --restart b --disable 'c'
  [ "$status" -eq 0 ]
  [ "${lines[0]}" = daemon-reload ]
  [ "${lines[1]}" = "disable --now c" ]
  [ "${lines[2]}" = "enable a b" ]
  [ "${lines[3]}" = "restart b" ]
  [ "${lines[4]}" = "start a" ]
  SYSTEMCTL=/bin/echo run "$VMCONFIG/bin/restart.sh" --enable 'kubelet;reboot'
  [ "$status" -ne 0 ]
}

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
  dep vmconfig "$work/vmconfig.tgz" >"$work/list"
  run "$work/vmc/bin/install.sh" --kind nat --deps-list "$work/list"
  [[ $output == *"missing dependency: jool"* ]]
  rm "$work/jool/modules/6.1.0-test/jool.ko"
  tar -czf "$work/jool.tgz" -C "$work/jool" bin modules
  nat_list "$work/jool.tgz" >"$work/list"
  run "$work/vmc/bin/install.sh" --kind nat --deps-list "$work/list"
  [ "$status" -ne 0 ]
  [[ $output == *"archive lacks modules/6.1.0-test/jool.ko"* ]]
  [ ! -e "$PODMIN_ROOT/opt/podmin/bin" ]
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

#!/usr/bin/env bash
# Builds the root filesystem the machine harness (tests/support/machine.ts) boots with
# systemd-nspawn: Debian bookworm, the release of the node AMI, made by mmdebstrap (variant minbase)
# with systemd as PID 1 and what the user-data and vmconfig's scripts (node and NAT kinds) call at
# boot, plus the files an installed system has and minbase lacks (/etc/hosts: containerd copies it
# into every Pod sandbox). Cached by a version key (this script's text, which holds the suite, variant and
# packages, and the mmdebstrap version) under $PODMIN_TEST_BIN/machine/rootfs-<key>/, so a warm run
# does nothing; a build goes into a temporary directory renamed into place, so an interrupted build
# never leaves a half-filled cache entry.
#
#   build_machine_rootfs.sh          builds when missing; prints the rootfs directory
#
# What the packages are for (minbase already has bash, coreutils, tar, gzip, findutils, diffutils,
# util-linux (flock, mount), passwd (useradd, groupadd), dpkg (dpkg-deb), mawk):
#   systemd systemd-sysv dbus  PID 1, systemctl (restart.sh), journald, the units
#   iproute2                   ip (bootstrap.sh, pod-network.sh); brings libbpf1, the agent's FFI
#   curl ca-certificates       the user-data's SigV4-signed downloads and IMDSv2 calls
#   kmod                       modprobe (containerd.service's ExecStartPre, nat.sh)
#   nftables procps            nft and sysctl (nat.sh, the NAT kind; Debian's cloud images have
#                              both: priority important)
# Needs root; installs Debian's mmdebstrap and systemd-container (systemd-nspawn) when missing.
set -euo pipefail

SUITE=bookworm
VARIANT=minbase
PACKAGES=(systemd systemd-sysv dbus iproute2 curl ca-certificates kmod nftables procps)
PODMIN_TEST_BIN=${PODMIN_TEST_BIN:-/opt/podmin-test/bin}
out_root=$PODMIN_TEST_BIN/machine

log() { printf 'build_machine_rootfs: %s\n' "$*" >&2; }

[[ $(id -u) -eq 0 ]] || {
  log "needs root (mmdebstrap --mode=root)"
  exit 1
}

missing=()
command -v mmdebstrap >/dev/null || missing+=(mmdebstrap)
command -v systemd-nspawn >/dev/null || missing+=(systemd-container)
if ((${#missing[@]})); then
  log "installing Debian packages: ${missing[*]}"
  apt-get update -qq
  # No recommends: systemd-container recommends libnss-mymachines, which edits the host's
  # /etc/nsswitch.conf.
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

mmdebstrap_version=$(dpkg-query -W -f '${Version}' mmdebstrap)
key=$(cat "${BASH_SOURCE[0]}" <(printf '%s\n' "$mmdebstrap_version") | sha256sum | cut -c1-16)
dest=$out_root/rootfs-$key
if [[ -x $dest/lib/systemd/systemd ]]; then
  printf '%s\n' "$dest"
  exit 0
fi

mkdir -p "$out_root"
work=$(mktemp -d "$out_root/.build.XXXXXX")
trap 'rm -rf "$work"' EXIT
log "building Debian $SUITE ($VARIANT + ${PACKAGES[*]}) into $dest"
start=$SECONDS
include=$(
  IFS=,
  echo "${PACKAGES[*]}"
)
mmdebstrap --quiet --mode=root --variant="$VARIANT" --include="$include" "$SUITE" "$work/rootfs" >&2
# What Debian's installer (and cloud-init on the AMI) write: the loopback names, a host name until
# the instance's, the VPC resolver's address (nothing answers there in the harness).
printf '%s\n' '127.0.0.1	localhost' '::1		localhost ip6-localhost ip6-loopback' \
  'ff02::1		ip6-allnodes' 'ff02::2		ip6-allrouters' >"$work/rootfs/etc/hosts"
echo localhost >"$work/rootfs/etc/hostname"
echo 'nameserver fd00:ec2::253' >"$work/rootfs/etc/resolv.conf"
chmod 0644 "$work/rootfs/etc/hosts" "$work/rootfs/etc/hostname" "$work/rootfs/etc/resolv.conf"
# A machine gets its identity at first boot (systemd writes /etc/machine-id when it is empty).
: >"$work/rootfs/etc/machine-id"
rm -f "$work/rootfs/var/lib/dbus/machine-id"
mv "$work/rootfs" "$dest"
log "built in $((SECONDS - start)) s: $(du -sh "$dest" | cut -f1)"
printf '%s\n' "$dest"

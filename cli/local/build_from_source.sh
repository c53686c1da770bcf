#!/usr/bin/env bash
# Builds the node programs (kubelet, containerd with its runc shim and ctr, crictl, CoreDNS) from
# the Go module proxy, at the versions given, cached by version under OUT_ROOT/<name>-v<version>/
# so a second run builds nothing:
#
#   KUBELET_VERSION=v1.36.3 CONTAINERD_VERSION=v2.1.5 CRICTL_VERSION=v1.34.0 \
#   COREDNS_VERSION=v1.12.1 build_from_source.sh OUT_ROOT [all|kubelet|containerd|crictl|coredns]
#
# `deno task demo --build-from-source` runs it with the catalogue's pins (the hosts that cannot
# download the vendors' releases), and tests/peers/build_node_peers.sh with the same pins for the
# node tests: one recipe for both. Needs Go (`go` on PATH, or /usr/local/go/bin).
#
# Recipes (measured on these machines):
# - kubelet: `go install` refuses k8s.io/kubernetes (replace directives into
#   ./staging). Download the module, copy it out, drop vendor/ and go.work, turn
#   each `k8s.io/NAME => ./staging/src/k8s.io/NAME` replace into a require of the
#   published `k8s.io/NAME v0.Y.Z`, then build ./cmd/kubelet (about 10 minutes on 2 cores).
# - containerd 2.1.x: `go install` refuses it (exclude directives); build the
#   downloaded module with the btrfs/devmapper/zfs snapshotters left out.
# - crictl and CoreDNS: `go install`, crictl with its version stamped (it reports "unknown"
#   otherwise).
set -euo pipefail

out_root=${1:?usage: build_from_source.sh OUT_ROOT [all|kubelet|containerd|crictl|coredns]}
what=${2:-all}
[[ -x /usr/local/go/bin/go ]] && PATH=$PATH:/usr/local/go/bin
command -v go >/dev/null || {
  echo "build_from_source: go is missing (install Debian's golang-go, or Go into /usr/local/go)" >&2
  exit 1
}
need_version() { # need_version NAME VALUE
  [[ $2 =~ ^v[0-9]+\.[0-9]+\.[0-9]+$ ]] || {
    echo "build_from_source: $1 must be vMAJOR.MINOR.PATCH, got '${2}'" >&2
    exit 2
  }
}
mkdir -p "$out_root"

# module_dir MODULE@VERSION: prints the downloaded module's directory.
module_dir() {
  GOFLAGS=-mod=mod go mod download -json "$1" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p'
}

# Each build writes into a temporary directory and renames it into place, so an
# interrupted build never leaves a half-filled cache entry.
publish() { # publish TMPDIR FINALDIR
  rm -rf "$2"
  mv "$1" "$2"
}

build_kubelet() {
  local dest="$out_root/kubelet-$KUBELET_VERSION"
  [[ -x "$dest/kubelet" ]] && return 0
  echo "build_from_source: building kubelet $KUBELET_VERSION (about 10 minutes on 2 cores)"
  local src work
  src=$(module_dir "k8s.io/kubernetes@$KUBELET_VERSION")
  work=$(mktemp -d)
  cp -r "$src" "$work/k8s"
  chmod -R u+w "$work/k8s"
  rm -rf "$work/k8s/vendor" "$work/k8s/go.work" "$work/k8s/go.work.sum"
  local staging="v0.${KUBELET_VERSION#v1.}"
  (
    cd "$work/k8s"
    # Every ./staging replace becomes a require of the published staging module.
    local names
    names=$(sed -n 's#^[[:space:]]*\(k8s.io/[^ ]*\) => ./staging/src/.*#\1#p' go.mod)
    for name in $names; do
      go mod edit -dropreplace="$name" -require="$name@$staging"
    done
    CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath \
      -ldflags "-s -w -X k8s.io/component-base/version.gitVersion=$KUBELET_VERSION" \
      -o "$work/out/kubelet" ./cmd/kubelet
  )
  publish "$work/out" "$dest"
  rm -rf "$work"
}

build_containerd() {
  local dest="$out_root/containerd-$CONTAINERD_VERSION"
  [[ -x "$dest/containerd" && -x "$dest/containerd-shim-runc-v2" && -x "$dest/ctr" ]] && return 0
  echo "build_from_source: building containerd $CONTAINERD_VERSION"
  local src work
  src=$(module_dir "github.com/containerd/containerd/v2@$CONTAINERD_VERSION")
  work=$(mktemp -d)
  cp -r "$src" "$work/containerd"
  chmod -R u+w "$work/containerd"
  (
    cd "$work/containerd"
    for cmd in containerd containerd-shim-runc-v2 ctr; do
      CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath -tags no_btrfs,no_devmapper,no_zfs \
        -ldflags "-s -w -X github.com/containerd/containerd/v2/version.Version=$CONTAINERD_VERSION" \
        -o "$work/out/$cmd" "./cmd/$cmd"
    done
  )
  publish "$work/out" "$dest"
  rm -rf "$work"
}

build_crictl() {
  local dest="$out_root/crictl-$CRICTL_VERSION"
  # A build without the version stamp (an older recipe) reports "unknown": rebuilt.
  [[ -x "$dest/crictl" && "$("$dest/crictl" --version 2>/dev/null)" == *"$CRICTL_VERSION"* ]] && return 0
  echo "build_from_source: building crictl $CRICTL_VERSION"
  local work
  work=$(mktemp -d)
  GOBIN="$work/out" CGO_ENABLED=0 GOFLAGS=-mod=mod go install \
    -ldflags "-s -w -X sigs.k8s.io/cri-tools/pkg/version.Version=$CRICTL_VERSION" \
    "sigs.k8s.io/cri-tools/cmd/crictl@$CRICTL_VERSION"
  publish "$work/out" "$dest"
  rm -rf "$work"
}

# coredns: the node's DNS server (Service names); `go install` works.
build_coredns() {
  local dest="$out_root/coredns-$COREDNS_VERSION"
  [[ -x "$dest/coredns" ]] && return 0
  echo "build_from_source: building coredns $COREDNS_VERSION (a few minutes on 2 cores)"
  local work
  work=$(mktemp -d)
  GOBIN="$work/out" CGO_ENABLED=0 GOFLAGS=-mod=mod go install "github.com/coredns/coredns@$COREDNS_VERSION"
  publish "$work/out" "$dest"
  rm -rf "$work"
}

case $what in
  kubelet) need_version KUBELET_VERSION "${KUBELET_VERSION:-}"; build_kubelet ;;
  containerd) need_version CONTAINERD_VERSION "${CONTAINERD_VERSION:-}"; build_containerd ;;
  crictl) need_version CRICTL_VERSION "${CRICTL_VERSION:-}"; build_crictl ;;
  coredns) need_version COREDNS_VERSION "${COREDNS_VERSION:-}"; build_coredns ;;
  all)
    for v in KUBELET_VERSION CONTAINERD_VERSION CRICTL_VERSION COREDNS_VERSION; do
      need_version "$v" "${!v:-}"
    done
    build_crictl; build_containerd; build_coredns; build_kubelet
    ;;
  *) echo "usage: $0 OUT_ROOT [all|kubelet|containerd|crictl|coredns]" >&2; exit 2 ;;
esac

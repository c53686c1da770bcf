#!/usr/bin/env bash
# Builds the real node peers the node tests run (kubelet, containerd 2.1.x with its
# runc shim and ctr, crictl, CoreDNS) from the Go module proxy, cached by version under
# $PODMIN_TEST_BIN/node/<name>-<version>/ so a warm run builds nothing.
#
# Recipes (measured on these machines):
# - kubelet: `go install` refuses k8s.io/kubernetes (replace directives into
#   ./staging). Download the module, copy it out, drop vendor/ and go.work, turn
#   each `k8s.io/NAME => ./staging/src/k8s.io/NAME` replace into a require of the
#   published `k8s.io/NAME v0.Y.Z`, then build ./cmd/kubelet.
# - containerd 2.1.x: `go install` refuses it (exclude directives); build the
#   downloaded module with the btrfs/devmapper/zfs snapshotters left out.
# - crictl: `go install` works.
set -euo pipefail

# The versions are the default catalogue's pins (pinned is tested), read through
# tests/support/node_peers.ts; KUBELET_VERSION etc. in the environment override them.
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
command -v deno >/dev/null || { echo "build_node_peers: deno is missing (it reads the pins)" >&2; exit 1; }
pins=$(cd "$here/../.." && deno run --quiet --no-lock --allow-read --allow-env tests/support/node_peers.ts)
declare -A pinned=()
while IFS='=' read -r key value; do
  [[ $key =~ ^(KUBELET|CONTAINERD|CRICTL|COREDNS)_VERSION$ && $value =~ ^v[0-9]+\.[0-9]+\.[0-9]+$ ]] ||
    { echo "build_node_peers: unexpected pin line: $key=$value" >&2; exit 1; }
  pinned[$key]=$value
done <<<"$pins"
((${#pinned[@]} == 4)) || { echo "build_node_peers: expected 4 pins, got ${#pinned[@]}" >&2; exit 1; }
KUBELET_VERSION=${KUBELET_VERSION:-${pinned[KUBELET_VERSION]}}
CONTAINERD_VERSION=${CONTAINERD_VERSION:-${pinned[CONTAINERD_VERSION]}}
CRICTL_VERSION=${CRICTL_VERSION:-${pinned[CRICTL_VERSION]}}
COREDNS_VERSION=${COREDNS_VERSION:-${pinned[COREDNS_VERSION]}}
PODMIN_TEST_BIN=${PODMIN_TEST_BIN:-/opt/podmin-test/bin}
[[ -x /usr/local/go/bin/go ]] && PATH=$PATH:/usr/local/go/bin
command -v go >/dev/null || { echo "build_node_peers: go is missing" >&2; exit 1; }

out_root="$PODMIN_TEST_BIN/node"
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
  echo "build_node_peers: building kubelet $KUBELET_VERSION (about 10 minutes on 2 cores)"
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
  echo "build_node_peers: building containerd $CONTAINERD_VERSION"
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
  echo "build_node_peers: building crictl $CRICTL_VERSION"
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
  echo "build_node_peers: building coredns $COREDNS_VERSION (a few minutes on 2 cores)"
  local work
  work=$(mktemp -d)
  GOBIN="$work/out" CGO_ENABLED=0 GOFLAGS=-mod=mod go install "github.com/coredns/coredns@$COREDNS_VERSION"
  publish "$work/out" "$dest"
  rm -rf "$work"
}

# podsapi: Podmin's own test client of kubelet's local Pods API (tests/peers/podsapi), cached
# by the digest of its sources.
build_podsapi() {
  local src key dest
  src=$here/podsapi
  key=$(cat "$src/go.mod" "$src/go.sum" "$src/main.go" | sha256sum | cut -c1-16)
  dest="$out_root/podsapi-$key"
  [[ -x "$dest/podsapi" ]] && return 0
  echo "build_node_peers: building podsapi ($key)"
  local work
  work=$(mktemp -d)
  (cd "$src" && CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath -o "$work/out/podsapi" .)
  publish "$work/out" "$dest"
  rm -rf "$work"
}

case "${1:-all}" in
  kubelet) build_kubelet ;;
  containerd) build_containerd ;;
  crictl) build_crictl ;;
  podsapi) build_podsapi ;;
  coredns) build_coredns ;;
  all) build_crictl; build_containerd; build_podsapi; build_coredns; build_kubelet ;;
  *) echo "usage: $0 [all|kubelet|containerd|crictl|podsapi|coredns]" >&2; exit 2 ;;
esac

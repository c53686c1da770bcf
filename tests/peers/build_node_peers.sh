#!/usr/bin/env bash
# Builds the real node peers the node tests run (kubelet, containerd 2.1.x with its
# runc shim and ctr, crictl, CoreDNS) from the Go module proxy, cached by version under
# $PODMIN_TEST_BIN/node/<name>-<version>/ so a warm run builds nothing. The recipes are the
# product's own (cli/local/build_from_source.sh, which `deno task demo --build-from-source`
# runs); this script adds the pins and Podmin's Pods API test client.
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

# Each build writes into a temporary directory and renames it into place, so an
# interrupted build never leaves a half-filled cache entry.
publish() { # publish TMPDIR FINALDIR
  rm -rf "$2"
  mv "$1" "$2"
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

from_source() {
  KUBELET_VERSION=$KUBELET_VERSION CONTAINERD_VERSION=$CONTAINERD_VERSION \
    CRICTL_VERSION=$CRICTL_VERSION COREDNS_VERSION=$COREDNS_VERSION \
    bash "$here/../../cli/local/build_from_source.sh" "$out_root" "$1"
}

case "${1:-all}" in
  kubelet | containerd | crictl | coredns) from_source "$1" ;;
  podsapi) build_podsapi ;;
  all) from_source all; build_podsapi ;;
  *) echo "usage: $0 [all|kubelet|containerd|crictl|podsapi|coredns]" >&2; exit 2 ;;
esac

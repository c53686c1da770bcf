#!/usr/bin/env bash
# Installs what Podmin's tests need on a Debian machine, idempotently.
# Run as root (CI is root); without root it only reports what is missing.
set -euo pipefail

missing=()
have() { command -v "$1" >/dev/null 2>&1; }

# Debian packages: tool -> package.
declare -A debs=(
  [curl]=curl
  [openssl]=openssl
  [dig]=bind9-dnsutils
  [jq]=jq
  [gcc]=gcc
  [skopeo]=skopeo
  [containerd]=containerd
  [runc]=runc
  [htpasswd]=apache2-utils
  [shellcheck]=shellcheck
  [strace]=strace
  [bats]=bats
  [nft]=nftables
  [ip]=iproute2
  [clang]=clang
  [llvm-strip]=llvm
  [bpftool]=bpftool
  [ethtool]=ethtool
  [/usr/lib/cni/ptp]=containernetworking-plugins
  [qemu-aarch64-static]=qemu-user-static
  # The shells whose completion scripts the CLI tests parse (`zsh -n`, `fish --no-execute`).
  [zsh]=zsh
  [fish]=fish
)
for tool in "${!debs[@]}"; do have "$tool" || missing+=("${debs[$tool]}"); done
# Libraries without an executable to look for.
dpkg -s libbpf-dev >/dev/null 2>&1 || missing+=(libbpf-dev)

if ((${#missing[@]})); then
  if [[ $(id -u) -eq 0 ]]; then
    echo "setup: installing Debian packages: ${missing[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
  else
    echo "setup: missing Debian packages (run as root to install): ${missing[*]}" >&2
  fi
fi

# moto (AWS API server) from PyPI.
if ! python3 -c 'import moto.server, flask_cors' >/dev/null 2>&1; then
  echo "setup: installing moto[server]"
  # A Debian system Python refuses pip installs (PEP 668) unless told otherwise.
  python3 -m pip install --quiet --disable-pip-version-check 'moto[server]>=5.1' 2>/dev/null ||
    python3 -m pip install --quiet --disable-pip-version-check --break-system-packages 'moto[server]>=5.1'
fi

# Registry peers built from the Go module proxy (pinned), into $PODMIN_TEST_BIN
# (tests/run.sh puts it on PATH): the OCI distribution-spec conformance suite
# and the CNCF distribution registry (an upstream for `podmin mirror`).
PODMIN_TEST_BIN=${PODMIN_TEST_BIN:-/opt/podmin-test/bin}
# The Go toolchain of these machines lives in /usr/local/go (not always on a service's PATH).
[[ -x /usr/local/go/bin/go ]] && PATH=$PATH:/usr/local/go/bin
declare -A gotools=(
  [oci-conformance]="github.com/opencontainers/distribution-spec/conformance@v0.0.0-20260831232431-97274622c111:conformance"
  [distribution-registry]="github.com/distribution/distribution/v3/cmd/registry@v3.1.2:registry"
  # An S3 server that keeps up with 1,000 simulated agents (the cluster-scale bench; moto serves
  # about 300 GETs/s). Its conditional writes are checked by the bench before it relies on them.
  [versitygw]="github.com/versity/versitygw/cmd/versitygw@v1.8.0:versitygw"
)
for tool in "${!gotools[@]}"; do
  spec=${gotools[$tool]}
  # Cached by version: the module@version a binary was built from is kept beside it.
  if [[ -x "$PODMIN_TEST_BIN/$tool" ]]; then
    built=$(cat "$PODMIN_TEST_BIN/.$tool.module" 2>/dev/null || true)
    [[ -z "$built" || "$built" == "$spec" ]] && continue
    echo "setup: $tool was built from $built; rebuilding from $spec"
  fi
  if ! have go; then
    echo "setup: go is missing; cannot build $tool" >&2
    continue
  fi
  module=${spec%:*} binary=${spec##*:}
  echo "setup: building $tool from $module"
  build=$(mktemp -d)
  GOBIN="$build" GOFLAGS=-mod=mod go install "$module"
  mkdir -p "$PODMIN_TEST_BIN"
  mv "$build/$binary" "$PODMIN_TEST_BIN/$tool"
  echo "$spec" >"$PODMIN_TEST_BIN/.$tool.module"
  rm -rf "$build"
done

# The real node's peers (kubelet, containerd 2.1, crictl, the Pods API client), built from the Go
# module proxy and cached by version under $PODMIN_TEST_BIN/node (a warm run builds nothing).
if have go; then
  PODMIN_TEST_BIN=$PODMIN_TEST_BIN bash "$(dirname "${BASH_SOURCE[0]}")/peers/build_node_peers.sh" all
else
  echo "setup: go is missing; cannot build the node peers" >&2
fi

# Real OpenTofu 1.10.10 and the AWS provider trimmed to the services the generated configuration
# uses, with its filesystem mirror and CLI configuration (the setup tests run real tofu on moto:
# tests/support/real_tofu.ts), cached by version under $PODMIN_TEST_BIN/tofu (a warm run builds
# nothing).
if have go; then
  PODMIN_TEST_BIN=$PODMIN_TEST_BIN bash "$(dirname "${BASH_SOURCE[0]}")/peers/build_tofu.sh" all
else
  echo "setup: go is missing; cannot build OpenTofu and the AWS provider" >&2
fi

# The machine harness's root filesystem (tests/support/machine.ts): Debian bookworm, the node
# AMI's release, cached by version under $PODMIN_TEST_BIN/machine (a warm run does nothing).
if [[ $(id -u) -eq 0 ]]; then
  PODMIN_TEST_BIN=$PODMIN_TEST_BIN bash "$(dirname "${BASH_SOURCE[0]}")/peers/build_machine_rootfs.sh" >/dev/null
else
  echo "setup: the machine root filesystem needs root (tests/peers/build_machine_rootfs.sh)" >&2
fi

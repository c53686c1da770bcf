#!/usr/bin/env bash
# Installs what Podmin's tests need on a Debian machine, idempotently.
# Run as root (CI is root); without root it only reports what is missing.
set -euo pipefail

missing=()
have() { command -v "$1" >/dev/null 2>&1; }

# Debian packages: tool -> package.
declare -A debs=(
  [curl]=curl
  [jq]=jq
)
for tool in "${!debs[@]}"; do have "$tool" || missing+=("${debs[$tool]}"); done

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
  python3 -m pip install --quiet --disable-pip-version-check 'moto[server]>=5.1'
fi

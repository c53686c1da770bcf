#!/usr/bin/env bash
# Builds Podmin's two programs.
#   bundle:  dist/podmin.js and dist/podmin-agent.js, single files run by `deno run -A`.
#   compile: dist/<arch>/podmin and dist/<arch>/podmin-agent for x86_64 and aarch64 Linux,
#            static executables made by `deno compile`; needs Deno's `denort` runtime
#            (DENORT_BIN, or $DENO_DIR/dl/release/v<version>/denort-<target>.zip).
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:-bundle}
mkdir -p dist

programs=("podmin:cli/main.ts" "podmin-agent:agent/main.ts")

case "$mode" in
bundle)
  for p in "${programs[@]}"; do
    name=${p%%:*} entry=${p#*:}
    deno bundle --quiet --platform deno --packages bundle -o "dist/${name}.js" "$entry"
    echo "built dist/${name}.js ($(wc -c <"dist/${name}.js") bytes)"
  done
  ;;
compile)
  version=$(deno --version | awk 'NR==1 {print $2}')
  deno_dir=${DENO_DIR:-$HOME/.cache/deno}
  for target in x86_64-unknown-linux-gnu aarch64-unknown-linux-gnu; do
    zip="$deno_dir/dl/release/v${version}/denort-${target}.zip"
    if [[ -z "${DENORT_BIN:-}" && ! -f "$zip" ]]; then
      echo "error: deno compile needs the denort runtime for ${target}, which is not available" >&2
      echo "hint: set DENORT_BIN to a denort binary of deno ${version}, or place ${zip}" >&2
      echo "hint: 'deno task bundle' builds single-file bundles that need no denort" >&2
      exit 1
    fi
    arch=${target%%-*}
    mkdir -p "dist/${arch}"
    for p in "${programs[@]}"; do
      name=${p%%:*} entry=${p#*:}
      deno compile --quiet --allow-all --target "$target" -o "dist/${arch}/${name}" "$entry"
      echo "built dist/${arch}/${name}"
    done
  done
  ;;
*)
  echo "usage: cli/build.sh bundle|compile" >&2
  exit 2
  ;;
esac

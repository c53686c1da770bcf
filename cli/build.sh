#!/usr/bin/env bash
# Builds Podmin's two programs into $PODMIN_DIST (default dist/), each stamped with the commit it
# was built from (`podmin --version`, `podmin-agent --version`), with a SHA256SUMS beside them.
#   bundle:  podmin.js (a launcher) with podmin-lib/, and podmin-agent.js, run by `deno run -A`
#            (every static import and embedded asset inside: vmconfig scripts, the eBPF object).
#            The CLI is code-split: podmin-lib/ holds its modules, each command's implementation
#            in modules of its own that load when it runs, so help and quick commands never parse
#            the AWS SDKs. The agent is one file: it loads all of itself anyway.
#   compile: the bundles, then <arch>/podmin and <arch>/podmin-agent for x86_64 and aarch64
#            Linux, made by `deno compile --target` from the bundles (podmin.js's modules
#            included: their imports are literal). Deno fetches its `denort`
#            runtime itself where it can; DENORT_BIN or a pre-seeded
#            $DENO_DIR/dl/release/v<version>/denort-<target>.zip work offline. Without any of them
#            it fails with one line naming what is missing and the alternative.
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:-bundle}
dist=${PODMIN_DIST:-dist}
mkdir -p "$dist"

programs=(podmin podmin-agent)
targets=(x86_64-unknown-linux-gnu aarch64-unknown-linux-gnu)

# The commit stamp: 12 hex digits, "-dirty" when tracked files differ from it; none outside git.
commit=''
if head=$(git rev-parse --short=12 HEAD 2>/dev/null); then
  commit=$head
  [[ -z $(git status --porcelain --untracked-files=no 2>/dev/null) ]] || commit+=-dirty
fi

stamp() {
  [[ -z $commit ]] || printf 'globalThis.PODMIN_BUILD_COMMIT = "%s";\n' "$commit"
}

# bundle_cli: dist/podmin-lib/ (the code-split CLI, entry main.js; see cli/bundle_trim.ts) and
# dist/podmin.js, the launcher that stamps the commit and calls main.js's main().
bundle_cli() {
  local lib="$dist/podmin-lib" tmp="$dist/.podmin-lib.tmp"
  rm -rf "$tmp"
  deno bundle --quiet --platform deno --packages bundle --code-splitting --outdir "$tmp" cli/main.ts
  if [[ ! -f $tmp/main.js ]]; then
    echo "error: deno bundle wrote no $tmp/main.js" >&2
    exit 1
  fi
  # Help and the quick commands need no `require`: their modules skip the runtime's node:module.
  deno run --quiet --allow-read="$tmp" --allow-write="$tmp" cli/bundle_trim.ts "$tmp" main.js
  rm -rf "$lib"
  mv "$tmp" "$lib"
  {
    stamp
    printf 'const { main } = await import("./podmin-lib/main.js");\n'
    printf 'Deno.exit(await main(Deno.args));\n'
  } >"$dist/.podmin.js.tmp"
  mv "$dist/.podmin.js.tmp" "$dist/podmin.js"
}

# bundle [quiet]: the stamped bundles; "quiet" prints nothing (compile reports at its end).
bundle() {
  local tmp="$dist/.podmin-agent.js.tmp"
  bundle_cli
  {
    stamp
    deno bundle --quiet --platform deno --packages bundle agent/main.ts
  } >"$tmp"
  mv "$tmp" "$dist/podmin-agent.js"
  [[ ${1:-} == quiet ]] && return
  local files bytes
  files=$(find "$dist/podmin-lib" -name '*.js' | wc -l)
  bytes=$(cat "$dist/podmin.js" "$dist"/podmin-lib/*.js | wc -c)
  echo "built $dist/podmin.js with $dist/podmin-lib/ ($files modules, $bytes bytes, commit ${commit:-none})"
  echo "built $dist/podmin-agent.js ($(wc -c <"$dist/podmin-agent.js") bytes, commit ${commit:-none})"
}

sums() {
  local files=()
  for f in podmin.js podmin-agent.js x86_64/podmin x86_64/podmin-agent aarch64/podmin \
    aarch64/podmin-agent; do
    [[ -f $dist/$f ]] && files+=("$f")
  done
  for f in "$dist"/podmin-lib/*.js; do
    [[ -f $f ]] && files+=("podmin-lib/${f##*/}")
  done
  (cd "$dist" && sha256sum "${files[@]}" >SHA256SUMS.tmp && mv SHA256SUMS.tmp SHA256SUMS)
  echo "wrote $dist/SHA256SUMS (${#files[@]} files)"
}

case "$mode" in
bundle)
  bundle
  sums
  ;;
compile)
  bundle quiet
  version=$(deno --version | awk 'NR==1 {print $2}')
  deno_dir=${DENO_DIR:-$HOME/.cache/deno}
  for target in "${targets[@]}"; do
    arch=${target%%-*}
    mkdir -p "$dist/${arch}"
    for name in "${programs[@]}"; do
      log="$dist/${arch}/${name}.compile.log"
      # --v8-flags: core/model/agent_runtime_settings.ts AGENT_V8_FLAGS (its test checks this copy).
      if ! deno compile --quiet --no-config --allow-all --v8-flags=--max-semi-space-size=1 \
        --target "$target" \
        -o "$dist/${arch}/${name}" "$dist/${name}.js" >"$log" 2>&1; then
        zip="$deno_dir/dl/release/v${version}/denort-${target}.zip"
        if [[ -z ${DENORT_BIN:-} && ! -f $zip ]]; then
          echo "error: deno compile has no denort runtime for ${target} (not downloadable here, no DENORT_BIN, no ${zip}; details: ${log}); alternative: 'deno task bundle', which podmin setup ships as the pinned Deno runtime plus the bundle" >&2
        else
          echo "error: deno compile failed for ${target} (${name}); details: ${log}" >&2
        fi
        exit 1
      fi
      rm -f "$log"
      echo "built $dist/${arch}/${name}"
    done
  done
  sums
  ;;
*)
  echo "usage: cli/build.sh bundle|compile" >&2
  exit 2
  ;;
esac

#!/usr/bin/env bash
# Builds Podmin's two programs into $PODMIN_DIST (default dist/), each stamped with the commit it
# was built from (`podmin --version`, `podmin-agent --version`), with a SHA256SUMS beside them.
#   bundle:  podmin.js and podmin-agent.js, single files run by `deno run -A` (every static
#            import and embedded asset inside: vmconfig scripts, the eBPF object).
#   compile: the bundles, then <arch>/podmin and <arch>/podmin-agent for x86_64 and aarch64
#            Linux, made by `deno compile --target` from the bundles. Deno fetches its `denort`
#            runtime itself where it can; DENORT_BIN or a pre-seeded
#            $DENO_DIR/dl/release/v<version>/denort-<target>.zip work offline. Without any of them
#            it fails with one line naming what is missing and the alternative.
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:-bundle}
dist=${PODMIN_DIST:-dist}
mkdir -p "$dist"

programs=("podmin:cli/main.ts" "podmin-agent:agent/main.ts")
targets=(x86_64-unknown-linux-gnu aarch64-unknown-linux-gnu)

# The commit stamp: 12 hex digits, "-dirty" when tracked files differ from it; none outside git.
commit=''
if head=$(git rev-parse --short=12 HEAD 2>/dev/null); then
  commit=$head
  [[ -z $(git status --porcelain --untracked-files=no 2>/dev/null) ]] || commit+=-dirty
fi

# bundle [quiet]: the stamped bundles; "quiet" prints nothing (compile reports at its end).
bundle() {
  local p name entry tmp
  for p in "${programs[@]}"; do
    name=${p%%:*} entry=${p#*:}
    tmp="$dist/.${name}.js.tmp"
    {
      [[ -z $commit ]] || printf 'globalThis.PODMIN_BUILD_COMMIT = "%s";\n' "$commit"
      deno bundle --quiet --platform deno --packages bundle "$entry"
    } >"$tmp"
    mv "$tmp" "$dist/${name}.js"
    [[ ${1:-} == quiet ]] ||
      echo "built $dist/${name}.js ($(wc -c <"$dist/${name}.js") bytes, commit ${commit:-none})"
  done
}

sums() {
  local files=()
  for f in podmin.js podmin-agent.js x86_64/podmin x86_64/podmin-agent aarch64/podmin \
    aarch64/podmin-agent; do
    [[ -f $dist/$f ]] && files+=("$f")
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
    for p in "${programs[@]}"; do
      name=${p%%:*}
      log="$dist/${arch}/${name}.compile.log"
      if ! deno compile --quiet --no-config --allow-all --target "$target" \
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

#!/usr/bin/env bash
# Builds the eBPF Service dataplane and embeds it in the agent.
#
#   bpf/build.sh          compile bpf/dataplane.c and (re)write bpf/dataplane_object.ts
#   bpf/build.sh --check  compile into a temporary directory and fail when the committed
#                         bpf/dataplane_object.ts differs (stale or not reproducible)
#
# The object is compiled from the repository root with relative paths and a debug prefix map,
# then stripped of DWARF (BTF and BTF.ext stay: libbpf needs them for the maps), so the bytes
# depend only on the sources and the clang version, not on the checkout location.
set -euo pipefail
cd "$(dirname "$0")/.."

mode=${1:-write}
case "$mode" in
write | --check) ;;
*)
  echo "usage: bpf/build.sh [--check]" >&2
  exit 2
  ;;
esac

for tool in clang llvm-strip deno; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "error: bpf/build.sh needs $tool (Debian: apt-get install clang llvm)" >&2
    exit 1
  fi
done

multiarch=$(gcc -print-multiarch 2>/dev/null || echo "$(uname -m)-linux-gnu")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

clang -O2 -g -target bpf -Wall -Werror \
  -I"/usr/include/${multiarch}" \
  -fdebug-prefix-map="$PWD=." \
  -c bpf/dataplane.c -o "$tmp/dataplane.o"
llvm-strip -g "$tmp/dataplane.o"

clang_version=$(clang --version | head -n 1)
deno run --quiet --allow-read --allow-write bpf/embed.ts \
  "$tmp/dataplane.o" "$tmp/dataplane_object.ts" "$clang_version"

if [[ "$mode" == "--check" ]]; then
  if cmp -s "$tmp/dataplane_object.ts" bpf/dataplane_object.ts; then
    echo "bpf/dataplane_object.ts is up to date"
  else
    echo "error: bpf/dataplane_object.ts differs from a fresh build of bpf/dataplane.c" >&2
    echo "hint: run bpf/build.sh and commit the result" >&2
    exit 1
  fi
else
  cp "$tmp/dataplane_object.ts" bpf/dataplane_object.ts
  echo "wrote bpf/dataplane_object.ts ($(wc -c <"$tmp/dataplane.o") byte object)"
fi

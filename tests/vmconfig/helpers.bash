# shellcheck shell=bash source-path=SCRIPTDIR
# Shared setup of vmconfig's bats tests: the libraries, and an isolated root per test.

VMCONFIG=$(cd "$BATS_TEST_DIRNAME/../../vmconfig" && pwd)
export VMCONFIG

# load_libs: sources vmconfig's libraries into the test.
load_libs() {
  # shellcheck source=../../vmconfig/lib/common.sh
  source "$VMCONFIG/lib/common.sh"
  # shellcheck source=../../vmconfig/lib/validate.sh
  source "$VMCONFIG/lib/validate.sh"
  # shellcheck source=../../vmconfig/lib/generate.sh
  source "$VMCONFIG/lib/generate.sh"
}

# new_root: a fresh PODMIN_ROOT with root-only account databases.
new_root() {
  PODMIN_ROOT=$BATS_TEST_TMPDIR/root
  export PODMIN_ROOT
  mkdir -p "$PODMIN_ROOT/etc" "$PODMIN_ROOT/opt/podmin/etc"
  printf 'root:x:0:0:root:/root:/bin/bash\n' >"$PODMIN_ROOT/etc/passwd"
  printf 'root:x:0:\npodmin:x:998:\n' >"$PODMIN_ROOT/etc/group"
  printf 'root:*:19000:0:99999:7:::\n' >"$PODMIN_ROOT/etc/shadow"
  printf 'root:*::\n' >"$PODMIN_ROOT/etc/gshadow"
}

# put PATH CONTENT: writes a file below the root (printf %b: escapes allowed).
put() {
  mkdir -p "$(dirname "$PODMIN_ROOT$1")"
  printf '%b' "$2" >"$PODMIN_ROOT$1"
}

#!/bin/bash
# Podmin vmconfig: validates a delivered mutable.env and merges it into the accepted one.
#
#   update-mutable-env.sh [--no-configure] FILE
#
# FILE must be an absolute normalized path to a regular file (no symlink anywhere below the
# root) holding only keys of this kind's mutable schema, each at most once and with a valid value.
# Its keys replace the accepted values; keys it omits keep theirs. The merged result is checked
# again, then replaces /opt/podmin/etc/mutable.env atomically and configure.sh applies it. On any
# error the accepted mutable.env is left untouched.
# shellcheck source-path=SCRIPTDIR
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=../lib/common.sh
source "$here/lib/common.sh"
# shellcheck source=../lib/validate.sh
source "$here/lib/validate.sh"
PODMIN_LOG_TAG=podmin-update-mutable-env

run_configure=true
if [[ ${1:-} == --no-configure ]]; then
  run_configure=false
  shift
fi
(($# == 1)) || die "usage: update-mutable-env.sh [--no-configure] FILE"
file=$1
check_root_prefix
is_abs_path "$file" || die "$file: not an absolute normalized path"

kind=
while IFS= read -r line; do
  [[ $line =~ ^PODMIN_KIND=(node|nat)$ ]] && kind=${BASH_REMATCH[1]}
done <"$(r "$PODMIN_ETC/user-data.env")"
[[ -n $kind ]] || die "no valid PODMIN_KIND in $PODMIN_ETC/user-data.env"

update() {
  # shellcheck disable=SC2034 # read through namerefs
  declare -A delivered=() merged=()
  env_read "$file" schema_mutable "$kind" delivered partial || die "rejected $file"
  env_read "$PODMIN_ETC/mutable.env" schema_mutable "$kind" merged ||
    die "the accepted mutable.env is invalid"
  local k
  # shellcheck disable=SC2034 # merged is rendered through a nameref
  for k in "${!delivered[@]}"; do merged[$k]=${delivered[$k]}; done
  local tmp=$PODMIN_ETC/.mutable.env.candidate
  {
    echo "# Podmin mutable settings: change with update-mutable-env.sh, then configure.sh applies them."
    env_render merged
  } | put_file "$tmp" root "$PODMIN_GROUP" 0640 || true
  # shellcheck disable=SC2034 # filled through a nameref
  declare -A check=()
  if ! env_read "$tmp" schema_mutable "$kind" check; then
    rm -f "$(r "$tmp")"
    die "the merged mutable.env is invalid"
  fi
  mv -f "$(r "$tmp")" "$(r "$PODMIN_ETC/mutable.env")"
  log "accepted ${#delivered[@]} key(s) from $file"
}
with_lock podmin-configure update
if [[ $run_configure == true ]]; then exec "$here/bin/configure.sh"; fi

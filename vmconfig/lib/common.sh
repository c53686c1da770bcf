# shellcheck shell=bash disable=SC2034 # constants for the scripts that source this file
# Podmin vmconfig: shared helpers (sourced by every script).
#
# Every path a script touches is "${PODMIN_ROOT}<real path>": PODMIN_ROOT is empty on a VM and
# a temporary directory in tests. File *contents* always name the real paths.

export LC_ALL=C
umask 022

PODMIN_ROOT=${PODMIN_ROOT:-}
PODMIN_LOG_TAG=${PODMIN_LOG_TAG:-podmin-vmconfig}

# Fixed locations (real paths; prefix with ${PODMIN_ROOT} to touch them).
readonly PODMIN_HOME=/opt/podmin
readonly PODMIN_ETC=/opt/podmin/etc
readonly PODMIN_ENV_DIR=/opt/env
readonly PODMIN_DEPS_DIR=/opt/deps
readonly PODMIN_STATE_DIR=/var/lib/podmin
readonly PODMIN_MANIFEST_DIR=/etc/podmin/manifests
readonly PODMIN_GROUP=podmin

log() { printf '%s: %s\n' "$PODMIN_LOG_TAG" "$*" >&2; }
die() {
  log "error: $*"
  exit 1
}

# r PATH: the path as seen by this process (under PODMIN_ROOT).
r() { printf '%s%s' "$PODMIN_ROOT" "$1"; }

# check_root_prefix: PODMIN_ROOT is empty or an absolute, normalized, existing directory.
check_root_prefix() {
  [[ -z $PODMIN_ROOT ]] && return 0
  is_abs_path "$PODMIN_ROOT" || die "PODMIN_ROOT must be an absolute normalized path: $PODMIN_ROOT"
  [[ -d $PODMIN_ROOT && ! -L $PODMIN_ROOT ]] || die "PODMIN_ROOT is not a directory: $PODMIN_ROOT"
}

# is_abs_path PATH: absolute, normalized (no //, ., .., trailing /), no control characters.
is_abs_path() {
  local p=$1
  [[ $p == /* && $p != */ && $p != *//* && $p != */./* && $p != */. && $p != */../* &&
    $p != */.. && ! $p =~ [[:cntrl:]] && ${#p} -le 4096 ]] || [[ $p == / ]]
}

# no_symlink_below_root PATH: no existing component of ${PODMIN_ROOT}PATH below the root is a
# symlink (writes never follow a link planted in a configuration directory).
no_symlink_below_root() {
  local p=$1 cur=$PODMIN_ROOT part
  is_abs_path "$p" || {
    log "not an absolute normalized path: $p"
    return 1
  }
  local -a parts
  IFS=/ read -r -a parts <<<"${p#/}"
  for part in "${parts[@]}"; do
    cur+=/$part
    if [[ -L $cur ]]; then
      log "refusing symlink: ${cur#"$PODMIN_ROOT"}"
      return 1
    fi
    [[ -e $cur ]] || return 0
  done
  return 0
}

# id_of passwd|group NAME: the numeric id of NAME in ${PODMIN_ROOT}/etc/passwd or /etc/group.
id_of() {
  local db=$1 name=$2 line
  [[ $name =~ ^[0-9]+$ ]] && {
    printf '%s' "$name"
    return 0
  }
  while IFS= read -r line; do
    if [[ ${line%%:*} == "$name" ]]; then
      IFS=: read -r _ _ line _ <<<"$line"
      printf '%s' "$line"
      return 0
    fi
  done <"$(r "/etc/$db")"
  log "no such ${db/passwd/user}: $name"
  return 1
}

# owner_ids OWNER GROUP: prints "UID:GID" resolved inside the root.
owner_ids() {
  local u g
  u=$(id_of passwd "$1") || return 1
  g=$(id_of group "$2") || return 1
  printf '%s:%s' "$u" "$g"
}

# ensure_dir PATH OWNER GROUP MODE: creates missing components (root:root 0755) and sets the
# owner and mode of PATH itself.
ensure_dir() {
  local p=$1 ids
  no_symlink_below_root "$p" || return 1
  ids=$(owner_ids "$2" "$3") || return 1
  mkdir -p "$(r "$p")"
  chown "$ids" "$(r "$p")"
  chmod "$4" "$(r "$p")"
}

# put_file PATH OWNER GROUP MODE < CONTENT: atomically replaces PATH when its content, owner or
# mode differ. Returns 0 when the file changed, 1 when it was already up to date.
put_file() {
  local p=$1 mode=$4 ids dest tmp
  no_symlink_below_root "$p" || die "unsafe destination $p"
  ids=$(owner_ids "$2" "$3") || die "cannot resolve owner of $p"
  dest=$(r "$p")
  mkdir -p "${dest%/*}"
  tmp=$(mktemp "${dest%/*}/.${dest##*/}.XXXXXX")
  cat >"$tmp"
  chown "$ids" "$tmp"
  chmod "$mode" "$tmp"
  if [[ -f $dest && ! -L $dest ]] && cmp -s "$tmp" "$dest" &&
    [[ $(stat -c '%u:%g %a' "$dest") == "$ids $(stat -c '%a' "$tmp")" ]]; then
    rm -f "$tmp"
    return 1
  fi
  mv -f "$tmp" "$dest"
  return 0
}

# install_file SRC PATH OWNER GROUP MODE: put_file with the content of SRC (a regular file).
install_file() {
  [[ -f $1 && ! -L $1 ]] || die "not a regular file: $1"
  put_file "$2" "$3" "$4" "$5" <"$1"
}

# with_lock NAME CMD...: runs CMD holding an exclusive lock (one configure at a time).
with_lock() {
  local name=$1
  shift
  mkdir -p "$(r /run/lock)"
  (
    flock -w 300 9 || die "timed out waiting for lock $name"
    "$@"
  ) 9>>"$(r "/run/lock/$name.lock")"
}

#!/bin/bash
# Podmin vmconfig: enables and (re)starts the services configure.sh maintains.
#
#   restart.sh --enable "SVC..." [--restart "SVC..."] [--disable "SVC..."]
#
# Enabled services are started (a no-op when running); those in --restart are restarted because
# their configuration changed; --disable stops and disables. SYSTEMCTL names the systemctl to use
# (tests point it at a recorder; PODMIN_ROOT alone never reaches the host's systemd).
# shellcheck source-path=SCRIPTDIR
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=../lib/common.sh
source "$here/lib/common.sh"
PODMIN_LOG_TAG=podmin-restart

enable='' restart='' disable=''
while (($#)); do
  case $1 in
  --enable) enable=${2:-} && shift 2 ;;
  --restart) restart=${2:-} && shift 2 ;;
  --disable) disable=${2:-} && shift 2 ;;
  *) die "unknown argument: $1" ;;
  esac
done
if [[ -z ${SYSTEMCTL:-} && -n $PODMIN_ROOT ]]; then
  die "PODMIN_ROOT is set: refusing to drive the host's systemd (set SYSTEMCTL)"
fi
systemctl=${SYSTEMCTL:-systemctl}

check_names() {
  local s
  for s in "$@"; do [[ $s =~ ^[a-z0-9][a-z0-9-]{0,63}$ ]] || die "invalid service name: $s"; done
}
read -r -a enable_list <<<"$enable"
read -r -a restart_list <<<"$restart"
read -r -a disable_list <<<"$disable"
check_names "${enable_list[@]}" "${restart_list[@]}" "${disable_list[@]}"

declare -A changed=()
for s in "${restart_list[@]}"; do changed[$s]=1; done
start_list=()
for s in "${enable_list[@]}"; do [[ -n ${changed[$s]:-} ]] || start_list+=("$s"); done

"$systemctl" daemon-reload
if ((${#disable_list[@]})); then "$systemctl" disable --now "${disable_list[@]}"; fi
if ((${#enable_list[@]})); then "$systemctl" enable "${enable_list[@]}"; fi
if ((${#restart_list[@]})); then
  log "restarting ${restart_list[*]}"
  "$systemctl" restart "${restart_list[@]}"
fi
if ((${#start_list[@]})); then "$systemctl" start "${start_list[@]}"; fi

#!/bin/bash
# Podmin vmconfig: installs verified dependency files with fixed owners and modes.
#
#   install.sh --kind node|nat --deps-list FILE
#
# FILE lists the verified dependency files, one per line:
# "NAME VERSION SHA256 SIZE FILE". Every archive is unpacked and checked (regular files and
# directories only, no absolute or '..' member names, every expected member present) before the
# first file is installed. Re-running is harmless: unchanged files are left alone.
#
# Node kind: the agent is either "podmin-agent" (a compiled binary) or the runtime-plus-bundle
# pair "deno" (the pinned Deno runtime) and "podmin-agent-bundle" (the single-file bundle); for
# the pair, /usr/local/bin/podmin-agent is a launcher that runs the bundle with the runtime, so
# the podmin-agent unit starts the agent the same way in both cases.
#
# NAT kind: "jool" (a tar.gz with bin/jool and modules/<kernel-release>/{jool_common,jool}.ko) is
# optional. Without it, configure.sh installs Debian's jool-dkms and jool-tools with apt-get
# when NAT64 is enabled (after bootstrap has attached the NAT64 ENI).
# shellcheck source-path=SCRIPTDIR
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=../lib/common.sh
source "$here/lib/common.sh"
# shellcheck source=../lib/validate.sh
source "$here/lib/validate.sh"
PODMIN_LOG_TAG=podmin-install

kind='' deps_list=''
while (($#)); do
  case $1 in
  --kind) kind=${2:-} && shift 2 ;;
  --deps-list) deps_list=${2:-} && shift 2 ;;
  *) die "unknown argument: $1" ;;
  esac
done
is_kind "$kind" || die "--kind must be node or nat"
[[ -f $deps_list ]] || die "usage: install.sh --kind KIND --deps-list FILE"
check_root_prefix

# Dependencies per kind: required ones, then optional ones.
declare -A required=() optional=([amazon-ssm-agent]=1)
case $kind in
node)
  for n in vmconfig containerd runc cni-plugins crictl kubelet coredns; do required[$n]=1; done
  for n in podmin-agent deno podmin-agent-bundle fluent-bit; do optional[$n]=1; done
  ;;
nat)
  required[vmconfig]=1
  optional[jool]=1
  ;;
esac

declare -A dep_file=() dep_version=() dep_sha=()
while read -r name version sha size file extra; do
  [[ -z ${name:-} ]] && continue
  [[ -z ${extra:-} ]] || die "malformed dependency line for $name"
  [[ -n ${required[$name]:-}${optional[$name]:-} ]] || die "unknown dependency for kind $kind: $name"
  [[ -z ${dep_file[$name]:-} ]] || die "duplicate dependency: $name"
  [[ $version =~ ^[A-Za-z0-9][A-Za-z0-9._+~-]{0,63}$ ]] || die "invalid version of $name: $version"
  [[ $sha =~ ^[0-9a-f]{64}$ && $size =~ ^[0-9]+$ && -f $file && ! -L $file ]] ||
    die "invalid dependency line for $name"
  dep_file[$name]=$file dep_version[$name]=$version dep_sha[$name]=$sha
done <"$deps_list"
for n in "${!required[@]}"; do [[ -n ${dep_file[$n]:-} ]] || die "missing dependency: $n"; done
agent_runtime=false
if [[ $kind == node ]]; then
  if [[ -n ${dep_file[podmin-agent]:-} ]]; then
    [[ -z ${dep_file[deno]:-}${dep_file[podmin-agent-bundle]:-} ]] ||
      die "podmin-agent comes either compiled or as deno + podmin-agent-bundle, not both"
  else
    [[ -n ${dep_file[deno]:-} && -n ${dep_file[podmin-agent-bundle]:-} ]] ||
      die "missing dependency: podmin-agent (or deno and podmin-agent-bundle)"
    agent_runtime=true
  fi
fi

scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT

# unpack NAME FORMAT: unpacks dependency NAME into $scratch/NAME and checks its members.
unpack() {
  local name=$1 format=$2 file=${dep_file[$1]} dir=$scratch/$1 member
  mkdir "$dir"
  case $format in
  raw)
    cp "$file" "$dir/$name"
    return 0
    ;;
  tgz) tar -tzf "$file" >"$dir.list" || die "$name: not a gzip-compressed tar archive" ;;
  deb)
    dpkg-deb --fsys-tarfile "$file" >"$dir.tar" 2>/dev/null || die "$name: not a Debian package"
    tar -tf "$dir.tar" >"$dir.list" || die "$name: unreadable package contents"
    ;;
  esac
  while IFS= read -r member; do
    if [[ $member == /* || $member =~ (^|/)\.\.(/|$) ]] || has_control_chars "$member"; then
      die "$name: unsafe member name in archive: $member"
    fi
  done <"$dir.list"
  case $format in
  tgz) tar -xzf "$file" -C "$dir" --no-same-owner --no-same-permissions ;;
  deb) tar -xf "$dir.tar" -C "$dir" --no-same-owner --no-same-permissions ;;
  esac
  member=$(find "$dir" ! -type f ! -type d -print -quit)
  [[ -z $member ]] || die "$name: archive holds a link or special file: ${member#"$dir"/}"
}

# member NAME PATH: prints the unpacked file PATH of dependency NAME (also accepts "./PATH").
member() {
  local f=$scratch/$1/$2
  [[ -f $f ]] || die "$1 ${dep_version[$1]}: archive lacks $2"
  printf '%s' "$f"
}

# --- 1. unpack and check everything ------------------------------------------------------------
declare -A formats=([containerd]=tgz [runc]=raw [cni-plugins]=tgz [crictl]=tgz [kubelet]=raw
  [coredns]=tgz [podmin-agent]=raw [deno]=raw [podmin-agent-bundle]=raw [amazon-ssm-agent]=deb [fluent-bit]=deb [jool]=tgz [vmconfig]=tgz)
for n in "${!dep_file[@]}"; do unpack "$n" "${formats[$n]}"; done

declare -a plan=() # "SRC DEST MODE" entries, all checked before anything is installed
add() { plan+=("$(member "$1" "$2")|$3|$4"); }
case $kind in
node)
  for b in containerd containerd-shim-runc-v2 ctr; do add containerd "bin/$b" "/usr/local/bin/$b" 0755; done
  add runc runc /usr/local/sbin/runc 0755
  for b in ptp host-local loopback; do add cni-plugins "$b" "/opt/cni/bin/$b" 0755; done
  add crictl crictl /usr/local/bin/crictl 0755
  add kubelet kubelet /usr/local/bin/kubelet 0755
  add coredns coredns /usr/local/bin/coredns 0755
  if [[ $agent_runtime == true ]]; then
    log "podmin-agent: runtime-plus-bundle (deno ${dep_version[deno]}, bundle ${dep_version[podmin-agent-bundle]})"
    add deno deno /usr/local/lib/podmin/deno 0755
    add podmin-agent-bundle podmin-agent-bundle /usr/local/lib/podmin/podmin-agent.js 0644
    cat >"$scratch/podmin-agent-launcher" <<'EOT'
#!/bin/sh
# Podmin: podmin-agent as the pinned Deno runtime running the agent bundle (runtime-plus-bundle
# distribution). Installed by vmconfig's install.sh; do not edit.
export DENO_DIR=/var/lib/podmin/deno DENO_NO_UPDATE_CHECK=1 DENO_NO_PROMPT=1
exec /usr/local/lib/podmin/deno run --allow-all --no-config --no-lock --v8-flags=--max-semi-space-size=1 /usr/local/lib/podmin/podmin-agent.js "$@"
EOT
    plan+=("$scratch/podmin-agent-launcher|/usr/local/bin/podmin-agent|0755")
  else
    add podmin-agent podmin-agent /usr/local/bin/podmin-agent 0755
  fi
  # Fluent Bit (--otel-logs): the vendor's .deb keeps its program in opt/fluent-bit/bin/.
  if [[ -n ${dep_file[fluent-bit]:-} ]]; then
    add fluent-bit opt/fluent-bit/bin/fluent-bit /opt/fluent-bit/bin/fluent-bit 0755
  fi
  ;;
nat)
  if [[ -n ${dep_file[jool]:-} ]]; then
    log "jool: installing the pinned archive jool ${dep_version[jool]}"
    add jool bin/jool /usr/local/sbin/jool 0755
    kernels=0
    for d in "$scratch"/jool/modules/*/; do
      [[ -d $d ]] || continue
      kver=$(basename "$d")
      [[ $kver =~ ^[A-Za-z0-9._+-]{1,64}$ ]] || die "jool: invalid kernel release directory $kver"
      for m in jool_common jool; do
        add jool "modules/$kver/$m.ko" "/usr/lib/modules/$kver/extra/podmin/$m.ko" 0644
      done
      kernels=$((kernels + 1))
    done
    ((kernels > 0)) || die "jool: archive holds no modules/<kernel-release>/ directory"
  else
    log "jool: no pinned archive; configure.sh installs Debian's jool-dkms and jool-tools if NAT64 is on"
  fi
  ;;
esac
if [[ -n ${dep_file[amazon-ssm-agent]:-} ]]; then
  for b in amazon-ssm-agent ssm-agent-worker ssm-document-worker ssm-session-worker; do
    add amazon-ssm-agent "usr/bin/$b" "/usr/bin/$b" 0755
  done
  [[ -f $scratch/amazon-ssm-agent/usr/bin/ssm-session-logger ]] &&
    add amazon-ssm-agent usr/bin/ssm-session-logger /usr/bin/ssm-session-logger 0755
fi
# vmconfig itself (from its checked archive): scripts, libraries and systemd units.
source_dir=$scratch/vmconfig
for f in "$source_dir"/bin/*.sh; do plan+=("$f|$PODMIN_HOME/bin/${f##*/}|0755"); done
for f in "$source_dir"/lib/*.sh; do plan+=("$f|$PODMIN_HOME/lib/${f##*/}|0644"); done
case $kind in
node) units=(containerd kubelet podmin-agent podmin-coredns podmin-pod-network) ;;
nat) units=(podmin-nat) ;;
esac
# A unit is installed only with the program it starts.
[[ -n ${dep_file[fluent-bit]:-} ]] && units+=(podmin-fluent-bit)
[[ -n ${dep_file[amazon-ssm-agent]:-} ]] && units+=(amazon-ssm-agent)
for u in "${units[@]}"; do
  [[ -f $source_dir/units/$u.service ]] || die "vmconfig lacks units/$u.service"
  plan+=("$source_dir/units/$u.service|/etc/systemd/system/$u.service|0644")
done
for entry in "${plan[@]}"; do
  IFS='|' read -r _ dest _ <<<"$entry"
  no_symlink_below_root "$dest" || die "unsafe install destination $dest"
done

# --- 2. users and groups -----------------------------------------------------------------------
prefix_args=()
[[ -n $PODMIN_ROOT ]] && prefix_args=(--prefix "$PODMIN_ROOT")
if ! id_of group "$PODMIN_GROUP" >/dev/null 2>&1; then
  groupadd --system "${prefix_args[@]}" "$PODMIN_GROUP"
  log "created system group $PODMIN_GROUP"
fi
if ! id_of passwd podmin >/dev/null 2>&1; then
  useradd --system "${prefix_args[@]}" --gid "$PODMIN_GROUP" --no-create-home \
    --home-dir "$PODMIN_STATE_DIR" --shell /usr/sbin/nologin --comment "Podmin" podmin
  log "created system user podmin"
fi

# --- 3. directories and files with fixed owners and modes --------------------------------------
ensure_dir /opt root root 0755
ensure_dir "$PODMIN_HOME" root root 0755
ensure_dir "$PODMIN_HOME/bin" root root 0755
ensure_dir "$PODMIN_HOME/lib" root root 0755
ensure_dir "$PODMIN_ETC" root "$PODMIN_GROUP" 0750
ensure_dir "$PODMIN_ENV_DIR" root "$PODMIN_GROUP" 0750
ensure_dir "$PODMIN_DEPS_DIR" root root 0750
ensure_dir "$PODMIN_STATE_DIR" podmin "$PODMIN_GROUP" 0750
ensure_dir /etc/systemd/system root root 0755
ensure_dir /etc/podmin root root 0755
if [[ $kind == node ]]; then
  ensure_dir /usr/local/bin root root 0755
  ensure_dir /usr/local/sbin root root 0755
  if [[ $agent_runtime == true ]]; then
    ensure_dir /usr/local/lib root root 0755
    ensure_dir /usr/local/lib/podmin root root 0755
  fi
  ensure_dir /opt/cni/bin root root 0755
  ensure_dir /etc/cni/net.d root root 0755
  ensure_dir /etc/containerd root root 0755
  ensure_dir /etc/containerd/certs.d root root 0755
  ensure_dir /etc/podmin/kubelet root root 0755
  ensure_dir /etc/podmin/coredns root root 0755
  ensure_dir "$PODMIN_MANIFEST_DIR" root "$PODMIN_GROUP" 0750
  ensure_dir /var/lib/kubelet root root 0700
  if [[ -n ${dep_file[fluent-bit]:-} ]]; then
    ensure_dir /opt/fluent-bit root root 0755
    ensure_dir /opt/fluent-bit/bin root root 0755
  fi
else
  ensure_dir /usr/local/sbin root root 0755
  ensure_dir /etc/podmin/nat root root 0755
fi
changed=0
for entry in "${plan[@]}"; do
  IFS='|' read -r src dest mode <<<"$entry"
  install_file "$src" "$dest" root root "$mode" && changed=$((changed + 1))
done

# The installed set, for configure.sh (e.g. the containerd version picks the config schema).
{
  for n in $(printf '%s\n' "${!dep_version[@]}" | sort); do
    printf '%s %s %s\n' "$n" "${dep_version[$n]}" "${dep_sha[$n]}"
  done
} | put_file "$PODMIN_ETC/dependencies.list" root "$PODMIN_GROUP" 0640 || true
log "installed ${#plan[@]} files ($changed changed) for kind $kind"

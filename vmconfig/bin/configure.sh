#!/bin/bash
# Podmin vmconfig: validates the layered env files and generates every service's configuration.
#
#   configure.sh
#
# Layers (disjoint key sets, each validated strictly before anything is generated):
#   /opt/podmin/etc/user-data.env  immutable, written by the user-data on first boot
#   /opt/podmin/etc/detected.env   immutable, written by bootstrap.sh on the first configure run
#   /opt/podmin/etc/mutable.env    created by bootstrap.sh, changed by update-mutable-env.sh
# Outputs: /opt/env/<service>.env and the services' configuration files. Only files whose content
# changed are replaced (atomically) and only the services they feed are restarted, so running
# configure.sh again is a no-op. Nothing is replaced when any layer is invalid.
#
# NAT kind with NAT64: Jool comes from the pinned "jool" dependency when there is one (installed
# by install.sh), else from Debian's jool-dkms and jool-tools, installed here with apt-get once
# per kernel release (after bootstrap attached the NAT64 ENI). APT_GET selects the apt-get (tests
# point it at a recorder; PODMIN_ROOT alone never reaches the host's apt-get);
# PODMIN_APT_RETRY_SECONDS the pause between its three attempts (default 10).
# shellcheck source-path=SCRIPTDIR
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=../lib/common.sh
source "$here/lib/common.sh"
# shellcheck source=../lib/validate.sh
source "$here/lib/validate.sh"
# shellcheck source=../lib/generate.sh
source "$here/lib/generate.sh"
PODMIN_LOG_TAG=podmin-configure

# read_kind: PODMIN_KIND from user-data.env (the full validation follows with the kind's schema).
read_kind() {
  local line
  env_check_file "$PODMIN_ETC/user-data.env" || return 1
  while IFS= read -r line; do
    if [[ $line =~ ^PODMIN_KIND=(node|nat)$ ]]; then
      printf '%s' "${BASH_REMATCH[1]}"
      return 0
    fi
  done <"$(r "$PODMIN_ETC/user-data.env")"
  log "$PODMIN_ETC/user-data.env: PODMIN_KIND must be node or nat"
  return 1
}

# dependency_version NAME: the installed version of a dependency (dependencies.list).
dependency_version() {
  local name version
  env_check_file "$PODMIN_ETC/dependencies.list" >/dev/null || return 1
  while read -r name version _; do
    if [[ $name == "$1" && $version =~ ^[A-Za-z0-9][A-Za-z0-9._+~-]{0,63}$ ]]; then
      printf '%s' "$version"
      return 0
    fi
  done <"$(r "$PODMIN_ETC/dependencies.list")"
  return 1
}

# jool_from_debian: Jool from Debian (no pinned jool dependency): jool-dkms builds the modules
# for the running kernel (hence its headers), jool-tools brings /usr/bin/jool. apt verifies the
# archive's signatures. Once per kernel release (a marker in the state directory).
jool_from_debian() {
  local kver marker=$PODMIN_STATE_DIR/jool-debian.installed packages attempt apt
  kver=$(uname -r)
  [[ $kver =~ ^[A-Za-z0-9][A-Za-z0-9._+~-]{0,63}$ ]] || die "unexpected kernel release: $kver"
  packages="jool-dkms jool-tools linux-headers-$kver"
  if [[ -f $(r "$marker") && $(<"$(r "$marker")") == "$packages" ]]; then
    log "Jool: Debian's packages, already installed ($packages)"
    return 0
  fi
  if [[ -z ${APT_GET:-} && -n $PODMIN_ROOT ]]; then
    die "PODMIN_ROOT is set: refusing to run the host's apt-get (set APT_GET)"
  fi
  apt=${APT_GET:-apt-get}
  local pause=${PODMIN_APT_RETRY_SECONDS:-10}
  is_uint_range "$pause" 0 600 || die "invalid PODMIN_APT_RETRY_SECONDS"
  log "Jool: no pinned jool dependency; installing Debian's $packages with apt-get"
  local -a opts=(-q -o DPkg::Lock::Timeout=300 -o Acquire::Retries=5)
  for attempt in 1 2 3; do
    # shellcheck disable=SC2086 # $packages: three package names
    if DEBIAN_FRONTEND=noninteractive "$apt" "${opts[@]}" update >&2 &&
      DEBIAN_FRONTEND=noninteractive "$apt" "${opts[@]}" -y --no-install-recommends \
        install $packages >&2; then
      printf '%s\n' "$packages" | put_file "$marker" root root 0644 || true
      log "Jool: installed $packages from Debian"
      return 0
    fi
    log "apt-get failed (attempt $attempt of 3)"
    ((attempt == 3)) || sleep "$pause"
  done
  die "could not install Jool from Debian ($packages)"
}

configure() {
  check_root_prefix
  local kind
  kind=$(read_kind) || die "invalid $PODMIN_ETC/user-data.env"
  declare -A ud=() det=() mut=() cfg=()
  env_read "$PODMIN_ETC/user-data.env" schema_user_data "$kind" ud || die "invalid user-data.env"
  env_defaults schema_user_data "$kind" ud

  if [[ ! -e $(r "$PODMIN_ETC/detected.env") ]]; then
    log "first run: bootstrap"
    local pool4='' sources=''
    if [[ ${ud[NAT64_ENABLED]:-} == true ]]; then
      pool4=${ud[NAT64_POOL4_ADDRESS]:-} sources=${ud[NAT64_SOURCE_IPV6_CIDRS]:-}
    fi
    POD_ENI_WAIT_SECONDS=${ud[POD_ENI_WAIT_SECONDS]:-300} NAT64_POOL4_ADDRESS=$pool4 \
      NAT64_SOURCE_IPV6_CIDRS=$sources \
      "$here/bin/bootstrap.sh" "$kind" "${ud[PODMIN_REGION]}" || die "bootstrap failed"
  fi
  env_read "$PODMIN_ETC/detected.env" schema_detected "$kind" det || die "invalid detected.env"
  env_read "$PODMIN_ETC/mutable.env" schema_mutable "$kind" mut || die "invalid mutable.env"
  env_defaults schema_mutable "$kind" mut
  local k
  for k in "${!ud[@]}"; do cfg[$k]=${ud[$k]}; done
  for k in "${!det[@]}"; do cfg[$k]=${det[$k]}; done
  for k in "${!mut[@]}"; do cfg[$k]=${mut[$k]}; done

  local -a services=() restart=() disable=()
  local first_run=false
  [[ -e $(r "$PODMIN_STATE_DIR/configured") ]] || first_run=true
  # emit SERVICE PATH OWNER GROUP MODE < CONTENT: writes PATH; SERVICE restarts when it changed.
  emit() {
    if put_file "$2" "$3" "$4" "$5"; then
      log "updated $2"
      [[ $1 != - ]] && restart+=("$1")
    fi
    return 0
  }
  # env_file SERVICE KEY=VALUE...: /opt/env/SERVICE.env.
  env_file() {
    local svc=$1
    shift
    emit "$svc" "$PODMIN_ENV_DIR/$svc.env" root "$PODMIN_GROUP" 0640 < <(
      printf '%s\n' "# Podmin: generated by configure.sh from the layered env files. Do not edit." "$@"
    )
  }

  if [[ $kind == node ]]; then
    node_rules cfg || die "invalid node configuration"
    local containerd_version kubelet_version gid
    containerd_version=$(dependency_version containerd) || die "containerd is not installed"
    kubelet_version=$(dependency_version kubelet) || die "kubelet is not installed"
    version_at_least "$kubelet_version" 1 30 || die "unsupported kubelet $kubelet_version"
    version_at_least "$containerd_version" 1 6 || die "unsupported containerd $containerd_version"
    gid=$(id_of group "$PODMIN_GROUP") || die "group $PODMIN_GROUP is missing"
    services=(podmin-pod-network containerd kubelet podmin-agent podmin-coredns)

    env_file podmin-pod-network "NODE_INTERFACE=${cfg[DETECTED_NODE_INTERFACE]}" \
      "POD_INTERFACE=${cfg[DETECTED_POD_INTERFACE]}" "POD_PREFIX=${cfg[DETECTED_POD_PREFIX]}" \
      "POD_ROUTE_TABLE=$POD_ROUTE_TABLE" "POD_ENI_WAIT_SECONDS=${cfg[POD_ENI_WAIT_SECONDS]}"
    env_file containerd "CONTAINERD_CONFIG=/etc/containerd/config.toml" \
      "CONTAINERD_LOG_LEVEL=${cfg[CONTAINERD_LOG_LEVEL]}"
    env_file kubelet "KUBELET_CONFIG=$KUBELET_CONFIG" "NODE_NAME=${cfg[DETECTED_INSTANCE_ID]}" \
      "NODE_IP=${cfg[DETECTED_NODE_IPV6]}" "KUBE_LOG_LEVEL=${cfg[KUBE_LOG_LEVEL]}"
    # Telemetry (--otel-logs): the agent keeps Fluent Bit's client identity (https only) and the
    # OTel CA bundle (ca=); Fluent Bit runs when it is installed.
    local telemetry_args='' otlp=${cfg[TELEMETRY_OTLP_ENDPOINT]:-} has_ca=false
    if [[ -n $otlp ]]; then
      [[ -n ${cfg[TELEMETRY_OTLP_CA]:-} ]] && has_ca=true
      [[ $otlp == https://* ]] && telemetry_args=--fluent-bit-identity
      [[ $has_ca == true ]] && telemetry_args+=" --otel-ca=${cfg[TELEMETRY_OTLP_CA]}"
      telemetry_args=${telemetry_args# }
    fi
    env_file podmin-agent "PODMIN_BUCKET=s3://${cfg[PODMIN_BUCKET]}" \
      "PODMIN_REGION=${cfg[PODMIN_REGION]}" "PODMIN_CLUSTER=${cfg[PODMIN_CLUSTER]}" \
      "PODMIN_NODEGROUP=${cfg[PODMIN_NODEGROUP]}" "PODMIN_IPV6_PREFIX=${cfg[DETECTED_POD_PREFIX]}" \
      "PODMIN_MANIFEST_DIR=$PODMIN_MANIFEST_DIR" "AGENT_INTERVAL=${cfg[AGENT_INTERVAL]}" \
      "AGENT_SECRETS_INTERVAL=${cfg[AGENT_SECRETS_INTERVAL]}" \
      "PODMIN_NODE_ID=${cfg[DETECTED_INSTANCE_ID]}" \
      "PODMIN_NODE_ADDRESS=${cfg[DETECTED_NODE_IPV6]}" "PODMIN_DNS_DIR=$DNS_ZONE_DIR" \
      "PODMIN_MESH_LISTEN=[::]:$MESH_PORT" "PODMIN_KUBELET_VERSION=$kubelet_version" \
      "PODMIN_AGENT_CA_ARGS=${cfg[WORKLOAD_CA_PUBLISH]:+--workload-ca-publish=${cfg[WORKLOAD_CA_PUBLISH]}}" \
      "PODMIN_AGENT_TELEMETRY_ARGS=$telemetry_args" \
      "PODMIN_REGISTRY_HOSTNAME=${cfg[REGISTRY_HOSTNAME]}" \
      "PODMIN_REGISTRY_LISTEN=$(url_host "${cfg[LOCAL_REGISTRY_HOST]}"):${cfg[LOCAL_REGISTRY_PORT]}" \
      "AWS_REGION=${cfg[PODMIN_REGION]}" "AWS_USE_DUALSTACK_ENDPOINT=true" \
      "AWS_EC2_METADATA_SERVICE_ENDPOINT_MODE=${cfg[DETECTED_IMDS_MODE]}"

    emit containerd /etc/containerd/config.toml root root 0644 < <(gen_containerd_config "$containerd_version" "${cfg[SANDBOX_IMAGE]}" "$gid")
    ensure_dir "/etc/containerd/certs.d/${cfg[REGISTRY_HOSTNAME]}" root root 0755
    # containerd reads hosts.toml on every pull: no restart needed.
    emit - "/etc/containerd/certs.d/${cfg[REGISTRY_HOSTNAME]}/hosts.toml" root root 0644 < <(gen_hosts_toml "${cfg[REGISTRY_HOSTNAME]}" "${cfg[LOCAL_REGISTRY_HOST]}" "${cfg[LOCAL_REGISTRY_PORT]}")
    emit - /etc/crictl.yaml root root 0644 < <(gen_crictl_yaml)
    emit kubelet "$KUBELET_CONFIG" root root 0644 < <(gen_kubelet_config "$kubelet_version" "${cfg[DETECTED_NODE_IPV6]}")
    # Service DNS: CoreDNS on the node's address serves the agent's zone and forwards the rest.
    ensure_dir "${COREFILE%/*}" root root 0755
    emit podmin-coredns "$COREFILE" root root 0644 < <(gen_corefile "${cfg[DETECTED_NODE_IPV6]}" "$DNS_PORT" "$DNS_ZONE_DIR/$CLUSTER_DOMAIN.db" "$CLUSTER_DOMAIN" "${cfg[DNS_UPSTREAMS]//,/ }")
    # The CNI configuration is read for every Pod sandbox: no restart needed.
    emit - "$CNI_CONFLIST" root root 0644 < <(gen_cni_conflist "${cfg[DETECTED_POD_PREFIX]}")
    if [[ -n $otlp ]]; then
      ensure_dir /etc/podmin/fluent-bit root root 0755
      ensure_dir /var/lib/podmin/fluent-bit root root 0700
      emit podmin-fluent-bit /etc/podmin/fluent-bit/fluent-bit.conf root root 0644 < <(gen_fluent_bit_config "$otlp" "$has_ca")
      if [[ -x $(r /opt/fluent-bit/bin/fluent-bit) ]]; then
        services+=(podmin-fluent-bit)
      else
        log "telemetry: Fluent Bit is not installed (/opt/fluent-bit/bin/fluent-bit): pin it with --dependency-catalog; the agent still keeps its identity"
      fi
    fi
  else
    nat_rules cfg || die "invalid NAT configuration"
    # With the stable NAT64 ENI (pool4 detect), IPv4 leaves through it: its private address
    # carries the EIP, the boot ENI has no public IPv4. "detect" sources: the VPC's IPv6 blocks.
    local nat64_eni=false
    [[ ${cfg[NAT64_ENABLED]} == true && ${cfg[NAT64_POOL4_ADDRESS]} == detect ]] && nat64_eni=true
    cfg[NAT_WAN_INTERFACE]=${cfg[DETECTED_DEFAULT_INTERFACE]}
    [[ $nat64_eni == true ]] && cfg[NAT_WAN_INTERFACE]=${cfg[DETECTED_NAT64_INTERFACE]}
    [[ -n ${cfg[NAT_METRICS_INTERFACE]:-} ]] || cfg[NAT_METRICS_INTERFACE]=${cfg[NAT_WAN_INTERFACE]}
    if [[ ${cfg[NAT64_SOURCE_IPV6_CIDRS]:-} == detect ]]; then
      cfg[NAT64_SOURCE_IPV6_CIDRS]=${cfg[DETECTED_NAT64_SOURCE_IPV6_CIDRS]:-}
    fi
    services=(podmin-nat)
    local -a nat_env=("NAT_WAN_INTERFACE=${cfg[NAT_WAN_INTERFACE]}"
      "NAT_METRICS_INTERFACE=${cfg[NAT_METRICS_INTERFACE]}"
      "NAT_CONNTRACK_MAX=${cfg[NAT_CONNTRACK_MAX]}" "NAT64_ENABLED=${cfg[NAT64_ENABLED]}"
      "NAT64_PREFIX=${cfg[NAT64_PREFIX]}")
    if [[ ${cfg[NAT64_ENABLED]} == true ]]; then
      local pool4=${cfg[NAT64_POOL4_ADDRESS]} jool_version
      if [[ $nat64_eni == true ]]; then
        pool4=${cfg[DETECTED_NAT64_POOL4_ADDRESS]}
        nat_env+=("NAT64_INTERFACE=${cfg[DETECTED_NAT64_INTERFACE]}"
          "NAT64_IPV4_SUBNET=${cfg[DETECTED_NAT64_SUBNET_IPV4_CIDR]}"
          "NAT64_IPV4_GATEWAY=$(ipv4_subnet_gateway "${cfg[DETECTED_NAT64_SUBNET_IPV4_CIDR]}")"
          "NAT64_ROUTE_TABLE=$NAT64_ROUTE_TABLE")
      fi
      nat_env+=("NAT64_POOL4_ADDRESS=$pool4")
      if jool_version=$(dependency_version jool); then
        log "Jool: the pinned jool $jool_version archive (installed by install.sh)"
        nat_env+=(NAT64_JOOL=archive)
      else
        jool_from_debian
        nat_env+=(NAT64_JOOL=debian)
      fi
    fi
    env_file podmin-nat "${nat_env[@]}" \
      "NAT_RULESET=$NAT_RULESET" "NAT_SYSCTL=/etc/sysctl.d/90-podmin-nat.conf"
    emit podmin-nat "$NAT_RULESET" root root 0644 < <(gen_nat_ruleset cfg)
    emit podmin-nat /etc/sysctl.d/90-podmin-nat.conf root root 0644 < <(gen_nat_sysctl "${cfg[NAT_CONNTRACK_MAX]}")
  fi

  # AWS SSM Agent (Session Manager, Run Command) over dual-stack endpoints.
  if [[ ${cfg[SSM_AGENT_ENABLED]} == true && -e $(r /etc/systemd/system/amazon-ssm-agent.service) ]]; then
    services+=(amazon-ssm-agent)
    env_file amazon-ssm-agent "AWS_REGION=${cfg[PODMIN_REGION]}" "AWS_USE_DUALSTACK_ENDPOINT=true"
    ensure_dir /etc/amazon/ssm root root 0755
    emit amazon-ssm-agent /etc/amazon/ssm/amazon-ssm-agent.json root root 0644 < <(gen_ssm_config "${cfg[PODMIN_REGION]}")
  elif [[ -e $(r /etc/systemd/system/amazon-ssm-agent.service) ]]; then
    disable+=(amazon-ssm-agent)
  fi

  [[ $first_run == true ]] && restart=("${services[@]}")
  local -a unique=()
  mapfile -t unique < <(printf '%s\n' "${restart[@]}" | awk 'NF && !seen[$0]++')
  "$here/bin/restart.sh" --enable "${services[*]}" --restart "${unique[*]}" \
    --disable "${disable[*]}" || die "restart.sh failed"
  if [[ $first_run == true ]]; then
    ensure_dir "$PODMIN_STATE_DIR" podmin "$PODMIN_GROUP" 0750
    date -u +%Y-%m-%dT%H:%M:%SZ | put_file "$PODMIN_STATE_DIR/configured" root root 0644 || true
  fi
  log "configured kind $kind (${#unique[@]} service(s) restarted)"
}

with_lock podmin-configure configure

#!/usr/bin/env bats
# Generators of vmconfig/lib/generate.sh: output parsed by real parsers and tools.

load helpers

setup() {
  load_libs
  new_root
}

SANDBOX=registry.podmin.internal/mirror/registry.k8s.io/pause:3.10

# toml FILE EXPR: evaluates a Python expression over the parsed TOML document `d`.
toml() {
  python3 -c 'import sys, tomllib; d = tomllib.load(open(sys.argv[1], "rb")); print(eval(sys.argv[2]))' "$1" "$2"
}

@test "containerd 1.6 gets schema 2, loaded by the real containerd" {
  gen_containerd_config 1.6.20 "$SANDBOX" 998 >"$BATS_TEST_TMPDIR/c.toml"
  [ "$(toml "$BATS_TEST_TMPDIR/c.toml" 'd["version"]')" = 2 ]
  [ "$(toml "$BATS_TEST_TMPDIR/c.toml" 'd["plugins"]["io.containerd.grpc.v1.cri"]["sandbox_image"]')" = "$SANDBOX" ]
  [ "$(toml "$BATS_TEST_TMPDIR/c.toml" 'd["grpc"]["gid"]')" = 998 ]
  run grep -c use_local_image_pull "$BATS_TEST_TMPDIR/c.toml"
  [ "$output" = 0 ]
  command -v containerd >/dev/null || skip "containerd is not installed: the real loader check cannot run"
  run containerd --config "$BATS_TEST_TMPDIR/c.toml" config dump
  [ "$status" -eq 0 ]
  [[ $output == *"sandbox_image = \"$SANDBOX\""* ]]
  [[ $output == *'config_path = "/etc/containerd/certs.d"'* ]]
}

@test "containerd 2.0 gets schema 3 without use_local_image_pull" {
  gen_containerd_config v2.0.5 "$SANDBOX" 998 >"$BATS_TEST_TMPDIR/c.toml"
  [ "$(toml "$BATS_TEST_TMPDIR/c.toml" 'd["version"]')" = 3 ]
  [ "$(toml "$BATS_TEST_TMPDIR/c.toml" '"use_local_image_pull" in d["plugins"]["io.containerd.cri.v1.images"]')" = False ]
  [ "$(toml "$BATS_TEST_TMPDIR/c.toml" 'd["plugins"]["io.containerd.cri.v1.runtime"]["cni"]["bin_dir"]')" = /opt/cni/bin ]
}

@test "containerd 2.1 pulls through hosts.toml (no use_local_image_pull), pinned sandbox" {
  gen_containerd_config 2.1.5 "$SANDBOX" 998 >"$BATS_TEST_TMPDIR/c.toml"
  f=$BATS_TEST_TMPDIR/c.toml
  [ "$(toml "$f" 'd["version"]')" = 3 ]
  [ "$(toml "$f" '"use_local_image_pull" in d["plugins"]["io.containerd.cri.v1.images"]')" = False ]
  [ "$(toml "$f" 'd["plugins"]["io.containerd.cri.v1.images"]["pinned_images"]["sandbox"]')" = "$SANDBOX" ]
  [ "$(toml "$f" 'd["plugins"]["io.containerd.cri.v1.images"]["registry"]["config_path"]')" = /etc/containerd/certs.d ]
  [ "$(toml "$f" 'd["plugins"]["io.containerd.cri.v1.runtime"]["cni"]["bin_dirs"]')" = "['/opt/cni/bin']" ]
  [ "$(toml "$f" 'd["plugins"]["io.containerd.cri.v1.runtime"]["containerd"]["runtimes"]["runc"]["options"]["SystemdCgroup"]')" = True ]
}

@test "containerd older than 1.6 or an unparsable version is refused" {
  run gen_containerd_config 1.5.9 "$SANDBOX" 998
  [ "$status" -ne 0 ]
  run gen_containerd_config latest "$SANDBOX" 998
  [ "$status" -ne 0 ]
}

@test "hosts.toml sends the registry hostname to the loopback registry, pull and resolve only" {
  gen_hosts_toml registry.podmin.internal 127.0.0.1 5000 >"$BATS_TEST_TMPDIR/h.toml"
  [ "$(toml "$BATS_TEST_TMPDIR/h.toml" 'd["server"]')" = http://127.0.0.1:5000 ]
  [ "$(toml "$BATS_TEST_TMPDIR/h.toml" 'd["host"]["http://127.0.0.1:5000"]["capabilities"]')" = "['pull', 'resolve']" ]
  gen_hosts_toml registry.podmin.internal ::1 5443 >"$BATS_TEST_TMPDIR/h6.toml"
  [ "$(toml "$BATS_TEST_TMPDIR/h6.toml" 'd["server"]')" = 'http://[::1]:5443' ]
}

@test "crictl.yaml selects Podmin's containerd socket" {
  run gen_crictl_yaml
  [[ $output == *"runtime-endpoint: unix:///run/containerd/containerd.sock"* ]]
  [[ $output == *"image-endpoint: unix:///run/containerd/containerd.sock"* ]]
}

NODE_IP=2600:1f18:4b2:aa00::a

@test "kubelet config: standalone, static Pods, 200m/512Mi reserved, allocatable enforced" {
  run gen_kubelet_config 1.37.2 "$NODE_IP"
  [ "$status" -eq 0 ]
  [[ $output == *"staticPodPath: /etc/podmin/manifests"* ]]
  [[ $output == *$'systemReserved:\n  cpu: 200m\n  memory: 512Mi'* ]]
  [[ $output == *$'enforceNodeAllocatable:\n  - pods'* ]]
  [[ $output != *kubeconfig* && $output != *server:* ]]
}

@test "kubelet feature gates follow the kubelet version: PodsAPI only where it is a known, off gate" {
  # 1.34 and 1.35 do not know PodsAPI (an unknown gate makes kubelet panic): no gates at all.
  for v in 1.34.3 v1.35.1; do
    run gen_kubelet_config "$v" "$NODE_IP"
    [ "$status" -eq 0 ]
    [[ $output != *featureGates* && $output != *PodsAPI* && $output != *PodInfoAPI* ]]
  done
  # 1.36: alpha and off by default, so Podmin turns it on.
  run gen_kubelet_config 1.36.3 "$NODE_IP"
  [[ $output == *$'featureGates:\n  PodsAPI: true'* ]]
  # 1.37 and later: beta and on by default; nothing to write.
  for v in 1.37.2 1.38.0 2.0.0; do
    run gen_kubelet_config "$v" "$NODE_IP"
    [[ $output != *featureGates* ]]
  done
}

@test "kubelet config refuses a version it cannot derive gates for" {
  run gen_kubelet_config latest "$NODE_IP"
  [ "$status" -ne 0 ]
  run gen_kubelet_config 1.29.9 "$NODE_IP"
  [ "$status" -ne 0 ]
}

@test "kubelet config: Pods resolve through the node's CoreDNS (clusterDNS, clusterDomain)" {
  gen_kubelet_config 1.37.2 "$NODE_IP" >"$BATS_TEST_TMPDIR/k.yaml"
  # (vmconfig_test.ts parses the same output with a YAML parser.)
  grep -qx 'clusterDNS:' "$BATS_TEST_TMPDIR/k.yaml"
  grep -qx -- "  - $NODE_IP" "$BATS_TEST_TMPDIR/k.yaml"
  grep -qx 'clusterDomain: cluster.local' "$BATS_TEST_TMPDIR/k.yaml"
  for bad in '' 'fd00::1 fd00::2' 'x; rm -rf /' 2600:1f18::/64; do
    run gen_kubelet_config 1.37.2 "$bad"
    [ "$status" -ne 0 ] || { echo "accepted: [$bad]"; false; }
    [[ $output == *"invalid cluster DNS address"* ]]
  done
}

@test "CNI conflist: ptp + host-local over the delegated prefix, accepted by the real plugins" {
  gen_cni_conflist 2600:1f18:4b2:aa00:1234::/80 >"$BATS_TEST_TMPDIR/c.conflist"
  [ "$(jq -r '.plugins[0].type' "$BATS_TEST_TMPDIR/c.conflist")" = ptp ]
  [ "$(jq -r '.plugins[0].ipam.type' "$BATS_TEST_TMPDIR/c.conflist")" = host-local ]
  [ "$(jq -r '.plugins[0].ipam.ranges[0][0].subnet' "$BATS_TEST_TMPDIR/c.conflist")" = 2600:1f18:4b2:aa00:1234::/80 ]
  [ "$(jq -r '.plugins[0].ipMasq' "$BATS_TEST_TMPDIR/c.conflist")" = false ]
  [ "$(jq -r '[.plugins[].type] | index("bridge")' "$BATS_TEST_TMPDIR/c.conflist")" = null ]
  [[ -x /usr/lib/cni/ptp ]] || skip "the CNI ptp plugin is not installed at /usr/lib/cni/ptp"
  conf=$(jq -c '.plugins[0] + {name: .name, cniVersion: .cniVersion}' "$BATS_TEST_TMPDIR/c.conflist")
  run env CNI_COMMAND=VERSION /usr/lib/cni/ptp <<<"$conf"
  [ "$status" -eq 0 ]
  [ "$(jq -r '.supportedVersions | index("1.0.0") != null' <<<"$output")" = true ]
}

@test "SSM Agent config uses dual-stack endpoints" {
  run gen_ssm_config eu-west-1
  [ "$(jq -r .Agent.UseDualStackEndpoint <<<"$output")" = true ]
  [ "$(jq -r .Agent.Region <<<"$output")" = eu-west-1 ]
}

@test "NAT64 blocked ranges: every non-global IPv4 range, embedded in the prefix" {
  mapfile -t cidrs < <(nat64_blocked_cidrs 2001:db8:64::/96)
  [ "${#cidrs[@]}" -eq 15 ]
  for c in "${cidrs[@]}"; do
    is_ipv6_cidr "$c" 96 128
    ipv6_cidr_within "$c" 2001:db8:64::/96
  done
  [[ " ${cidrs[*]} " == *" 2001:db8:64:0:0:0:a9fe:0/112 "* ]] # 169.254.0.0/16
  [[ " ${cidrs[*]} " == *" 2001:db8:64:0:0:0:a00:0/104 "* ]]  # 10.0.0.0/8
}

@test "NAT ruleset: filters run at raw priority before translation; NAT64 off means no NAT64 rules" {
  declare -A c=([NAT_WAN_INTERFACE]=ens5 [NAT_METRICS_INTERFACE]=ens6
    [NAT_IPV4_SOURCE_CIDRS]="10.0.0.0/16,10.1.0.0/16" [NAT64_ENABLED]=true
    [NAT64_PREFIX]=64:ff9b::/96 [NAT64_SOURCE_IPV6_CIDRS]=2600:1f18::/56)
  run gen_nat_ruleset c
  [[ $output == *"elements = { 10.0.0.0/16, 10.1.0.0/16 }"* ]]
  [[ $output == *"priority raw;"* ]]
  [[ $output == *"ip6 daddr 64:ff9b::/96 ip6 saddr != @nat64_sources counter name nat64_denied_source drop"* ]]
  [[ $output == *'oifname "ens5" masquerade'* ]]
  [[ $output == *'iifname "ens6" counter name metrics_rx_packets'* ]]
  # Source NAT may share Jool's pool4 address: its ports stay out of 61001-65535.
  [[ $output == *'oifname "ens5" meta l4proto { tcp, udp, icmp } masquerade to :1024-61000'* ]]
  c[NAT64_ENABLED]=false
  run gen_nat_ruleset c
  [[ $output != *nat64* ]]
  [[ $output != *"masquerade to"* ]]
  [[ $output == *'oifname "ens5" masquerade'* ]]
}

@test "NAT sysctl: conntrack maximum; router advertisements kept with forwarding; no redirects" {
  run gen_nat_sysctl 262144
  [[ $output == *"net.netfilter.nf_conntrack_max = 262144"* ]]
  # Before forwarding is switched on, every interface (and every new one) keeps accepting RAs.
  [ "$(printf '%s\n' "$output" | grep -n -e accept_ra -e ipv6.conf.all.forwarding | cut -d: -f2-)" = \
    "$(printf 'net.ipv6.conf.*.accept_ra = 2\nnet.ipv6.conf.all.forwarding = 1')" ]
  [[ $output == *"net.ipv4.conf.*.send_redirects = 0"* ]]
  [[ $output == *"net.ipv4.conf.all.rp_filter = 2"* ]]
  [[ $output == *"net.ipv4.ip_forward = 1"* ]]
}

@test "put_file is idempotent and atomic; it refuses to write through a symlink" {
  echo hello | put_file /etc/podmin/x.conf root podmin 0640
  [ "$(stat -c '%u:%g %a' "$PODMIN_ROOT/etc/podmin/x.conf")" = "0:998 640" ]
  run put_file /etc/podmin/x.conf root podmin 0640 <<<hello
  [ "$status" -eq 1 ] # unchanged
  echo other | put_file /etc/podmin/x.conf root podmin 0640
  [ "$(cat "$PODMIN_ROOT/etc/podmin/x.conf")" = other ]
  ln -s /tmp "$PODMIN_ROOT/etc/evil"
  run put_file /etc/evil/x.conf root root 0644 <<<x
  [ "$status" -ne 0 ]
  [ ! -e /tmp/x.conf ] || [ "$(cat /tmp/x.conf)" != x ]
  [ -z "$(find "$PODMIN_ROOT/etc/podmin" -name '.*')" ] # no temporary files left
}

# fb_conf FILE SECTION KEY: the values of KEY in every [SECTION] of a Fluent Bit classic config.
fb_conf() {
  awk -v sec="[$2]" -v key="$3" '/^\[/ { in_sec = ($1 == sec) } in_sec && $1 == key { $1 = ""; sub(/^ +/, ""); print }' "$1"
}

@test "Fluent Bit over https: the agent's client identity, the OTel CA bundle, host, port and path" {
  gen_fluent_bit_config https://otel.example.com:4318/v1/logs true >"$BATS_TEST_TMPDIR/fb.conf"
  f=$BATS_TEST_TMPDIR/fb.conf
  [ "$(fb_conf "$f" OUTPUT name)" = opentelemetry ]
  [ "$(fb_conf "$f" OUTPUT host)" = otel.example.com ]
  [ "$(fb_conf "$f" OUTPUT port)" = 4318 ]
  [ "$(fb_conf "$f" OUTPUT logs_uri)" = /v1/logs ]
  [ "$(fb_conf "$f" OUTPUT tls)" = on ]
  [ "$(fb_conf "$f" OUTPUT tls.verify)" = on ]
  [ "$(fb_conf "$f" OUTPUT tls.crt_file)" = /run/podmin/telemetry/client/tls.crt ]
  [ "$(fb_conf "$f" OUTPUT tls.key_file)" = /run/podmin/telemetry/client/tls.key ]
  [ "$(fb_conf "$f" OUTPUT tls.ca_file)" = /run/podmin/telemetry/otel-ca/ca.crt ]
  run fb_conf "$f" INPUT systemd_filter
  [ "${lines[0]}" = _SYSTEMD_UNIT=kubelet.service ]
  [ "${#lines[@]}" -eq 3 ]
}

@test "Fluent Bit: system roots without ca=, default port and path, bracketed IPv6, no TLS over http" {
  gen_fluent_bit_config 'https://[2001:db8::7]/' false >"$BATS_TEST_TMPDIR/a.conf"
  [ "$(fb_conf "$BATS_TEST_TMPDIR/a.conf" OUTPUT host)" = 2001:db8::7 ]
  [ "$(fb_conf "$BATS_TEST_TMPDIR/a.conf" OUTPUT port)" = 443 ]
  [ "$(fb_conf "$BATS_TEST_TMPDIR/a.conf" OUTPUT logs_uri)" = /v1/logs ]
  [ -z "$(fb_conf "$BATS_TEST_TMPDIR/a.conf" OUTPUT tls.ca_file)" ]
  gen_fluent_bit_config http://collector:4318 false >"$BATS_TEST_TMPDIR/b.conf"
  [ "$(fb_conf "$BATS_TEST_TMPDIR/b.conf" OUTPUT port)" = 4318 ]
  [ -z "$(fb_conf "$BATS_TEST_TMPDIR/b.conf" OUTPUT tls)" ]
  [ -z "$(fb_conf "$BATS_TEST_TMPDIR/b.conf" OUTPUT tls.crt_file)" ]
}

@test "the node's Corefile: bound to the node's IPv6 on port 53, every upstream resolver listed" {
  gen_corefile "$NODE_IP" "$DNS_PORT" "$DNS_ZONE_DIR/$CLUSTER_DOMAIN.db" "$CLUSTER_DOMAIN" \
    "fd00:ec2::253 10.0.0.2" >"$BATS_TEST_TMPDIR/Corefile"
  [ "$(grep -c "^    bind $NODE_IP\$" "$BATS_TEST_TMPDIR/Corefile")" = 2 ]
  grep -qx 'cluster.local:53 {' "$BATS_TEST_TMPDIR/Corefile"
  grep -qx '.:53 {' "$BATS_TEST_TMPDIR/Corefile"
  grep -qx '    file /run/podmin/dns/cluster.local.db {' "$BATS_TEST_TMPDIR/Corefile"
  grep -qx '    forward . fd00:ec2::253 10.0.0.2' "$BATS_TEST_TMPDIR/Corefile"
}

@test "the Corefile serves the agent's zone and forwards the rest" {
  gen_corefile 127.0.0.1 53 /run/podmin/dns/cluster.local.db cluster.local 169.254.169.253 >"$BATS_TEST_TMPDIR/Corefile"
  run grep -c 'file /run/podmin/dns/cluster.local.db' "$BATS_TEST_TMPDIR/Corefile"
  [ "$output" = 1 ]
  run grep -c 'forward . 169.254.169.253' "$BATS_TEST_TMPDIR/Corefile"
  [ "$output" = 1 ]
}

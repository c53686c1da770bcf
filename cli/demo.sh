#!/usr/bin/env bash
# Podmin's main job on its embedded defaults, without an AWS account:
#  1. `podmin setup --dry-run`: the cluster's OpenTofu configuration, user-data per
#     NodeGroup and dependency plan, from the embedded catalogue and templates;
#  2. the deploy spine on the filesystem store: the CLI writes desired state to a local
#     "bucket", an agent converges a node to it.
# Everything lives under ${PODMIN_DEMO_DIR:-/tmp/podmin-demo}; nothing touches AWS.
# Run it as `deno task -q demo` (the README's command): -q keeps Deno's own dependency
# download lines off the screen; every deno run below is quiet too.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${PODMIN_DEMO_DIR:-/tmp/podmin-demo}
bucket="file://${dir}/bucket"
podmin() { deno run -q --allow-all cli/main.ts --bucket "$bucket" "$@"; }
agent() { deno run -q --allow-all agent/main.ts "$@"; }

rm -rf "${dir:?}/plan" "$dir/bucket" "$dir/node" "$dir/agent.log" # only what this demo writes
mkdir -p "$dir"
echo "== podmin setup --dry-run   (writes $dir/plan; no AWS call)"
deno run -q --allow-all cli/main.ts setup --cluster demo --region us-east-1 \
  --vpc-cidr 10.0.0.0/16 --nat64 --nodegroup default \
  --nodegroup workers,size=3,disk-size=100,instance-type=c8g.large,zone=b \
  --dry-run --out "$dir/plan" 2>"$dir/setup.log" || { cat "$dir/setup.log" >&2; exit 1; }
ls -l "$dir/plan" "$dir/plan/user-data"
echo
echo "== podmin create-bucket   (a filesystem bucket: $bucket)"
podmin create-bucket
echo
echo "== podmin apply -f docs/examples/hello.yaml   (bucket: $bucket)"
podmin apply -f docs/examples/hello.yaml 2>&1
echo
echo "== podmin get deployments -o wide / get services / status"
podmin get deployments -o wide
podmin get services
podmin status
echo
echo "== podmin-agent run --once   (NodeGroup default, node dirs under $dir/node)"
agent run --bucket "$bucket" --cluster demo --nodegroup default \
  --manifest-dir "$dir/node/manifests" --secrets-dir "$dir/node/secrets" \
  --tls-dir "$dir/node/tls" --state-dir "$dir/node/state" --workload-ca-key off --once \
  2>"$dir/agent.log"
echo
echo "== agent log   ($dir/agent.log, as JSON lines; shown readable)"
deno run -q cli/log_lines.ts <"$dir/agent.log"
echo
agent status --state-dir "$dir/node/state"
echo
echo "== kubelet static Pod manifest written by the agent"
ls -l "$dir/node/manifests"
deno eval -q "console.log(JSON.stringify(JSON.parse(Deno.readTextFileSync('$dir/node/manifests/podmin_default_hello.json')), null, 2))"

#!/usr/bin/env bash
# Podmin's main job on its embedded defaults, without an AWS account:
#  1. `podmin setup --dry-run`: the cluster's OpenTofu configuration, user-data per
#     NodeGroup and dependency plan, from the embedded catalogue and templates;
#  2. the deploy spine on the filesystem store: the CLI writes desired state to a local
#     "bucket", an agent converges a node to it.
# Everything lives under ${PODMIN_DEMO_DIR:-/tmp/podmin-demo}; nothing touches AWS.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${PODMIN_DEMO_DIR:-/tmp/podmin-demo}
bucket="file://${dir}/bucket"
podmin() { deno run --allow-all cli/main.ts --bucket "$bucket" "$@"; }
agent() { deno run --allow-all agent/main.ts "$@"; }

rm -rf "${dir:?}/plan" "$dir/bucket" "$dir/node" # only what this demo writes
echo "== podmin setup --dry-run   (writes $dir/plan; no AWS call)"
deno run --allow-all cli/main.ts setup --cluster demo --region us-east-1 --vpc-cidr 10.0.0.0/16 \
  --nat64 --nodegroup default --nodegroup workers,size=3,disk-size=100,instance-type=c8g.large,zone=b \
  --dry-run --out "$dir/plan"
ls -l "$dir/plan" "$dir/plan/user-data"
echo
echo "== podmin create-bucket   (a filesystem bucket: $bucket)"
podmin create-bucket
echo
echo "== podmin apply -f docs/examples/hello.yaml   (bucket: $bucket)"
podmin apply -f docs/examples/hello.yaml
echo
echo "== podmin get deployments / services"
podmin get deployments
podmin get services
echo
echo "== podmin-agent run --once   (NodeGroup default, node dirs under $dir/node)"
agent run --bucket "$bucket" --cluster demo --nodegroup default \
  --manifest-dir "$dir/node/manifests" --secrets-dir "$dir/node/secrets" \
  --tls-dir "$dir/node/tls" --state-dir "$dir/node/state" --workload-ca-key off --once 2>/dev/null
agent status --state-dir "$dir/node/state"
echo
echo "== kubelet static Pod manifest written by the agent"
ls -l "$dir/node/manifests"
deno eval "console.log(JSON.stringify(JSON.parse(Deno.readTextFileSync('$dir/node/manifests/podmin_default_hello.json')), null, 2))"

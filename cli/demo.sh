#!/usr/bin/env bash
# Podmin's main job on its embedded default (the filesystem store): the CLI
# writes desired state to a local "bucket", an agent converges a node to it.
# Everything lives under ${PODMIN_DEMO_DIR:-/tmp/podmin-demo}; nothing touches AWS.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${PODMIN_DEMO_DIR:-/tmp/podmin-demo}
bucket="file://${dir}/bucket"
podmin() { deno run --allow-all cli/main.ts --bucket "$bucket" "$@"; }
agent() { deno run --allow-all agent/main.ts "$@"; }

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
  --tls-dir "$dir/node/tls" --state-dir "$dir/node/state" --once 2>/dev/null
agent status --state-dir "$dir/node/state"
echo
echo "== kubelet static Pod manifest written by the agent"
ls -l "$dir/node/manifests"
deno eval "console.log(JSON.stringify(JSON.parse(Deno.readTextFileSync('$dir/node/manifests/podmin_default_hello.json')), null, 2))"

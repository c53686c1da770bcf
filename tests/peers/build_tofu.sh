#!/usr/bin/env bash
# Builds real OpenTofu and a trimmed AWS provider from the Go module proxy for the setup tests
# (tests/support/real_tofu.ts), cached by version under $PODMIN_TEST_BIN/tofu/ so a warm run
# builds nothing:
#
#   tofu/bin/tofu                 OpenTofu (go build ./cmd/tofu in a copy of the module)
#   tofu/mirror/registry.opentofu.org/hashicorp/aws/<version>/linux_<arch>/terraform-provider-aws_v<version>
#                                 the AWS provider, in a filesystem mirror's unpacked layout
#   tofu/cli.tfrc                 the CLI configuration (TF_CLI_CONFIG_FILE): the mirror only,
#                                 no registry download
#   tofu/.tofu.module, tofu/.aws.module   what each binary was built from (the cache key)
#
# The full provider takes about 50 minutes on 2 cores; the trimmed one registers only the service
# packages the generated configuration uses (SERVICES below) and builds only their SDK clients
# (CLIENTS), a few minutes. The trim edits two generated files of a copy of the module and fails
# loudly when their shape is not the one it knows.
set -euo pipefail

TOFU_MODULE=github.com/opentofu/opentofu@v1.10.10
AWS_MODULE=github.com/hashicorp/terraform-provider-aws@v1.60.1-0.20260602190131-5f2286d6d836
# The release this pseudo-version prepares (its CHANGELOG's "## 6.48.0 (Unreleased)"); the schema
# the generator is checked against (tests/support/aws-provider-6.48-schema.json) is this one's.
AWS_VERSION=6.48.0
# The provider's service packages the generated configuration needs: data sources and resources of
# ec2, iam, autoscaling, s3, ssm, sts (aws_caller_identity), meta (aws_partition); account and
# organizations serve the provider's own configuration; elb and elbv2 because autoscaling's
# capacity wait reads the load balancers' clients.
SERVICES=(account autoscaling ec2 elb elbv2 iam meta organizations s3 s3control ssm sts)
# The AWS SDK clients (aws-sdk-go-v2/service/<name>) those packages call.
CLIENTS=(account autoscaling ec2 elasticloadbalancing elasticloadbalancingv2 iam organizations s3 s3control ssm sts)

PODMIN_TEST_BIN=${PODMIN_TEST_BIN:-/opt/podmin-test/bin}
out="$PODMIN_TEST_BIN/tofu"
[[ -x /usr/local/go/bin/go ]] && PATH=$PATH:/usr/local/go/bin
command -v go >/dev/null || { echo "build_tofu: go is missing" >&2; exit 1; }
goarch=$(go env GOARCH)
mirror_dir="$out/mirror/registry.opentofu.org/hashicorp/aws/$AWS_VERSION/linux_$goarch"
provider_bin="$mirror_dir/terraform-provider-aws_v$AWS_VERSION"
# A release build, as OpenTofu's own: without it the binary calls itself 1.10.10-dev.
tofu_ldflags="-X github.com/opentofu/opentofu/version.dev=no"
tofu_key="$TOFU_MODULE ldflags=$tofu_ldflags"
aws_key="$AWS_MODULE version=$AWS_VERSION services=${SERVICES[*]} clients=${CLIENTS[*]}"

# Module copies and build outputs live in temporary directories, removed on any exit (a failed
# build leaves no 300 MB copy behind).
work_dirs=()
trap 'rm -rf "${work_dirs[@]}"' EXIT
new_work_dir() { work=$(mktemp -d) && work_dirs+=("$work"); }

say() { echo "build_tofu: $*"; }
fail() { echo "build_tofu: $*" >&2; exit 1; }
# `cached KEYFILE KEY BINARY`: the binary is there and was built from KEY.
cached() { [[ -x "$3" && "$(cat "$1" 2>/dev/null || true)" == "$2" ]]; }

# `module_copy MODULE@VERSION DEST`: downloads the module (timed) and copies it writable to DEST.
module_copy() {
  local started=$SECONDS dir
  say "downloading $1"
  dir=$(nice -n 10 go mod download -json "$1" | jq -r '.Dir // empty')
  [[ -d "$dir" ]] || fail "go mod download $1 gave no module directory"
  say "downloaded $1 in $((SECONDS - started)) s"
  cp -r "$dir/." "$2"
  chmod -R u+w "$2"
}

# `fetch_deps DIR PACKAGE`: downloads the modules the build of PACKAGE needs (timed apart from it).
fetch_deps() {
  local started=$SECONDS
  say "downloading the modules $2 imports"
  (cd "$1" && nice -n 10 go list -deps "$2" >/dev/null)
  say "downloaded them in $((SECONDS - started)) s"
}

# `trim_lines FILE PREFIX SUFFIX KEEP...`: deletes the lines `PREFIX<name>SUFFIX` (name: [a-z0-9]+)
# whose name is not among KEEP; fails unless every KEEP matched exactly once and others went.
trim_lines() {
  local file=$1 prefix=$2 suffix=$3
  shift 3
  awk -v prefix="$prefix" -v suffix="$suffix" -v keep="$*" '
    BEGIN { n = split(keep, k, " "); for (i = 1; i <= n; i++) want[k[i]] = 1 }
    {
      name = ""
      if (index($0, prefix) == 1 && length($0) > length(prefix) + length(suffix) &&
          substr($0, length($0) - length(suffix) + 1) == suffix)
        name = substr($0, length(prefix) + 1, length($0) - length(prefix) - length(suffix))
    }
    name ~ /^[a-z0-9]+$/ {
      if (name in want) { seen[name]++; print } else dropped++
      next
    }
    { print }
    END {
      for (name in want) if (seen[name] != 1) {
        printf "build_tofu: %s: %s%s%s matched %d times, not once\n", FILENAME, prefix, name, suffix, seen[name] > "/dev/stderr"
        exit 1
      }
      if (dropped < 1) { printf "build_tofu: %s: nothing trimmed\n", FILENAME > "/dev/stderr"; exit 1 }
    }' "$file" >"$file.trimmed" || fail "$file is not shaped as this trim expects"
  mv "$file.trimmed" "$file"
}

# `trim_provider DIR`: registers only SERVICES and builds only CLIENTS.
trim_provider() {
  local packages="$1/internal/provider/sdkv2/service_packages_gen.go"
  local clients="$1/internal/conns/awsclient_gen.go"
  [[ -f "$packages" && -f "$clients" ]] || fail "the provider's generated files moved"
  # The shape the trim relies on: one import per service, one `name.ServicePackage(ctx),` each.
  grep -q '^func servicePackages(ctx context.Context) \[\]conns.ServicePackage {$' "$packages" ||
    fail "$packages: no servicePackages function"
  trim_lines "$packages" $'\t"github.com/hashicorp/terraform-provider-aws/internal/service/' '"' "${SERVICES[@]}"
  trim_lines "$packages" $'\t\t' '.ServicePackage(ctx),' "${SERVICES[@]}"
  # awsclient_gen.go: one import per SDK client and one accessor per client, a block of three
  # lines and a blank one:
  #   func (c *AWSClient) NameClient(ctx context.Context) *name.Client {
  #   	return errs.Must(...)
  #   }
  trim_lines "$clients" $'\t"github.com/aws/aws-sdk-go-v2/service/' '"' "${CLIENTS[@]}"
  awk -v keep="${CLIENTS[*]}" '
    BEGIN { n = split(keep, k, " "); for (i = 1; i <= n; i++) want[k[i]] = 1 }
    /^func \(c \*AWSClient\) / {
      name = $0
      sub(/^func \(c \*AWSClient\) [A-Za-z0-9]+\(ctx context\.Context\) \*/, "", name)
      if (!sub(/\.Client \{$/, "", name) || name !~ /^[a-z0-9]+$/) {
        print "build_tofu: awsclient_gen.go: unexpected accessor: " $0 > "/dev/stderr"; bad = 1; exit 1
      }
      skip = !(name in want); accessors++
      if (!skip) seen[name]++
    }
    blank_after && $0 == "" { blank_after = 0; next }
    { blank_after = 0 }
    !skip { print; next }
    /^}$/ { skip = 0; blank_after = 1 }
    END {
      if (bad) exit 1
      for (name in want) if (seen[name] < 1) {
        print "build_tofu: awsclient_gen.go: no accessor for " name > "/dev/stderr"; exit 1
      }
      if (accessors < 100) { print "build_tofu: awsclient_gen.go: only " accessors " accessors" > "/dev/stderr"; exit 1 }
    }' "$clients" >"$clients.trimmed" || fail "$clients is not shaped as this trim expects"
  mv "$clients.trimmed" "$clients"
  say "trimmed the provider to the service packages: ${SERVICES[*]}"
}

build_tofu() {
  cached "$out/.tofu.module" "$tofu_key" "$out/bin/tofu" && return 0
  local work started
  new_work_dir
  module_copy "$TOFU_MODULE" "$work/src"
  fetch_deps "$work/src" ./cmd/tofu
  started=$SECONDS
  say "building tofu (go build ./cmd/tofu, niced)"
  (cd "$work/src" && CGO_ENABLED=0 nice -n 10 go build -trimpath -ldflags "$tofu_ldflags" \
    -o "$work/tofu" ./cmd/tofu)
  say "built tofu in $((SECONDS - started)) s: $(TF_CLI_CONFIG_FILE=/dev/null "$work/tofu" version | head -1)"
  mkdir -p "$out/bin"
  mv "$work/tofu" "$out/bin/tofu"
  echo "$tofu_key" >"$out/.tofu.module"
}

build_provider() {
  cached "$out/.aws.module" "$aws_key" "$provider_bin" && return 0
  local work started
  new_work_dir
  module_copy "$AWS_MODULE" "$work/src"
  trim_provider "$work/src"
  fetch_deps "$work/src" .
  started=$SECONDS
  say "building the AWS provider $AWS_VERSION (go build ., niced; a few minutes trimmed)"
  (cd "$work/src" && CGO_ENABLED=0 nice -n 10 go build -trimpath \
    -ldflags "-X github.com/hashicorp/terraform-provider-aws/version.ProviderVersion=$AWS_VERSION" \
    -o "$work/provider" .)
  say "built the AWS provider in $((SECONDS - started)) s"
  rm -rf "$out/mirror"
  mkdir -p "$mirror_dir"
  mv "$work/provider" "$provider_bin"
  echo "$aws_key" >"$out/.aws.module"
}

# The CLI configuration: providers come from the mirror only (no registry is asked).
write_cli_config() {
  local config
  config=$(printf 'provider_installation {\n  filesystem_mirror {\n    path    = "%s"\n    include = ["registry.opentofu.org/hashicorp/aws"]\n  }\n}\n' "$out/mirror")
  [[ "$(cat "$out/cli.tfrc" 2>/dev/null || true)" == "$config" ]] && return 0
  echo "$config" >"$out/cli.tfrc"
  say "wrote $out/cli.tfrc"
}

mkdir -p "$out"
case "${1:-all}" in
  tofu) build_tofu ;;
  provider) build_provider ;;
  all) build_tofu; build_provider ;;
  *) echo "usage: $0 [all|tofu|provider]" >&2; exit 2 ;;
esac
write_cli_config

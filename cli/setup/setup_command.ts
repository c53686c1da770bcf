/**
 * `podmin setup`: its help and flags; the implementation (cli/setup/setup_run.ts, with the AWS SDK
 * clients, the OpenTofu generator and vmconfig) loads when it runs.
 */

import type { Command } from "../../core/kit/cli_kit.ts";
import { SETUP_DEFAULTS } from "./setup_defaults.ts";

const setup: Command = {
  name: "setup",
  summary: "create or update a cluster: dependencies, CAs, OpenTofu infrastructure, rollout",
  help:
    `Usage: podmin setup [--cluster ID] [--region REGION] --vpc-cidr CIDR --nodegroup SPEC… [flags]

Publishes the pinned node dependencies to the cluster bucket (uploading only
what the published manifest lacks, the manifest last, by conditional write),
mirrors the Pod sandbox image, creates the CA parameters in SSM when missing,
renders cloud-init user-data per NodeGroup, generates the OpenTofu
configuration, saves it to the bucket (infra/) and locally, applies it and
waits for healthy capacity. Re-running setup with changed dependencies or
user-data rolls the VMs (ASG instance refresh).

Before creating anything it prints the plan (cluster, bucket, region, VPC,
AMIs, NodeGroups, NAT64 instances) and asks on the terminal; --yes skips the
question, and without a terminal --yes is required.

Flags:
  --cluster ID                     cluster id (DNS label; default "${SETUP_DEFAULTS.cluster}"); the
                                   bucket is s3://podmin-ID unless --bucket names one
  --region REGION                  default: $AWS_REGION, the AWS profile's region
                                   (~/.aws/config, $AWS_CONFIG_FILE, $AWS_PROFILE), then us-east-1
  --vpc-cidr CIDR                  primary IPv4 CIDR of the VPC to reuse or create
  --nodegroup NAME[,size=N,disk-size=GIB,instance-type=TYPE,zone=ZONE,nat64=TYPE]
                                   repeatable; defaults size=1, disk-size=20, instance-type=t4g.medium,
                                   the region's first available zone
  --nat64 | --nat64=instance-type=TYPE
                                   DNS64 and one shared NAT64 instance per zone (default t4g.nano)
  --workload-ca-publish s3://B/K   publish the workload CA bundle to this exact object
  --otel-logs ENDPOINT[,ca=s3://B/K]
                                   OTLP log endpoint; ca= grants read access to that CA object
  --kms-key-arn ARN                customer-managed KMS key of SecureStrings or Secrets Manager
                                   values (repeatable): nodes may kms:Decrypt with exactly these
  --dependency-catalog FILE        pinned dependencies (JSON) instead of the embedded catalogue; an
                                   entry gives "sha256" (hex) or "sha256Url" (the vendor's checksum
                                   file beside "url"), never both
  --kubernetes-version X.Y.Z       kubelet release X.Y.Z from dl.k8s.io for both architectures,
                                   replacing the catalogue's kubelet; its sha256 is read from the
                                   vendor's kubelet.sha256 and recorded in the dependency manifest
  --crictl-version X.Y.Z           likewise crictl from the cri-tools GitHub release (.sha256)
  --containerd-version X.Y.Z       likewise containerd from its GitHub release (.sha256sum)
  --agent-binary ARCH=PATH         compiled podmin-agent per architecture (amd64|arm64; default
                                   DIST/x86_64/podmin-agent and DIST/aarch64/podmin-agent)
  --dist DIR                       where built programs are (default the checkout's dist/); an
                                   architecture without a compiled agent gets the pinned Deno
                                   runtime plus DIST/podmin-agent.js (built when missing)
  --ami ARCH=AMI                   AMI per architecture (default: Debian 12 from SSM public parameters)
  --sandbox-image REF              Pod sandbox image to mirror (default registry.k8s.io/pause:3.10)
  --mirror-plain-http              fetch the sandbox image over http:// (local test registries)
  --work-dir DIR                   local copy of the configuration (default ~/.local/share/podmin/<cluster>)
  --dry-run --out DIR              write config, user-data and dependency plan under DIR; touch nothing
  --yes                            do not ask before creating (needed without a terminal)

NodeGroup size=0 is allowed: the group exists without VMs until you raise it.
Downloads are cached in $PODMIN_CACHE_DIR (default ~/.cache/podmin).
$PODMIN_RELEASE_MIRROR=URL fetches the --*-version releases and their checksums from a mirror
(air-gapped sites, tests) laid out as the vendors' sites, host first: URL/dl.k8s.io/release/...,
URL/github.com/.... A checksum that is missing, malformed or disagrees with the download fails
setup naming the URL and both values; a version the manifest records is not fetched again.

Examples:
  podmin setup --vpc-cidr 10.0.0.0/16 --nat64 --nodegroup default \\
    --nodegroup workers,size=3,disk-size=100,instance-type=c8g.large,zone=b,nat64=t4g.small
  podmin setup --cluster demo --region us-east-1 --vpc-cidr 10.0.0.0/16 --nat64 \\
    --nodegroup default --nodegroup workers,size=3,instance-type=c8g.large,zone=b --dry-run --out ./plan
  podmin setup --vpc-cidr 10.0.0.0/16 --nodegroup default --kubernetes-version 1.37.2`,
  options: {
    cluster: { type: "string" },
    "vpc-cidr": { type: "string" },
    nat64: { type: "string" },
    nodegroup: { type: "string", multiple: true },
    "workload-ca-publish": { type: "string" },
    "otel-logs": { type: "string" },
    "kms-key-arn": { type: "string", multiple: true },
    "dependency-catalog": { type: "string" },
    "kubernetes-version": { type: "string" },
    "crictl-version": { type: "string" },
    "containerd-version": { type: "string" },
    "agent-binary": { type: "string", multiple: true },
    dist: { type: "string" },
    ami: { type: "string", multiple: true },
    "sandbox-image": { type: "string" },
    "mirror-plain-http": { type: "boolean", default: false },
    "work-dir": { type: "string" },
    "dry-run": { type: "boolean", default: false },
    out: { type: "string" },
    yes: { type: "boolean", default: false },
  },
  // `--nat64` alone is valid: give it an empty value so the parser accepts it.
  rewriteArgs: (args) => args.map((a) => (a === "--nat64" ? "--nat64=" : a)),
  run: async (ctx) => (await import("./setup_run.ts")).runSetup(ctx),
};

/** The setup command. */
export const setupCommands: Command[] = [setup];

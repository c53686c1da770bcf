/**
 * The OpenTofu/Terraform configuration of a cluster, as Terraform-language JSON.
 *
 * `generateTofu(inputs)` is pure: same inputs, same configuration; `serializeTofu(config)`
 * gives its stable bytes (what setup saves to `infra/config/main.tf.json` and locally before
 * running `tofu`). See `/docs/spec.md` ("Generated infrastructure") for the resources, the
 * IAM statements, the NAT64 topology and the rollout.
 */

import { INFRA_STATE } from "../../core/bucket/bucket_layout.ts";
import { type CheckedInputs, checkInfraInputs, type InfraInputs } from "./infra_inputs.ts";
import { GenContext, nat64Name, nat64SubnetName, nodeSubnetName, TF } from "./context.ts";
import { CLUSTER_TAG } from "./iam.ts";
import type { Architecture } from "./instance_types.ts";
import { addAmiLookups } from "./launch.ts";
import { addNat64 } from "./nat64.ts";
import { addNetwork } from "./network.ts";
import { addNodeGroups } from "./node_groups.ts";
import { planTopology, type Topology } from "./topology.ts";
import { ref, TofuBuilder, type TofuConfig } from "./tofu_json.ts";

export { serializeTofu, type TofuConfig } from "./tofu_json.ts";

/** OpenTofu/Terraform version needed: S3 backend lock files (`use_lockfile`) came in 1.10. */
export const REQUIRED_TOFU_VERSION = ">= 1.10.0";
/** AWS provider versions the configuration is written for. */
export const AWS_PROVIDER_VERSION = ">= 5.80.0, < 7.0.0";

function terraformBlock(checked: CheckedInputs) {
  return {
    required_version: REQUIRED_TOFU_VERSION,
    required_providers: { aws: { source: "hashicorp/aws", version: AWS_PROVIDER_VERSION } },
    backend: {
      s3: {
        bucket: checked.spec.bucket,
        key: INFRA_STATE,
        region: checked.spec.region,
        encrypt: true,
        use_lockfile: true,
      },
    },
  };
}

function addOutputs(g: GenContext): void {
  const { builder, topology } = g;
  builder.output("vpc_id", g.vpcId(), "the cluster's VPC");
  builder.output(
    "node_subnet_ids",
    Object.fromEntries(
      topology.domains.map((d) => [d.key, ref("aws_subnet", nodeSubnetName(d.tfName), "id")]),
    ),
    "node subnet per route domain (zone-<letter> shared, ng-<name> dedicated NAT64)",
  );
  builder.output(
    "nat64_subnet_ids",
    Object.fromEntries(
      topology.nat64Subnets.map((
        s,
      ) => [s.zone, ref("aws_subnet", nat64SubnetName(s.tfName), "id")]),
    ),
    "NAT64 subnet per zone",
  );
  builder.output(
    "nodegroup_asg_names",
    Object.fromEntries(
      topology.nodeGroups.map((ng) => [ng.name, ref("aws_autoscaling_group", ng.tfName, "name")]),
    ),
    "Auto Scaling Group per NodeGroup (setup waits up to 3 minutes for each)",
  );
  builder.output(
    "nodegroup_launch_template_versions",
    Object.fromEntries(
      topology.nodeGroups.map((
        ng,
      ) => [ng.name, ref("aws_launch_template", ng.tfName, "latest_version")]),
    ),
    "launch template version per NodeGroup (a new version starts an instance refresh)",
  );
  builder.output(
    "nat64_asg_names",
    Object.fromEntries(
      topology.nat64.map((n) => [n.key, ref("aws_autoscaling_group", nat64Name(n.tfName), "name")]),
    ),
    "Auto Scaling Group per NAT64 group (setup waits up to 15 minutes for each)",
  );
  builder.output(
    "nat64_public_ipv4",
    Object.fromEntries(
      topology.nat64.map((n) => [n.key, ref("aws_eip", nat64Name(n.tfName), "public_ip")]),
    ),
    "the stable public IPv4 address of each NAT64 group",
  );
  builder.output(
    "node_security_group_id",
    ref("aws_security_group", TF.nodeSecurityGroup, "id"),
    "security group of every node ENI",
  );
  builder.output("node_role_arn", ref("aws_iam_role", TF.nodeRole, "arn"), "the node role");
}

function usedArchitectures(topology: Topology): Set<Architecture> {
  return new Set([
    ...topology.nodeGroups.map((ng) => ng.architecture),
    ...topology.nat64.map((n) => n.architecture),
  ]);
}

/**
 * Generates the configuration. Validates the inputs first (ValidationError with a hint on
 * the first problem).
 */
export function generateTofu(inputs: InfraInputs): TofuConfig {
  const checked = checkInfraInputs(inputs);
  const topology = planTopology(checked);
  const builder = new TofuBuilder(terraformBlock(checked), {
    aws: {
      region: checked.spec.region,
      default_tags: { tags: { [CLUSTER_TAG]: checked.spec.cluster } },
    },
  });
  const g = new GenContext({ inputs: checked, topology, builder });
  builder.data("aws_partition", TF.current, {});
  builder.data("aws_caller_identity", TF.current, {});
  addAmiLookups(g, usedArchitectures(topology));
  addNetwork(g);
  addNodeGroups(g);
  addNat64(g);
  addOutputs(g);
  return builder.config;
}

/** The topology `generateTofu` would build (ASG names, capacity waits, subnets), for setup. */
export function describeInfra(inputs: InfraInputs): Topology {
  return planTopology(checkInfraInputs(inputs));
}

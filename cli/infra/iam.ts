/**
 * IAM policy documents of the node role (docs/spec.md §8.1) and of the NAT64 instance roles.
 *
 * Documents are built here as data; the generator embeds them as JSON strings in which
 * `${data.aws_partition…}` and `${data.aws_caller_identity…}` are Terraform interpolations
 * (the partition and the account id are only known at apply time). Operator values pass
 * through `literal()`.
 */

import {
  AGENT_READ_PREFIXES,
  AGENT_WRITE_PREFIXES,
  IDENTITY_WRITES,
  PREFIXES,
} from "../../core/bucket/bucket_layout.ts";
import type { CheckedInputs, S3ObjectRef } from "./infra_inputs.ts";
import type { Nat64Plan } from "./topology.ts";
import { dataRef, literal } from "./tofu_json.ts";

/** One IAM policy statement (always Allow: Podmin grants, it never relies on Deny). */
export interface PolicyStatement {
  Sid: string;
  Effect: "Allow";
  Action: string[];
  Resource: string[];
  Condition?: Record<string, Record<string, string | string[]>>;
}

/** An IAM policy document. */
export interface PolicyDocument {
  Version: "2012-10-17";
  Statement: PolicyStatement[];
}

/** The tag every Podmin resource carries; IAM conditions scope EC2 actions with it. */
export const CLUSTER_TAG = "podmin:cluster";
/** The NodeGroup tag of node instances, volumes and ENIs. */
export const NODEGROUP_TAG = "podmin:nodegroup";
/**
 * `podmin:nodegroup` of a shared (per-zone) NAT64 instance and its ENI and EIP, which serve every
 * NodeGroup of their zone: "_shared", which no NodeGroup can be named (names are DNS labels).
 */
export const SHARED_NAT64_NODEGROUP = "_shared";
/** The tag naming a NAT64 instance's group (`zone-a`, `ng-workers`). */
export const NAT64_TAG = "podmin:nat64";
/** The instance tag carrying the stable ENI id a NAT64 instance attaches at boot. */
export const NAT64_ENI_TAG = "podmin:nat64-eni";

/**
 * What SSM Agent needs for Session Manager and Run Command: the instance-status heartbeat and
 * the two messaging services. Not AmazonSSMManagedInstanceCore, which also reads parameters.
 * These actions get Resource "*" (as in AWS's own minimal agent policy): none of them reads or
 * writes customer data.
 */
export const SSM_AGENT_ACTIONS = [
  "ssm:UpdateInstanceInformation",
  "ssmmessages:CreateControlChannel",
  "ssmmessages:CreateDataChannel",
  "ssmmessages:OpenControlChannel",
  "ssmmessages:OpenDataChannel",
  "ec2messages:AcknowledgeMessage",
  "ec2messages:DeleteMessage",
  "ec2messages:FailMessage",
  "ec2messages:GetEndpoint",
  "ec2messages:GetMessages",
  "ec2messages:SendReply",
] as const;

const PARTITION = dataRef("aws_partition", "current", "partition");
const DNS_SUFFIX = dataRef("aws_partition", "current", "dns_suffix");
const ACCOUNT = dataRef("aws_caller_identity", "current", "account_id");

/** `arn:<partition>:s3:::<bucket>/<key-or-pattern>`. */
export function s3ObjectArn(bucket: string, keyPattern: string): string {
  return `arn:${PARTITION}:s3:::${literal(bucket)}/${literal(keyPattern)}`;
}

/** `arn:<partition>:<service>:<region>:<account>:<resource>`. */
export function regionalArn(
  { service, region, resource }: { service: string; region: string; resource: string },
): string {
  return `arn:${PARTITION}:${service}:${region}:${ACCOUNT}:${resource}`;
}

/** The trust policy letting EC2 instances assume a role. */
export function ec2AssumeRolePolicy(): Record<string, unknown> {
  return {
    Version: "2012-10-17",
    Statement: [{
      Sid: "Ec2Instances",
      Effect: "Allow",
      Principal: { Service: `ec2.${DNS_SUFFIX}` },
      Action: ["sts:AssumeRole"],
    }],
  };
}

function exact(ref: S3ObjectRef): string {
  return s3ObjectArn(ref.bucket, ref.key);
}

function ssmAgentStatement(): PolicyStatement {
  return { Sid: "SsmAgent", Effect: "Allow", Action: [...SSM_AGENT_ACTIONS], Resource: ["*"] };
}

/**
 * The node role: exactly docs/spec.md §8.1, plus `ec2:AssignIpv6Addresses` on the cluster's
 * own ENIs (tag condition) so bootstrap can delegate the Pod prefix to its Pod ENI.
 */
export function nodeRolePolicy(c: CheckedInputs): PolicyDocument {
  const { bucket, cluster, region } = c.spec;
  const statements: PolicyStatement[] = [
    {
      Sid: "ReadClusterBucket",
      Effect: "Allow",
      Action: ["s3:GetObject"],
      Resource: AGENT_READ_PREFIXES.map((p) => s3ObjectArn(bucket, `${p}*`)),
    },
    {
      Sid: "WriteAgentPrefixes",
      Effect: "Allow",
      Action: ["s3:PutObject", "s3:DeleteObject"],
      Resource: AGENT_WRITE_PREFIXES.map((p) => s3ObjectArn(bucket, `${p}*`)),
    },
    {
      // The CA state and its leader lease: written (never deleted) by exact key.
      Sid: "WriteIdentityState",
      Effect: "Allow",
      Action: ["s3:PutObject"],
      Resource: IDENTITY_WRITES.map((k) => s3ObjectArn(bucket, k)),
    },
  ];
  if (c.spec.workloadCaPublish) {
    statements.push({
      Sid: "PublishWorkloadCa",
      Effect: "Allow",
      Action: ["s3:GetObject", "s3:PutObject"],
      Resource: [exact(c.spec.workloadCaPublish)],
    });
  }
  if (c.spec.otelLogsCa) {
    statements.push({
      Sid: "ReadOtelLogsCa",
      Effect: "Allow",
      Action: ["s3:GetObject"],
      Resource: [exact(c.spec.otelLogsCa)],
    });
  }
  statements.push(
    {
      Sid: "ReadClusterParameters",
      Effect: "Allow",
      // GetParameters reads up to 10 named parameters per call (the agent batches its refreshes
      // to stay within Parameter Store's throughput quota); it names each parameter, so it
      // reaches nothing GetParameter does not. Never GetParametersByPath (enumeration).
      Action: ["ssm:GetParameter", "ssm:GetParameters"],
      Resource: [regionalArn({ service: "ssm", region, resource: `parameter/${cluster}/*` })],
    },
    {
      Sid: "ReadClusterSecrets",
      Effect: "Allow",
      Action: ["secretsmanager:GetSecretValue"],
      Resource: [
        regionalArn({ service: "secretsmanager", region, resource: `secret:/${cluster}/*` }),
      ],
    },
    ssmAgentStatement(),
    {
      Sid: "AssignPodPrefix",
      Effect: "Allow",
      Action: ["ec2:AssignIpv6Addresses"],
      Resource: [regionalArn({ service: "ec2", region, resource: "network-interface/*" })],
      Condition: { StringEquals: { [`aws:ResourceTag/${CLUSTER_TAG}`]: cluster } },
    },
  );
  if (c.spec.kmsKeyArns.length > 0) {
    statements.push({
      Sid: "DecryptNamedKeys",
      Effect: "Allow",
      Action: ["kms:Decrypt"],
      Resource: [...c.spec.kmsKeyArns],
      Condition: {
        StringEquals: {
          "kms:ViaService": [
            `ssm.${region}.${DNS_SUFFIX}`,
            `secretsmanager.${region}.${DNS_SUFFIX}`,
          ],
        },
      },
    });
  }
  return { Version: "2012-10-17", Statement: statements };
}

/**
 * A NAT64 instance role: attach exactly its own stable ENI (to an instance of its own group),
 * read the dependency files, and run SSM Agent. `eniId` is the interpolation of the ENI's id.
 */
export function nat64RolePolicy(
  inputs: CheckedInputs,
  { nat, eniId }: { nat: Nat64Plan; eniId: string },
): PolicyDocument {
  const { bucket, cluster, region } = inputs.spec;
  return {
    Version: "2012-10-17",
    Statement: [
      {
        Sid: "AttachOwnStableEni",
        Effect: "Allow",
        Action: ["ec2:AttachNetworkInterface"],
        Resource: [regionalArn({ service: "ec2", region, resource: `network-interface/${eniId}` })],
      },
      {
        Sid: "AttachToOwnGroupInstances",
        Effect: "Allow",
        Action: ["ec2:AttachNetworkInterface"],
        Resource: [regionalArn({ service: "ec2", region, resource: "instance/*" })],
        Condition: {
          StringEquals: {
            [`aws:ResourceTag/${CLUSTER_TAG}`]: cluster,
            [`aws:ResourceTag/${NAT64_TAG}`]: nat.key,
          },
        },
      },
      {
        Sid: "ReadDependencies",
        Effect: "Allow",
        Action: ["s3:GetObject"],
        Resource: [s3ObjectArn(bucket, `${PREFIXES.dependencies}*`)],
      },
      ssmAgentStatement(),
    ],
  };
}

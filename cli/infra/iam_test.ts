import assert from "node:assert/strict";
import {
  AGENT_READ_PREFIXES,
  AGENT_WRITE_PREFIXES,
  IDENTITY_WRITES,
} from "../../core/bucket/bucket_layout.ts";
import { generateTofu } from "./generate_tofu.ts";
import { SSM_AGENT_ACTIONS } from "./iam.ts";
import type { PolicyDocument } from "./iam.ts";
import type { TofuConfig } from "./tofu_json.ts";
import {
  ACCOUNT,
  grants,
  nodeGroup,
  P,
  refOf,
  resource,
  resources,
  rolePolicy,
  sampleInputs,
  sorted,
} from "../../tests/support/tofu_config.ts";

const BUCKET = "demo-cluster-bucket";
const REGION = "eu-west-1";

/** docs/spec.md §8.1, written out independently of the generator. */
function expectedNodeGrants(): Set<string> {
  const out = new Set<string>();
  for (const p of AGENT_READ_PREFIXES) out.add(`s3:GetObject ${P}:s3:::${BUCKET}/${p}*`);
  for (const p of AGENT_WRITE_PREFIXES) {
    out.add(`s3:PutObject ${P}:s3:::${BUCKET}/${p}*`);
    out.add(`s3:DeleteObject ${P}:s3:::${BUCKET}/${p}*`);
  }
  for (const k of IDENTITY_WRITES) out.add(`s3:PutObject ${P}:s3:::${BUCKET}/${k}`);
  out.add(`ssm:GetParameter ${P}:ssm:${REGION}:${ACCOUNT}:parameter/demo/*`);
  out.add(`ssm:GetParameters ${P}:ssm:${REGION}:${ACCOUNT}:parameter/demo/*`);
  out.add(`secretsmanager:GetSecretValue ${P}:secretsmanager:${REGION}:${ACCOUNT}:secret:/demo/*`);
  for (const a of SSM_AGENT_ACTIONS) out.add(`${a} *`);
  out.add(`ec2:AssignIpv6Addresses ${P}:ec2:${REGION}:${ACCOUNT}:network-interface/*`);
  return out;
}

function nodePolicy(config: TofuConfig): PolicyDocument {
  return rolePolicy(config, "node");
}

Deno.test("node role: exactly the documented grants and nothing else", () => {
  const config = generateTofu(sampleInputs());
  assert.deepEqual(sorted(grants(nodePolicy(config))), sorted(expectedNodeGrants()));
  // The prefixes come from bucket_layout.ts: read = the eight agent prefixes, write = dns/, identity/.
  assert.deepEqual([...AGENT_READ_PREFIXES], [
    "dependencies/",
    "apps/",
    "mirror/",
    "deployments/",
    "nodegroups/",
    "services/",
    "dns/",
    "identity/",
  ]);
  assert.deepEqual([...AGENT_WRITE_PREFIXES], ["dns/"]);
  // Under identity/: PutObject on exactly the CA state and its lease; no delete, no wildcard.
  assert.deepEqual([...IDENTITY_WRITES], ["identity/workload-ca.json", "identity/ca-leader.json"]);
  const identityGrants = [...grants(nodePolicy(config))].filter((g) =>
    g.includes(`:::${BUCKET}/identity/`) && !g.startsWith("s3:GetObject ")
  );
  assert.deepEqual(sorted(identityGrants), [
    `s3:PutObject ${P}:s3:::${BUCKET}/identity/ca-leader.json`,
    `s3:PutObject ${P}:s3:::${BUCKET}/identity/workload-ca.json`,
  ]);
});

Deno.test("node role: the publish and CA objects and named KMS keys add exactly those grants", () => {
  const key = "arn:aws:kms:eu-west-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab";
  const config = generateTofu(sampleInputs({
    workloadCaPublish: { bucket: "public-trust", key: "podmin/demo/workload-ca.pem" },
    otelLogsCa: { bucket: "telemetry-cas", key: "otel/ca.pem" },
    kmsKeyArns: [key, key],
  }));
  const expected = expectedNodeGrants();
  expected.add(`s3:GetObject ${P}:s3:::public-trust/podmin/demo/workload-ca.pem`);
  expected.add(`s3:PutObject ${P}:s3:::public-trust/podmin/demo/workload-ca.pem`);
  expected.add(`s3:GetObject ${P}:s3:::telemetry-cas/otel/ca.pem`);
  expected.add(`kms:Decrypt ${key}`);
  const policy = nodePolicy(config);
  assert.deepEqual(sorted(grants(policy)), sorted(expected));
  const kms = policy.Statement.find((s) => s.Action.includes("kms:Decrypt"))!;
  assert.deepEqual(kms.Condition, {
    StringEquals: {
      "kms:ViaService": [
        `ssm.${REGION}.\${data.aws_partition.current.dns_suffix}`,
        `secretsmanager.${REGION}.\${data.aws_partition.current.dns_suffix}`,
      ],
    },
  });
});

Deno.test("node role: no wildcard resource on data-bearing actions, no Parameter Store beyond /<cluster>/", () => {
  const config = generateTofu(sampleInputs({
    workloadCaPublish: { bucket: "pub", key: "ca.pem" },
    kmsKeyArns: ["arn:aws:kms:eu-west-1:123456789012:key/abc"],
  }));
  for (const st of nodePolicy(config).Statement) {
    for (const action of st.Action) {
      assert.ok(!action.includes("*"), `no action wildcards: ${action}`);
      const service = action.split(":")[0];
      if (action === "ssm:UpdateInstanceInformation") continue; // agent heartbeat, see iam.ts
      if (["s3", "ssm", "secretsmanager", "kms", "ec2"].includes(service)) {
        for (const r of st.Resource) assert.notEqual(r, "*", `${action} on *`);
      }
      if (service === "ssm") {
        assert.ok(
          ["ssm:GetParameter", "ssm:GetParameters", "ssm:UpdateInstanceInformation"].includes(
            action,
          ),
          action,
        );
      }
      if (action.startsWith("ssm:GetParameter")) {
        assert.deepEqual(st.Resource, [`${P}:ssm:${REGION}:${ACCOUNT}:parameter/demo/*`]);
      }
    }
    for (const r of st.Resource) {
      assert.ok(!r.includes(`${BUCKET}/infra/`), "agents never touch infra/");
      assert.ok(
        !r.endsWith(`:::${BUCKET}/*`) && !r.endsWith(`:::${BUCKET}`),
        "no whole-bucket grant",
      );
    }
  }
  const actions = new Set(nodePolicy(config).Statement.flatMap((s) => s.Action));
  for (const absent of ["s3:ListBucket", "ssm:GetParametersByPath", "kms:*"]) {
    assert.ok(!actions.has(absent), absent);
  }
  // No managed policy (AmazonSSMManagedInstanceCore would add Parameter Store reads).
  assert.deepEqual(resources(config, "aws_iam_role_policy_attachment"), {});
  assert.equal(resource(config, "aws_iam_role", "node").managed_policy_arns, undefined);
});

Deno.test("node role: assigning the Pod prefix is limited to the cluster's tagged ENIs", () => {
  const st = nodePolicy(generateTofu(sampleInputs())).Statement.find((s) =>
    s.Action.includes("ec2:AssignIpv6Addresses")
  )!;
  assert.deepEqual(st.Action, ["ec2:AssignIpv6Addresses"]);
  assert.deepEqual(st.Resource, [`${P}:ec2:${REGION}:${ACCOUNT}:network-interface/*`]);
  assert.deepEqual(st.Condition, { StringEquals: { "aws:ResourceTag/podmin:cluster": "demo" } });
});

Deno.test("node role: trusted by EC2 only, bound to every node launch template", () => {
  const config = generateTofu(sampleInputs({ nodeGroups: [nodeGroup("a"), nodeGroup("b", "b")] }));
  const role = resource(config, "aws_iam_role", "node");
  assert.equal(role.name, "podmin-demo-eu-west-1-node");
  assert.deepEqual(JSON.parse(role.assume_role_policy as string).Statement, [{
    Sid: "Ec2Instances",
    Effect: "Allow",
    Principal: { Service: "ec2.${data.aws_partition.current.dns_suffix}" },
    Action: ["sts:AssumeRole"],
  }]);
  const profile = resource(config, "aws_iam_instance_profile", "node");
  assert.equal(refOf(profile.role)?.name, "node");
  for (const name of ["ng_a", "ng_b"]) {
    const lt = resource(config, "aws_launch_template", name);
    assert.deepEqual(lt.iam_instance_profile, { arn: "${aws_iam_instance_profile.node.arn}" });
    const asg = resource(config, "aws_autoscaling_group", name);
    assert.ok((asg.depends_on as string[]).includes("aws_iam_role_policy.node"));
  }
});

Deno.test("NAT64 role: attach only its own stable ENI, read only dependencies/", () => {
  const config = generateTofu(sampleInputs({ nat64: {} }));
  const policy = rolePolicy(config, "nat64_zone_a");
  assert.deepEqual(
    sorted(grants(policy)),
    sorted([
      `ec2:AttachNetworkInterface ${P}:ec2:${REGION}:${ACCOUNT}:network-interface/\${aws_network_interface.nat64_zone_a.id}`,
      `ec2:AttachNetworkInterface ${P}:ec2:${REGION}:${ACCOUNT}:instance/*`,
      `s3:GetObject ${P}:s3:::${BUCKET}/dependencies/*`,
      ...SSM_AGENT_ACTIONS.map((a) => `${a} *`),
    ]),
  );
  const instances = policy.Statement.find((s) => s.Resource[0].endsWith(":instance/*"))!;
  assert.deepEqual(instances.Condition, {
    StringEquals: {
      "aws:ResourceTag/podmin:cluster": "demo",
      "aws:ResourceTag/podmin:nat64": "zone-a",
    },
  });
  assert.equal(
    resource(config, "aws_iam_role", "nat64_zone_a").name,
    "podmin-demo-eu-west-1-nat64-zone-a",
  );
});

Deno.test("long names stay within IAM's 64 characters and stay distinct", () => {
  const cluster = "c".repeat(63);
  const config = generateTofu(sampleInputs({
    cluster,
    nat64: {},
    nodeGroups: [nodeGroup("a"), nodeGroup("b", "a", { nat64: "t4g.nano" })],
  }));
  const names = Object.values(resources(config, "aws_iam_role")).map((r) => r.name as string);
  assert.equal(new Set(names).size, names.length);
  for (const n of names) assert.ok(n.length <= 64, n);
});

Deno.test("operator-supplied object keys are literal in the policy template", () => {
  const config = generateTofu(sampleInputs({
    workloadCaPublish: { bucket: "pub", key: "trust/%{x}/ca.pem" },
  }));
  const text = resource(config, "aws_iam_role_policy", "node").policy as string;
  assert.ok(text.includes(`${P}:s3:::pub/trust/%%{x}/ca.pem`), "escaped for Terraform");
  assert.ok(!text.includes("/%{x}"));
});

/**
 * What `podmin setup --dry-run` plans when architectures differ: the NAT64 instances' pinned
 * extras (Jool, SSM Agent) are kept for the NAT architecture even when no NodeGroup runs on it,
 * and a node architecture without a compiled agent gets the runtime-plus-bundle distribution.
 */

import assert from "node:assert/strict";
import { podmin } from "../support/programs.ts";

const hex = (c: string) => c.repeat(64);

Deno.test("setup --dry-run: NAT-architecture extras are kept when the NAT64 architecture differs from the nodes'", async () => {
  const tmp = await Deno.makeTempDir({ prefix: "podmin-plan-" });
  try {
    const pin = (name: string, arch: string, c: string) => ({
      name,
      version: "1.0.0",
      arch,
      url: `http://127.0.0.1:9/${name}-${arch}`,
      sha256: hex(c),
      size: 1000,
    });
    const catalog = {
      dependencies: [
        ...["containerd", "runc", "cni-plugins", "crictl", "kubelet"].map((n, i) =>
          pin(n, "amd64", String(i))
        ),
        pin("coredns", "amd64", "e"),
        pin("deno", "amd64", "5"),
        pin("jool", "arm64", "a"),
        pin("amazon-ssm-agent", "arm64", "b"),
        pin("amazon-ssm-agent", "amd64", "c"),
        pin("kubelet", "arm64", "d"), // a node dependency of an architecture no node runs on
      ],
    };
    await Deno.writeTextFile(`${tmp}/catalog.json`, JSON.stringify(catalog));
    const r = await podmin([
      "setup",
      "--cluster",
      "mixed",
      "--region",
      "us-east-1",
      "--vpc-cidr",
      "10.0.0.0/16",
      "--nat64", // t4g.nano: arm64
      "--nodegroup",
      "workers,instance-type=m7i.large", // amd64
      "--dependency-catalog",
      `${tmp}/catalog.json`,
      "--dry-run",
      "--out",
      `${tmp}/plan`,
    ], { PODMIN_CACHE_DIR: `${tmp}/cache` });
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stderr, /podmin-agent amd64: runtime-plus-bundle/);
    const plan = JSON.parse(await Deno.readTextFile(`${tmp}/plan/dependencies.json`));
    const planned = plan.dependencies.map((d: { name: string; arch: string }) =>
      `${d.name}/${d.arch}`
    ).sort();
    assert.ok(planned.includes("jool/arm64"), planned.join(" "));
    assert.ok(planned.includes("amazon-ssm-agent/arm64"), planned.join(" "));
    assert.ok(planned.includes("amazon-ssm-agent/amd64"), planned.join(" "));
    assert.ok(!planned.includes("kubelet/arm64"), "no node runs arm64");
    assert.ok(!planned.includes("deno/arm64"));
    assert.deepEqual(plan.missing, []);
    const nat = await Deno.readTextFile(`${tmp}/plan/user-data/nat64.sh`);
    assert.match(nat, new RegExp(`^jool 1\\.0\\.0 ${hex("a")} `, "m"));
    assert.match(nat, new RegExp(`^amazon-ssm-agent 1\\.0\\.0 ${hex("b")} `, "m"));
    const node = await Deno.readTextFile(`${tmp}/plan/user-data/workers.sh`);
    assert.match(node, new RegExp(`^amazon-ssm-agent 1\\.0\\.0 ${hex("c")} `, "m"));
    assert.match(node, new RegExp(`^deno 1\\.0\\.0 ${hex("5")} `, "m"));
    assert.match(node, /^podmin-agent-bundle 0\.1\.0-[0-9a-f]{12} [0-9a-f]{64} [1-9]/m);
  } finally {
    await Deno.remove(tmp, { recursive: true });
  }
});

Deno.test("setup --dry-run --kms-key-arn: nodes may kms:Decrypt with exactly the named keys; bad ARNs refused", async () => {
  const tmp = await Deno.makeTempDir({ prefix: "podmin-kms-" });
  const key1 = "arn:aws:kms:us-east-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab";
  const key2 = "arn:aws:kms:us-east-1:123456789012:key/mrk-0123456789abcdef";
  const base = [
    "setup",
    "--cluster",
    "kms",
    "--region",
    "us-east-1",
    "--vpc-cidr",
    "10.0.0.0/16",
    "--nodegroup",
    "default",
    "--dry-run",
    "--out",
    `${tmp}/plan`,
  ];
  try {
    const r = await podmin([...base, "--kms-key-arn", key1, "--kms-key-arn", key2], {
      PODMIN_CACHE_DIR: `${tmp}/cache`,
    });
    assert.equal(r.code, 0, r.stderr);
    const config = JSON.parse(await Deno.readTextFile(`${tmp}/plan/main.tf.json`));
    const policies = JSON.stringify(config.resource.aws_iam_role_policy);
    const statements = Object.values(
      config.resource.aws_iam_role_policy as Record<string, { policy: string }>,
    ).flatMap((p) => JSON.parse(p.policy).Statement as { Action: string[]; Resource: string[] }[]);
    const decrypt = statements.filter((s) => s.Action.includes("kms:Decrypt"));
    assert.equal(decrypt.length, 1, policies);
    assert.deepEqual(decrypt[0].Resource, [key1, key2].sort());
    const bad = await podmin([
      ...base,
      "--kms-key-arn",
      "arn:aws:kms:us-east-1:123456789012:alias/x",
    ]);
    assert.equal(bad.code, 2);
    assert.match(bad.stderr, /--kms-key-arn: expected a KMS key ARN/);
  } finally {
    await Deno.remove(tmp, { recursive: true });
  }
});

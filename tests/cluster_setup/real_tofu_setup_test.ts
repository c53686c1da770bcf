/**
 * The operator's path with real OpenTofu 1.10.10 and the AWS provider 6.48 on moto
 * (tests/support/real_tofu.ts; moto with the shims of its own faults,
 * tests/support/moto_tofu_shims.py): `podmin setup` with the seed's example flags applies the
 * generated configuration through the S3 backend, its state and lock file in the cluster bucket
 * on moto; planning the saved configuration again changes nothing (no delete, no replace, no
 * update), and a second `setup` with the same flags applies the same bytes and changes nothing;
 * a setup with an added NodeGroup adds and destroys nothing, one without a NodeGroup destroys
 * only that group's resources; the lock file a killed tofu leaves (real OpenTofu's lock info)
 * stops `teardown`, which names it, and `teardown --force-unlock ID` releases it and leaves
 * nothing setup created in moto; `destroy` removes the bucket.
 */

import assert from "node:assert/strict";
import * as path from "node:path";
import { GetObjectCommand, HeadBucketCommand } from "@aws-sdk/client-s3";
import { INFRA_CONFIG, INFRA_STATE } from "../../core/bucket/bucket_layout.ts";
import { podmin, waitFor } from "../support/programs.ts";
import { REAL_TOFU, tofu, TOFU_BINARY } from "../support/real_tofu.ts";
import { testWith } from "../support/requirements.ts";
import { withRealTofuCluster } from "../support/real_tofu_cluster.ts";
import {
  applySummary,
  describeUpdate,
  inventory,
  type ResourceChange,
  stateIds,
  warnings,
} from "../support/tofu_outcome.ts";

const CLUSTER = "real";
/** The seed's example (docs/spec.md §8.4's schema check uses the same), in us-east-1. */
const SEED_NODEGROUPS = [
  "default",
  "workers,size=3,disk-size=100,instance-type=c8g.large,zone=b,nat64=t4g.small",
];
const ADDED_NODEGROUP = "batch,size=1,instance-type=m7i.large,zone=a";
/** The resource types whose objects must never be deleted or replaced by a later setup. */
const KEPT_TYPES = [
  "aws_vpc",
  "aws_internet_gateway",
  "aws_subnet",
  "aws_iam_role",
  "aws_iam_instance_profile",
  "aws_security_group",
];

/** The same address has the same id in `after` for every kept type (not replaced). */
function assertKept(before: Map<string, string>, after: Map<string, string>, what: string) {
  const kept = [...before].filter(([a]) => KEPT_TYPES.includes(a.split(".")[0]));
  assert.ok(kept.length >= 8, `${what}: the state holds the VPC, gateway, subnets, roles…`);
  for (const [address, id] of kept) {
    assert.equal(after.get(address), id, `${what}: ${address} kept its id (not replaced)`);
  }
}

testWith(
  "setup, setup again, an added and a removed NodeGroup, teardown and destroy with real OpenTofu on moto",
  { ...REAL_TOFU, tools: ["distribution-registry", "skopeo"] },
  (t) =>
    withRealTofuCluster("podmin-real-tofu-", async (c) => {
      const { s3, env, tmp } = c;
      const bucket = `podmin-real-${Date.now().toString(36)}`;
      const workDir = path.join(tmp, "home", CLUSTER);
      const setup = (nodeGroups: string[]) =>
        c.setup({
          bucket,
          cluster: CLUSTER,
          args: [
            "--vpc-cidr",
            "10.0.0.0/16",
            "--nat64",
            ...nodeGroups.flatMap((ng) => ["--nodegroup", ng]),
          ],
        });
      const savedConfig = async () =>
        await (await s3.send(new GetObjectCommand({ Bucket: bucket, Key: INFRA_CONFIG }))).Body!
          .transformToString();
      const before = await inventory(c.endpoint);

      let firstConfig = "";
      let firstIds = new Map<string, string>();
      await t.step("setup applies the seed's example", async () => {
        const r = await setup(SEED_NODEGROUPS);
        assert.equal(r.code, 0, r.stderr);
        assert.match(r.stdout, /cluster real is set up: 2 NodeGroup\(s\) healthy/);
        assert.deepEqual(warnings(r.stderr), [], "tofu warns about nothing");
        const summary = applySummary(r.stderr);
        assert.equal(summary.destroyed, 0);
        assert.ok(summary.added > 40, `resources added: ${summary.added}`);
        firstConfig = await savedConfig();
        firstIds = await stateIds(s3, bucket);
        const after = await inventory(c.endpoint);
        assert.equal(after.vpcs.length, before.vpcs.length + 1, "one VPC created");
        assert.equal(after.autoScalingGroups.length, 4, "2 NodeGroups + 2 NAT64 groups");
      });

      await t.step("planning the saved configuration again changes nothing", async () => {
        const plan = path.join(workDir, "again.tfplan");
        const planned = await tofu(["plan", "-input=false", "-no-color", `-out=${plan}`], {
          cwd: workDir,
          env,
        });
        assert.deepEqual(warnings(planned.stdout + planned.stderr), []);
        const shown = await tofu(["show", "-json", "-no-color", plan], { cwd: workDir, env });
        const changes: ResourceChange[] = JSON.parse(shown.stdout).resource_changes ?? [];
        assert.ok(changes.length > 40, "the plan covers the configuration");
        const deleting = changes.filter((c) => c.change.actions.includes("delete"));
        assert.deepEqual(deleting.map((c) => `${c.address}: ${c.change.actions}`), []);
        const kept = changes.filter((c) => KEPT_TYPES.includes(c.type));
        assert.ok(kept.length >= 8);
        // Nothing else changes either (moto's drift is shimmed): no perpetual difference
        // between what the configuration says and what the provider reads back.
        const updates = changes.filter((c) => c.change.actions.includes("update"));
        assert.deepEqual(updates.map(describeUpdate), [], "nothing is updated");
        assert.ok(changes.every((c) => ["no-op", "read"].includes(c.change.actions.join())));
        await Deno.remove(plan);
      });

      await t.step(
        "a second setup with the same flags applies the same bytes, changes nothing",
        async () => {
          const r = await setup(SEED_NODEGROUPS);
          assert.equal(r.code, 0, r.stderr);
          assert.equal(await savedConfig(), firstConfig, "the configuration planned above");
          assert.equal(applySummary(r.stderr).destroyed, 0);
          assertKept(firstIds, await stateIds(s3, bucket), "second setup");
        },
      );

      await t.step("an added NodeGroup is added; nothing is destroyed", async () => {
        const r = await setup([...SEED_NODEGROUPS, ADDED_NODEGROUP]);
        assert.equal(r.code, 0, r.stderr);
        const summary = applySummary(r.stderr);
        assert.equal(summary.destroyed, 0);
        assert.ok(summary.added >= 2, `the batch launch template and group: ${summary.added}`);
        const ids = await stateIds(s3, bucket);
        assertKept(firstIds, ids, "setup with an added NodeGroup");
        assert.ok([...ids.keys()].some((a) => /^aws_autoscaling_group\..*batch/.test(a)));
      });

      await t.step("a removed NodeGroup's resources alone are destroyed", async () => {
        const before = await stateIds(s3, bucket);
        const r = await setup([SEED_NODEGROUPS[0], ADDED_NODEGROUP]);
        assert.equal(r.code, 0, r.stderr);
        const after = await stateIds(s3, bucket);
        const gone = [...before.keys()].filter((a) => !after.has(a));
        assert.equal(applySummary(r.stderr).destroyed, gone.length);
        assert.ok(gone.some((a) => /^aws_autoscaling_group\..*workers/.test(a)), gone.join(", "));
        // workers' own resources, and zone b's NAT64 subnet, which only workers' NAT64 used.
        const theirs = /workers|nat64_zone_b/;
        assert.deepEqual(gone.filter((a) => !theirs.test(a)), [], "only workers' resources");
        assert.ok(gone.includes("aws_subnet.nat64_zone_b"));
        const others = new Map([...firstIds].filter(([a]) => !theirs.test(a)));
        assertKept(others, after, "setup without workers");
      });

      const common = ["--bucket", `s3://${bucket}`, "--cluster", CLUSTER, "--work-dir", workDir];
      let lockId = "";
      await t.step(
        "a killed tofu's lock file is named by teardown, which changes nothing",
        async () => {
          const held = await stateIds(s3, bucket);
          // `tofu console` holds the state lock while it reads its input; killed, it leaves the
          // S3 backend's lock object behind, as a killed apply does.
          const holder = new Deno.Command(TOFU_BINARY, {
            args: ["console", "-no-color"],
            cwd: workDir,
            env,
            stdin: "piped",
            stdout: "null",
            stderr: "null",
          }).spawn();
          const lockKey = `${INFRA_STATE}.tflock`;
          const lockBody = async () => {
            try {
              const got = await s3.send(new GetObjectCommand({ Bucket: bucket, Key: lockKey }));
              return await got.Body!.transformToString();
            } catch {
              return undefined;
            }
          };
          await waitFor(
            "tofu console's state lock",
            async () => (await lockBody()) !== undefined,
            60_000,
          );
          holder.kill("SIGKILL");
          await holder.status;
          const lock = JSON.parse((await lockBody())!);
          lockId = lock.ID;
          assert.match(lockId, /^[0-9a-f-]{36}$/);
          const refused = await podmin(["teardown", ...common, "--yes"], env);
          assert.equal(refused.code, 1, refused.stderr);
          assert.match(
            refused.stderr,
            new RegExp(
              `state is locked: s3://${bucket}/infra/terraform\\.tfstate\\.tflock \\(lock ID ${lockId}, .*\\(OpenTofu 1\\.10\\.10\\) since ${
                lock.Created.slice(0, 19)
              }`,
            ),
          );
          assert.match(refused.stderr, new RegExp(`--force-unlock ${lockId}`));
          assert.ok(await lockBody(), "the lock is kept");
          assert.deepEqual(await stateIds(s3, bucket), held, "nothing was destroyed");
        },
      );

      await t.step(
        "teardown --force-unlock leaves nothing setup created; destroy removes the bucket",
        async () => {
          const down = await podmin(
            ["teardown", ...common, "--force-unlock", lockId, "--yes"],
            env,
          );
          assert.equal(down.code, 0, down.stderr);
          assert.match(down.stderr, new RegExp(`released the state lock .*${lockId}`));
          assert.match(down.stderr, /Destroy complete! Resources: \d+ destroyed/);
          assert.deepEqual(await stateIds(s3, bucket), new Map(), "the state manages nothing");
          assert.deepEqual(await inventory(c.endpoint), before);
          const gone = await podmin(["destroy", ...common, "--yes"], env);
          assert.equal(gone.code, 0, gone.stderr);
          await assert.rejects(s3.send(new HeadBucketCommand({ Bucket: bucket })));
        },
      );
    }),
);

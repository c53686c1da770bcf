/**
 * teardown and destroy against moto, with the tofu process boundary recorded
 * by tests/support/tofu_recorder.sh (the only double: tofu cannot fetch its
 * AWS provider here).
 */

import assert from "node:assert/strict";
import * as path from "node:path";
import { HeadBucketCommand, S3Client } from "@aws-sdk/client-s3";
import { GetParameterCommand, SSMClient } from "@aws-sdk/client-ssm";
import { ensureClusterCas } from "../../cli/setup/cluster_cas.ts";
import { DEPLOYMENT_INDEX, INFRA_CONFIG } from "../../core/bucket/bucket_layout.ts";
import { getIfExists } from "../../core/store/object_store.ts";
import { S3Store } from "../../core/store/s3_store.ts";
import { moto } from "../support/moto.ts";
import { podmin } from "../support/programs.ts";
import { runOnTerminal } from "../support/terminal.ts";

const recorder = new URL("../support/tofu_recorder.sh", import.meta.url).pathname;

async function records(
  file: string,
): Promise<{ cwd: string; args: string[]; env: Record<string, string | null> }[]> {
  try {
    return (await Deno.readTextFile(file)).trim().split("\n").filter(Boolean).map((l) =>
      JSON.parse(l)
    );
  } catch {
    return [];
  }
}

Deno.test("teardown/destroy [moto]: teardown keeps bucket and CAs; destroy needs confirmation, then removes everything", async () => {
  const m = await moto();
  await m.reset();
  const bucket = await m.createBucket();
  const store = new S3Store({ bucket, region: "us-east-1" });
  const ssm = new SSMClient({ region: "us-east-1" });
  const tmp = await Deno.makeTempDir({ prefix: "podmin-teardown-" });
  const log = path.join(tmp, "tofu.jsonl");
  const env = { PODMIN_TOFU: recorder, PODMIN_TOFU_LOG: log };
  const config = new TextEncoder().encode('{"terraform":{"backend":{"s3":{}}}}\n');
  try {
    await store.put(INFRA_CONFIG, config);
    await store.put(DEPLOYMENT_INDEX, new TextEncoder().encode("{}"));
    await ensureClusterCas({ ssm, cluster: "prod" });
    const workDir = path.join(tmp, "work");
    const common = ["--bucket", `s3://${bucket}`, "--cluster", "prod", "--work-dir", workDir];

    const t = await podmin(["teardown", ...common, "--yes"], env);
    assert.equal(t.code, 0, t.stderr);
    const calls = await records(log);
    assert.deepEqual(calls.map((c) => c.args[0]), ["init", "destroy"]);
    assert.ok(calls.every((c) => c.cwd === workDir), "tofu runs in the work dir");
    assert.ok(calls[1].args.includes("-auto-approve"));
    assert.equal(calls[1].env.TF_IN_AUTOMATION, "1");
    assert.deepEqual(
      await Deno.readFile(path.join(workDir, "main.tf.json")),
      config,
      "the saved configuration is used",
    );
    assert.ok(await getIfExists(store, DEPLOYMENT_INDEX), "bucket content kept");
    await ssm.send(new GetParameterCommand({ Name: "/prod/_system/workload-ca-key" })); // kept

    // destroy: refused without --yes when there is no terminal; nothing changes.
    const refused = await podmin(["destroy", ...common], env);
    assert.equal(refused.code, 2);
    assert.match(
      refused.stderr,
      /refusing to permanently delete cluster prod: .* without confirmation\nhint: pass --yes/,
    );
    assert.ok(await getIfExists(store, DEPLOYMENT_INDEX));

    // A failing tofu stops destroy before anything else is deleted.
    const failing = await podmin(["destroy", ...common, "--yes"], {
      ...env,
      PODMIN_TOFU_FAIL: "destroy",
    });
    assert.equal(failing.code, 1);
    assert.match(failing.stderr, /failed \(exit 1\)/);
    await ssm.send(new GetParameterCommand({ Name: "/prod/_system/cluster-ca" })); // still there

    const d = await podmin(["destroy", ...common, "--yes"], env);
    assert.equal(d.code, 0, d.stderr);
    assert.match(d.stdout, /cluster prod destroyed: 2 objects/);
    await assert.rejects(
      ssm.send(new GetParameterCommand({ Name: "/prod/_system/workload-ca-key" })),
      /ParameterNotFound/,
    );
    await assert.rejects(
      new S3Client({ region: "us-east-1", forcePathStyle: true }).send(
        new HeadBucketCommand({ Bucket: bucket }),
      ),
    );
  } finally {
    await Deno.remove(tmp, { recursive: true });
  }
});

Deno.test("teardown/destroy [moto]: on a terminal the operator types the cluster name; anything else changes nothing", async () => {
  const m = await moto();
  await m.reset();
  const bucket = await m.createBucket();
  const store = new S3Store({ bucket, region: "us-east-1" });
  const ssm = new SSMClient({ region: "us-east-1" });
  const tmp = await Deno.makeTempDir({ prefix: "podmin-confirm-" });
  const log = path.join(tmp, "tofu.jsonl");
  const env = { PODMIN_TOFU: recorder, PODMIN_TOFU_LOG: log };
  const main = new URL("../../cli/main.ts", import.meta.url).pathname;
  const common = (what: string) => [
    Deno.execPath(),
    "run",
    "-A",
    main,
    what,
    "--bucket",
    `s3://${bucket}`,
    "--cluster",
    "prod",
    "--work-dir",
    path.join(tmp, "work"),
  ];
  const prompt = /Type the cluster name \(prod\) to confirm:/;
  try {
    await store.put(
      INFRA_CONFIG,
      new TextEncoder().encode('{"terraform":{"backend":{"s3":{}}}}\n'),
    );
    await store.put(DEPLOYMENT_INDEX, new TextEncoder().encode("{}"));
    await ensureClusterCas({ ssm, cluster: "prod" });

    // A wrong answer: refused, tofu never ran.
    const wrong = await runOnTerminal({ command: common("teardown"), env, prompt, answer: "prd" });
    assert.ok(wrong.prompted, wrong.screen);
    assert.equal(wrong.code, 2, wrong.screen);
    assert.match(wrong.screen, /This will destroy the VMs, networks and roles of cluster prod/);
    assert.match(
      wrong.screen,
      /error: not confirmed; nothing was changed\nhint: type prod exactly/,
    );
    assert.deepEqual(await records(log), [], "tofu did not run");

    // The cluster name: teardown runs.
    const right = await runOnTerminal({ command: common("teardown"), env, prompt, answer: "prod" });
    assert.ok(right.prompted, right.screen);
    assert.equal(right.code, 0, right.screen);
    assert.match(right.screen, /cluster prod: infrastructure removed/);
    assert.deepEqual((await records(log)).map((c) => c.args[0]), ["init", "destroy"]);

    // destroy, confirmed on the terminal: everything goes.
    const destroyed = await runOnTerminal({
      command: common("destroy"),
      env,
      prompt,
      answer: "  prod ",
    });
    assert.ok(destroyed.prompted, destroyed.screen);
    assert.equal(destroyed.code, 0, destroyed.screen);
    assert.match(destroyed.screen, /This will permanently delete cluster prod/);
    assert.match(destroyed.screen, /cluster prod destroyed/);
    await assert.rejects(
      ssm.send(new GetParameterCommand({ Name: "/prod/_system/workload-ca-key" })),
      /ParameterNotFound/,
    );
  } finally {
    await Deno.remove(tmp, { recursive: true });
  }
});

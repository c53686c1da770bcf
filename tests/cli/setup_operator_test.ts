/** `podmin setup` and `teardown` as an operator expects them (issue 16, item 4). */

import assert from "node:assert/strict";
import { DependencyCache } from "../../cli/setup/dependency_cache.ts";
import { moto, motoInventory } from "../support/moto.ts";
import { cli, cliProcess, freshBucket } from "./harness.ts";

const SEED_EXAMPLE =
  "setup --vpc-cidr 10.0.0.0/16 --nat64 --nodegroup default --nodegroup workers,size=3,disk-size=100,instance-type=c8g.large,zone=b,nat64=t4g.small";

/** An environment with no AWS region variables: only what `extra` gives. */
function cleanEnv(tmp: string, extra: Record<string, string> = {}): Record<string, string> {
  const env: Record<string, string> = {
    PATH: Deno.env.get("PATH") ?? "/usr/bin:/bin",
    HOME: `${tmp}/home`,
    PODMIN_CACHE_DIR: `${tmp}/cache`,
    AWS_CONFIG_FILE: `${tmp}/aws-config`,
    AWS_SHARED_CREDENTIALS_FILE: `${tmp}/aws-credentials`,
    ...extra,
  };
  const denoDir = Deno.env.get("DENO_DIR") ??
    `${Deno.env.get("HOME")}/.cache/deno`;
  env.DENO_DIR = denoDir;
  return env;
}

Deno.test("setup: the seed's example works as written: default cluster, region from the AWS configuration, a truthful summary", async () => {
  const tmp = await Deno.makeTempDir({ prefix: "podmin-seed-" });
  await Deno.writeTextFile(`${tmp}/aws-config`, "[default]\nregion = eu-west-3\n");
  const r = await cliProcess([...SEED_EXAMPLE.split(" "), "--dry-run", "--out", `${tmp}/plan`], {
    env: cleanEnv(tmp),
    clearEnv: true,
  });
  assert.equal(r.code, 0, r.err);
  const files = [...Deno.readDirSync(`${tmp}/plan/user-data`)].map((e) => e.name).sort();
  assert.deepEqual(files, ["default.sh", "nat64.sh", "workers.sh"]);
  assert.match(r.out, /^Cluster:\s+default \(the default; --cluster ID to choose\)$/m);
  assert.match(r.out, /^Bucket:\s+s3:\/\/podmin-default$/m);
  assert.match(r.out, /^Region:\s+eu-west-3 \(from the AWS configuration\)$/m);
  assert.match(
    r.out,
    /^AMI arm64:\s+placeholder ami-00000000 \(setup reads \/aws\/service\/debian\/release\/12\/latest\/arm64\)$/m,
  );
  assert.match(r.out, /^NodeGroup default:\s+1 x t4g\.medium \(arm64\), 20 GiB, zone eu-west-3a$/m);
  assert.match(r.out, /^NodeGroup workers:\s+3 x c8g\.large \(arm64\), 100 GiB, zone eu-west-3b$/m);
  assert.match(r.out, /^NAT64:\s+shared t4g\.nano per zone; workers: dedicated t4g\.small$/m);
  assert.match(
    r.out,
    /^dry run: wrote .*\/plan\/main\.tf\.json, 3 user-data files \(default\.sh, workers\.sh, nat64\.sh\) and dependencies\.json; nothing was changed$/m,
  );
  const region = await cliProcess(
    [...SEED_EXAMPLE.split(" "), "--region", "us-west-2", "--dry-run", "--out", `${tmp}/p2`],
    { env: cleanEnv(tmp), clearEnv: true },
  );
  assert.match(region.out, /^Region:\s+us-west-2 \(--region\)$/m);
});

Deno.test("setup: size=0 is explained; the dry run neither warns about the agent nor suggests deno task compile", async () => {
  const tmp = await Deno.makeTempDir({ prefix: "podmin-size0-" });
  const r = await cliProcess([
    "setup",
    "--cluster",
    "zero",
    "--region",
    "us-east-1",
    "--vpc-cidr",
    "10.0.0.0/16",
    "--nodegroup",
    "idle,size=0",
    "--dry-run",
    "--out",
    `${tmp}/plan`,
  ], { env: cleanEnv(tmp), clearEnv: true });
  assert.equal(r.code, 0, r.err);
  assert.match(
    r.out,
    /^NodeGroup idle:\s+0 x t4g\.medium .*; size=0: no VMs until you raise size$/m,
  );
  assert.doesNotMatch(r.err, /deno task compile|missing|note:/);
});

Deno.test("setup [moto]: without a terminal and without --yes it shows the plan and creates nothing", async () => {
  const m = await moto();
  await m.reset();
  const before = await motoInventory();
  const tmp = await Deno.makeTempDir({ prefix: "podmin-ask-" });
  const bucket = `podmin-ask-${Date.now().toString(36)}`;
  const r = await cliProcess([
    "--bucket",
    `s3://${bucket}`,
    "setup",
    "--cluster",
    "ask",
    "--region",
    "us-east-1",
    "--vpc-cidr",
    "10.0.0.0/16",
    "--nodegroup",
    "default",
    "--ami",
    "arm64=ami-12345678",
  ], {
    env: cleanEnv(tmp, {
      AWS_ENDPOINT_URL: m.endpoint,
      AWS_ACCESS_KEY_ID: "test",
      AWS_SECRET_ACCESS_KEY: "test",
    }),
    clearEnv: true,
  });
  assert.equal(r.code, 2, r.err);
  assert.match(r.out, new RegExp(`^Bucket:\\s+s3://${bucket} \\(will be created\\)$`, "m"));
  assert.match(r.out, /^VPC:\s+new 10\.0\.0\.0\/16$/m);
  assert.match(r.out, /^AMI arm64:\s+ami-12345678 \(--ami\)$/m);
  assert.match(r.err, /^error: refusing to create cluster ask without confirmation$/m);
  assert.match(r.err, /^hint: pass --yes \(there is no terminal to ask on\)$/m);
  const s3 = await (await fetch(`${m.endpoint}/`)).text();
  assert.doesNotMatch(s3, new RegExp(`<Name>${bucket}</Name>`), "nothing was created");
  assert.deepEqual(await motoInventory(), before, "nothing was created on moto");
});

Deno.test("setup: a failed download's hint names the cache directory", async () => {
  const dir = await Deno.makeTempDir();
  const cache = new DependencyCache({ dir });
  const err = await cache.ensure({
    sha256: "0".repeat(64),
    url: "http://127.0.0.1:9/containerd.tar.gz",
    label: "containerd",
  }).then(() => undefined, (e) => e);
  assert.ok(err, "the download fails");
  assert.ok(
    err.hint.includes(
      `pre-seed the cache ${dir} ($PODMIN_CACHE_DIR; default ~/.cache/podmin/dependencies)`,
    ),
    err.hint,
  );
});

Deno.test("teardown: with nothing to remove it says so, and only that", async () => {
  const bucket = await freshBucket();
  const r = await cli("--bucket", bucket, "teardown", "--cluster", "gone", "--yes");
  assert.equal(r.code, 0, r.err);
  assert.match(
    r.out,
    /^cluster gone: no infrastructure to tear down \(no infra\/config\/main\.tf\.json in file:\/\/.*\); nothing was changed$/,
  );
  assert.doesNotMatch(r.out + r.err, /infrastructure removed/);
});

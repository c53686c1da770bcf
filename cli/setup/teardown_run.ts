/**
 * What `podmin teardown` (infrastructure gone; bucket, CAs and images kept) and
 * `podmin destroy` (everything Podmin created, including the bucket and the
 * CA parameters). Reused VPCs are never deleted: the generated configuration
 * only reads them. Their help and flags: cli/setup/teardown_commands.ts.
 */

import * as path from "node:path";
import { DeleteBucketCommand } from "@aws-sdk/client-s3";
import { SSMClient } from "@aws-sdk/client-ssm";
import { awsRequestHandler, requestTimeoutMs } from "../../core/kit/request_bounds.ts";
import { INFRA_CONFIG } from "../../core/bucket/bucket_layout.ts";
import {
  booleanFlag,
  bucketUrl,
  type CommandContext,
  requireString,
  stringFlag,
} from "../../core/kit/cli_kit.ts";
import { PodminError, PreconditionFailedError, UsageError } from "../../core/kit/errors.ts";
import { FsStore } from "../../core/store/fs_store.ts";
import { checkClusterId } from "../../core/model/names.ts";
import { getIfExists, type ObjectStore } from "../../core/store/object_store.ts";
import { S3Store } from "../../core/store/s3_store.ts";
import { defaultRegion, openStore } from "../../core/store/store_url.ts";
import { s3AdminClient } from "./s3_admin.ts";
import { deleteClusterCas } from "./cluster_cas.ts";
import { confirmDestructive } from "./confirm.ts";
import { tofuDestroy } from "./tofu_runner.ts";
import { describeLock, INFRA_STATE_LOCK, readStateLock, refuseLockedState } from "./tofu_state.ts";
import { defaultWorkDir } from "./work_dir.ts";

/** Dependencies injected by tests. */
export interface TeardownDeps {
  tofuBinary?: string;
  readLine?: () => Promise<string | null>;
  isTerminal?: boolean;
}

/**
 * Destroys the infrastructure described by the configuration saved in the bucket. A lock a
 * killed `tofu` left on the state (`infra/terraform.tfstate.tflock`) stops it with the lock's ID
 * and the command that releases it; `forceUnlock` (`--force-unlock ID`) releases exactly that
 * lock (its ID must match) and goes on.
 */
export async function teardownInfra(options: {
  store: ObjectStore;
  cluster: string;
  workDir: string;
  log: (line: string) => void;
  tofuBinary?: string;
  /** The ID of the lock to release first (`--force-unlock`). */
  forceUnlock?: string;
  /** The command being run, for the hint (`teardown` or `destroy`). */
  command?: string;
}): Promise<boolean> {
  const saved = await getIfExists(options.store, INFRA_CONFIG);
  if (!saved) return false;
  await releaseOrRefuseLock(options);
  await Deno.mkdir(options.workDir, { recursive: true });
  await Deno.writeFile(path.join(options.workDir, "main.tf.json"), saved.body);
  options.log(
    `destroying the infrastructure of ${options.cluster} (configuration from ${INFRA_CONFIG})`,
  );
  await tofuDestroy({ workDir: options.workDir, log: options.log, binary: options.tofuBinary });
  return true;
}

async function releaseOrRefuseLock(options: {
  store: ObjectStore;
  cluster: string;
  workDir: string;
  log: (line: string) => void;
  forceUnlock?: string;
  command?: string;
}): Promise<void> {
  const { store, cluster, forceUnlock } = options;
  const command = options.command ?? "teardown";
  if (forceUnlock === undefined) {
    await refuseLockedState(store, {
      release: (id) =>
        `podmin --bucket ${store.url} ${command} --cluster ${cluster} --force-unlock ${id} (or: tofu -chdir=${options.workDir} force-unlock -force ${id}, then run ${command} again)`,
    });
    return;
  }
  const lock = await readStateLock(store);
  if (!lock) {
    throw new UsageError(`--force-unlock ${forceUnlock}: the state is not locked`, {
      hint: `run ${command} without --force-unlock`,
    });
  }
  if (lock.id !== forceUnlock) {
    throw new UsageError(
      `--force-unlock ${forceUnlock}: the lock is ${describeLock(store, lock)}, not ${forceUnlock}`,
      { hint: "pass the lock ID named above (a newer tofu may hold it: check first)" },
    );
  }
  try {
    await store.delete(INFRA_STATE_LOCK, { ifMatch: lock.etag });
  } catch (err) {
    if (err instanceof PreconditionFailedError) {
      throw new PodminError(`the lock ${forceUnlock} changed while it was being released`, {
        cause: err,
        hint: `another tofu took the state lock: wait for it, then run ${command} again`,
      });
    }
    throw err;
  }
  options.log(`released the state lock ${describeLock(store, lock)}`);
}

/** Deletes every object of the bucket, then the bucket. */
export async function deleteBucket(
  store: ObjectStore,
  log: (line: string) => void,
): Promise<number> {
  let n = 0;
  const keys: string[] = [];
  for await (const o of store.list("")) keys.push(o.key);
  for (const key of keys) {
    await store.delete(key);
    if (++n % 500 === 0) log(`deleted ${n}/${keys.length} objects`);
  }
  if (store instanceof S3Store) {
    await s3AdminClient(store).send(new DeleteBucketCommand({ Bucket: store.bucket }));
  } else if (store instanceof FsStore) {
    await Deno.remove(store.root, { recursive: true });
  } else {
    throw new PodminError(`cannot delete ${store.url}: unknown store kind`);
  }
  return n;
}

function context(ctx: CommandContext) {
  const cluster = checkClusterId(requireString(ctx, "cluster", "e.g. --cluster prod"));
  const region = stringFlag(ctx, "region") ?? defaultRegion();
  const store = openStore(bucketUrl(ctx), { region });
  const workDir = stringFlag(ctx, "work-dir") ?? defaultWorkDir(cluster);
  return { cluster, region, store, workDir };
}

/**
 * What teardown and destroy begin with: the confirmation (unless --yes) to do `what`, then the
 * infrastructure torn down; `removed` is false when there was none.
 */
async function confirmThenTearDown(
  ctx: CommandContext,
  deps: TeardownDeps,
  o: { command: "teardown" | "destroy"; what: (c: ReturnType<typeof context>) => string },
): Promise<ReturnType<typeof context> & { removed: boolean }> {
  const c = context(ctx);
  await confirmDestructive({
    yes: booleanFlag(ctx, "yes"),
    cluster: c.cluster,
    what: o.what(c),
    err: ctx.err,
    readLine: deps.readLine,
    isTerminal: deps.isTerminal,
  });
  const removed = await teardownInfra({
    store: c.store,
    cluster: c.cluster,
    workDir: c.workDir,
    log: ctx.err,
    tofuBinary: deps.tofuBinary,
    forceUnlock: stringFlag(ctx, "force-unlock"),
    command: o.command,
  });
  return { ...c, removed };
}

/** `podmin teardown` (tests inject `deps`). */
export async function runTeardown(ctx: CommandContext, deps: TeardownDeps = {}): Promise<void> {
  const { cluster, store, removed } = await confirmThenTearDown(ctx, deps, {
    command: "teardown",
    what: ({ cluster }) =>
      `destroy the VMs, networks and roles of cluster ${cluster} (the bucket and CAs are kept)`,
  });
  ctx.out(
    removed
      ? `cluster ${cluster}: infrastructure removed; kept ${store.url}, /${cluster}/_system/* and images`
      : `cluster ${cluster}: no infrastructure to tear down (no ${INFRA_CONFIG} in ${store.url}); nothing was changed`,
  );
}

/** `podmin destroy` (tests inject `deps`). */
export async function runDestroy(ctx: CommandContext, deps: TeardownDeps = {}): Promise<void> {
  const { cluster, region, store, removed } = await confirmThenTearDown(ctx, deps, {
    command: "destroy",
    what: ({ cluster, store }) =>
      `permanently delete cluster ${cluster}: its infrastructure, ${store.url} and its CA keys`,
  });
  if (!removed) ctx.err(`no ${INFRA_CONFIG} in ${store.url}: no infrastructure to tear down`);
  const deleted = await deleteClusterCas({
    ssm: new SSMClient({ region, requestHandler: awsRequestHandler(requestTimeoutMs()) }),
    cluster,
  });
  for (const name of deleted) ctx.err(`deleted parameter ${name}`);
  const objects = await deleteBucket(store, ctx.err);
  ctx.out(
    `cluster ${cluster} destroyed: ${objects} objects and ${store.url} deleted, ${deleted.length} CA parameters deleted`,
  );
}

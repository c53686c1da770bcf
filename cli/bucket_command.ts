/** `podmin create-bucket`: the one explicit way to create a filesystem bucket. */

import { bucketUrl, type Command } from "../core/kit/cli_kit.ts";

const createBucketCommand: Command = {
  name: "create-bucket",
  summary: "create the filesystem bucket named by --bucket file:///path",
  help: `Usage: podmin --bucket file:///absolute/path create-bucket

Creates a filesystem bucket (idempotent). Every other command fails on a bucket
that does not exist, as on S3, instead of treating it as an empty cluster.
S3 buckets are created by 'podmin setup'.

Example:
  podmin --bucket file:///tmp/podmin-demo/bucket create-bucket`,
  options: {},
  async run(ctx) {
    const url = bucketUrl(ctx);
    const { createBucket } = await import("../core/store/bucket_url.ts"); // the filesystem store
    ctx.out(await createBucket(url) ? `created ${url}` : `${url} exists`);
  },
};

/** The bucket commands. */
export const bucketCommands: Command[] = [createBucketCommand];

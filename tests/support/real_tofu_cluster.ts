/**
 * The frame of a real-OpenTofu setup test (tests/support/real_tofu.ts): a dedicated moto with the
 * shims of its own faults, the setup sources (catalogue, registry, agents: setup_sources.ts), the
 * environment `podmin setup` runs tofu with, S3 and EC2 clients on that moto, and `podmin setup`
 * of one cluster with moto's AMIs; everything removed afterwards, also when the test fails.
 */

import { EC2Client } from "@aws-sdk/client-ec2";
import { S3Client } from "@aws-sdk/client-s3";
import { dedicatedMoto } from "./moto.ts";
import { podmin } from "./programs.ts";
import { realTofuEnv } from "./real_tofu.ts";
import { type SetupSources, setupSources } from "./setup_sources.ts";

/** moto's own AMIs of each architecture (data.aws_ami filters by id and architecture). */
export const MOTO_AMIS = { amd64: "ami-760aaa0f", arm64: "ami-0e9271c829888680e" };

/** What a real-tofu setup test works with. */
export interface RealTofuCluster {
  /** moto's endpoint. */
  endpoint: string;
  /** The test's temporary directory (PODMIN_HOME is `<tmp>/home`). */
  tmp: string;
  region: string;
  sources: SetupSources;
  /** The environment of `podmin` (tofu on moto, the test's cache and home). */
  env: Record<string, string>;
  ec2: EC2Client;
  s3: S3Client;
  /** `podmin --bucket s3://BUCKET setup --yes` of `cluster` with moto's AMIs and `args`. */
  setup(options: { bucket: string; cluster: string; args: string[] }): ReturnType<typeof podmin>;
}

/** Options of `withRealTofuCluster`. */
export interface RealTofuClusterOptions {
  /** Default us-east-1. */
  region?: string;
  /** What setup fetches, served from `tmp` (default `setupSources`: random bytes, a fake pause). */
  sources?: (tmp: string) => Promise<SetupSources>;
}

/** Runs `body` with a fresh `RealTofuCluster` (a temporary directory named by `prefix`). */
export async function withRealTofuCluster(
  prefix: string,
  body: (c: RealTofuCluster) => Promise<void>,
  options: RealTofuClusterOptions = {},
): Promise<void> {
  const region = options.region ?? "us-east-1";
  const m = await dedicatedMoto({ tofuShims: true });
  const tmp = await Deno.makeTempDir({ prefix });
  try {
    const sources = await (options.sources ?? setupSources)(tmp);
    try {
      const credentials = { accessKeyId: "test", secretAccessKey: "test" };
      const env = {
        ...realTofuEnv(m.endpoint, region),
        PODMIN_CACHE_DIR: `${tmp}/cache`,
        PODMIN_HOME: `${tmp}/home`,
      };
      await body({
        endpoint: m.endpoint,
        tmp,
        region,
        sources,
        env,
        ec2: new EC2Client({ region, endpoint: m.endpoint, credentials }),
        s3: new S3Client({ region, endpoint: m.endpoint, forcePathStyle: true, credentials }),
        setup: ({ bucket, cluster, args }) =>
          podmin([
            "--bucket",
            `s3://${bucket}`,
            "setup",
            "--yes",
            "--cluster",
            cluster,
            "--region",
            region,
            ...args,
            "--ami",
            `amd64=${MOTO_AMIS.amd64}`,
            "--ami",
            `arm64=${MOTO_AMIS.arm64}`,
            ...sources.args,
          ], env),
      });
    } finally {
      await sources.close();
    }
  } finally {
    await m.close();
    await Deno.remove(tmp, { recursive: true });
  }
}

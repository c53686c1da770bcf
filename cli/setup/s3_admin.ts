/**
 * The AWS SDK's S3 client for setup's and teardown's bucket administration (create, configure,
 * delete a bucket), aimed where the cluster's `S3Store` is. Object reads and writes go through
 * the store itself (core/store/s3_store.ts), which does not load the SDK.
 */

import {
  CreateBucketCommand,
  HeadBucketCommand,
  PutBucketLifecycleConfigurationCommand,
  PutPublicAccessBlockCommand,
  S3Client,
} from "@aws-sdk/client-s3";
import { PodminError } from "../../core/kit/errors.ts";
import { awsRequestHandler, requestTimeoutMs } from "../../core/kit/request_bounds.ts";
import type { ObjectStore } from "../../core/store/object_store.ts";
import { S3Store } from "../../core/store/s3_store.ts";

/** An S3 client for `store`'s bucket, region and endpoint. */
export function s3AdminClient(store: S3Store): S3Client {
  return new S3Client({
    region: store.region,
    endpoint: store.endpoint,
    forcePathStyle: store.endpoint !== undefined,
    useDualstackEndpoint: store.endpoint === undefined,
    requestHandler: awsRequestHandler(requestTimeoutMs()),
  });
}

/** True when the cluster bucket exists (a real setup's plan says whether it creates it). */
export async function bucketExistsIn(store: ObjectStore): Promise<boolean> {
  if (!(store instanceof S3Store)) return true;
  try {
    await s3AdminClient(store).send(new HeadBucketCommand({ Bucket: store.bucket }));
    return true;
  } catch (err) {
    const status = (err as { $metadata?: { httpStatusCode?: number } }).$metadata?.httpStatusCode;
    if (status === 404) return false;
    throw new PodminError(`cannot reach ${store.url}: ${(err as Error).message}`, { cause: err });
  }
}

/** Creates the cluster bucket when it does not exist: private, orphaned multipart uploads dropped. */
export async function ensureBucket(
  store: ObjectStore,
  region: string,
  log: (l: string) => void,
): Promise<void> {
  if (!(store instanceof S3Store)) return;
  const s3: S3Client = s3AdminClient(store);
  try {
    await s3.send(new HeadBucketCommand({ Bucket: store.bucket }));
  } catch (err) {
    const status = (err as { $metadata?: { httpStatusCode?: number } }).$metadata?.httpStatusCode;
    if (status !== 404) {
      throw new PodminError(`cannot reach ${store.url}: ${(err as Error).message}`, { cause: err });
    }
    log(`creating bucket ${store.bucket} in ${region}`);
    await s3.send(
      new CreateBucketCommand({
        Bucket: store.bucket,
        CreateBucketConfiguration: region === "us-east-1"
          ? undefined
          : { LocationConstraint: region as never },
      }),
    );
    // A bucket Podmin creates is private and drops multipart uploads orphaned by killed writers.
    await s3.send(
      new PutPublicAccessBlockCommand({
        Bucket: store.bucket,
        PublicAccessBlockConfiguration: {
          BlockPublicAcls: true,
          IgnorePublicAcls: true,
          BlockPublicPolicy: true,
          RestrictPublicBuckets: true,
        },
      }),
    );
    await s3.send(
      new PutBucketLifecycleConfigurationCommand({
        Bucket: store.bucket,
        LifecycleConfiguration: {
          Rules: [{
            ID: "podmin-abort-incomplete-uploads",
            Status: "Enabled",
            Filter: { Prefix: "" },
            AbortIncompleteMultipartUpload: { DaysAfterInitiation: 1 },
          }],
        },
      }),
    );
  }
}

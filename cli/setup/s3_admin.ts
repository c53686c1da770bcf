/**
 * The AWS SDK's S3 client for setup's and teardown's bucket administration (create, configure,
 * delete a bucket), aimed where the cluster's `S3Store` is. Object reads and writes go through
 * the store itself (core/store/s3_store.ts), which does not load the SDK.
 */

import { S3Client } from "@aws-sdk/client-s3";
import { awsRequestHandler, requestTimeoutMs } from "../../core/kit/request_bounds.ts";
import type { S3Store } from "../../core/store/s3_store.ts";

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

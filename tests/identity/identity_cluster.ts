/**
 * Test support for the workload CA election: real `podmin-agent run` processes on moto with a
 * CA key file on tmpfs and short lease and rotation settings, and readers of what they leave
 * behind (each agent's identity.json, the lease and state objects and their S3 versions).
 */

import {
  GetObjectCommand,
  ListObjectVersionsCommand,
  PutBucketVersioningCommand,
  S3Client,
} from "@aws-sdk/client-s3";
import * as path from "node:path";
import { generateKeyPair, privateKeyPem } from "../../core/crypto/certificates.ts";
import { type LeaseDocument, parseLeaseDocument } from "../../core/bucket/bucket_lease.ts";
import { WORKLOAD_CA_LEASE, WORKLOAD_CA_STATE } from "../../core/bucket/bucket_layout.ts";
import { parseWorkloadCaState, type WorkloadCaState } from "../../core/bucket/workload_ca_state.ts";
import type { IdentityStatus } from "../../agent/identity/ca_maintainer.ts";
import { nodeAgentArgs, spawnAgent } from "../support/programs.ts";

/** Fast settings: 4 s lease, 400 ms passes, a CA certificate lives 24 s (rotation every ~16 s). */
export const FAST_IDENTITY_ARGS = [
  "--identity-interval",
  "400ms",
  "--identity-lease",
  "4s",
  "--workload-ca-lifetime",
  "24s",
  "--workload-ca-trust-window",
  "1s",
  "--clock-skew",
  "100ms",
  "--registry-listen",
  "off",
  "--interval",
  "5s",
];

/** An S3 client on the suite's moto (AWS_ENDPOINT_URL is set by `moto()`). */
export function s3(): S3Client {
  return new S3Client({
    region: "us-east-1",
    endpoint: Deno.env.get("AWS_ENDPOINT_URL"),
    forcePathStyle: true,
  });
}

/** Turns on versioning, so every write of every object stays readable. */
export async function enableVersioning(bucket: string): Promise<void> {
  await s3().send(
    new PutBucketVersioningCommand({
      Bucket: bucket,
      VersioningConfiguration: { Status: "Enabled" },
    }),
  );
}

/** A CA key file in a tmpfs directory (/dev/shm when present), as `podmin local` keeps it. */
export async function caKeyFile(): Promise<{ dir: string; file: string }> {
  let dir: string;
  try {
    dir = await Deno.makeTempDir({ dir: "/dev/shm", prefix: "podmin-ca-" });
  } catch {
    dir = await Deno.makeTempDir({ prefix: "podmin-ca-" });
  }
  const file = path.join(dir, "workload-ca-key.pem");
  await Deno.writeTextFile(file, await privateKeyPem((await generateKeyPair()).privateKey), {
    mode: 0o600,
  });
  return { dir, file };
}

/** One running agent. */
export interface TestAgent {
  nodeId: string;
  base: string;
  child: Deno.ChildProcess;
  /** Its last identity.json, or undefined before its first pass. */
  identity(): Promise<IdentityStatus | undefined>;
}

/** Starts `podmin-agent run` as `nodeId` with the CA key file and extra args. */
export function startAgent(o: {
  bucket: string;
  nodeId: string;
  base: string;
  keyFile: string;
  extra?: string[];
}): TestAgent {
  const child = spawnAgent([
    ...nodeAgentArgs({ bucket: `s3://${o.bucket}`, nodeGroup: "workers", base: o.base }),
    "--node-id",
    o.nodeId,
    "--workload-ca-key",
    `file:${o.keyFile}`,
    ...FAST_IDENTITY_ARGS,
    ...(o.extra ?? []),
  ]);
  // Drain stderr so the agent never blocks on a full pipe.
  const logs: string[] = [];
  (async () => {
    const dec = new TextDecoder();
    for await (const chunk of child.stderr) logs.push(dec.decode(chunk));
  })().catch(() => {});
  return {
    nodeId: o.nodeId,
    base: o.base,
    child,
    async identity() {
      try {
        return JSON.parse(await Deno.readTextFile(path.join(o.base, "state", "identity.json")));
      } catch {
        return undefined;
      }
    },
  };
}

/** Reads the current lease document (undefined when absent). */
export async function readLease(bucket: string): Promise<LeaseDocument | undefined> {
  try {
    const out = await s3().send(new GetObjectCommand({ Bucket: bucket, Key: WORKLOAD_CA_LEASE }));
    return parseLeaseDocument(await out.Body!.transformToByteArray());
  } catch {
    return undefined;
  }
}

/** Reads the current CA state (undefined when absent). */
export async function readState(bucket: string): Promise<WorkloadCaState | undefined> {
  try {
    const out = await s3().send(new GetObjectCommand({ Bucket: bucket, Key: WORKLOAD_CA_STATE }));
    return parseWorkloadCaState(await out.Body!.transformToByteArray());
  } catch {
    return undefined;
  }
}

/** Every version of `key`, oldest first, as bytes. */
export async function versions(bucket: string, key: string): Promise<Uint8Array[]> {
  const ids: { id: string; at: number; n: number }[] = [];
  let keyMarker: string | undefined, versionMarker: string | undefined;
  let n = 0;
  for (;;) {
    const page = await s3().send(
      new ListObjectVersionsCommand({
        Bucket: bucket,
        Prefix: key,
        KeyMarker: keyMarker,
        VersionIdMarker: versionMarker,
      }),
    );
    for (const v of page.Versions ?? []) {
      if (v.Key === key) ids.push({ id: v.VersionId!, at: v.LastModified!.getTime(), n: n++ });
    }
    if (!page.IsTruncated) break;
    keyMarker = page.NextKeyMarker;
    versionMarker = page.NextVersionIdMarker;
  }
  // S3 lists a key's versions newest first.
  ids.reverse();
  const out: Uint8Array[] = [];
  for (const v of ids) {
    const r = await s3().send(new GetObjectCommand({ Bucket: bucket, Key: key, VersionId: v.id }));
    out.push(await r.Body!.transformToByteArray());
  }
  return out;
}

/** Stops an agent (signal), waiting for it to exit. */
export async function stopAgent(agent: TestAgent, signal: Deno.Signal = "SIGKILL"): Promise<void> {
  try {
    agent.child.kill(signal);
  } catch { /* gone */ }
  await agent.child.status;
}

/**
 * The Versity S3 Gateway (`versitygw`, built by tests/setup.sh) as an S3 server for the
 * cluster-scale bench: a real S3 implementation in Go, with a POSIX backend on tmpfs, SigV4
 * checked against one root key pair, and S3 server access logging. It serves several thousand
 * requests per second here where moto serves about 300, so a thousand simulated agents measure
 * Podmin rather than the S3 peer. Its requests are counted from its own access log (a forwarder
 * in front of it would change the Host header the signatures cover).
 *
 * `checkConditionalWrites` verifies, before a bench relies on them, the S3 behaviours Podmin's
 * leases and announcements need: `If-None-Match` GETs answered 304, and conditional writes that
 * are atomic (of concurrent writers on one version, one wins).
 *
 * Where it differs from S3 (found by running tests/store/contract_test.ts against it, v1.8.0): its
 * POSIX backend cannot hold a key and a key below it (`a` and `a/b`: ObjectParentIsFile), and a
 * `DELETE` with `If-Match` of an absent key succeeds where S3 answers 412. Podmin's bucket layout
 * has no such pair, and the bench does not depend on the second; it is not the test suite's store.
 */

import * as path from "node:path";
import { CreateBucketCommand, S3Client } from "@aws-sdk/client-s3";
import { PreconditionFailedError } from "../../core/kit/errors.ts";
import { S3Store } from "../../core/store/s3_store.ts";
import { freePort } from "./moto.ts";
import { waitFor } from "./programs.ts";

/** The version tests/setup.sh builds. */
export const VERSITYGW_MODULE = "github.com/versity/versitygw/cmd/versitygw@v1.8.0";

/** The root key pair every request is signed with. */
export const VERSITYGW_CREDENTIALS = { accessKeyId: "testing", secretAccessKey: "testing" };

/** A running gateway. */
export interface Versitygw {
  endpoint: string;
  /** The gateway's process id (for its CPU time). */
  pid: number;
  /** Creates a bucket and returns its name. */
  createBucket(name?: string): Promise<string>;
  /** A store on `bucket` signed with the root keys (not through the environment). */
  store(bucket: string): S3Store;
  /**
   * S3 requests served since the last `reset`, by `s3 <METHOD> <bucket>/<key>` (as
   * tests/bench/counting_proxy.ts names them: `LIST` for a bucket listing).
   */
  counts(): Promise<Map<string, number>>;
  reset(): Promise<void>;
  stop(): Promise<void>;
}

/** The access log's operation names, as the HTTP methods the counting proxy names. */
const METHODS: Record<string, string> = {
  GetObject: "GET",
  PutObject: "PUT",
  HeadObject: "HEAD",
  DeleteObject: "DELETE",
  ListObjectsV2: "LIST",
  ListObjects: "LIST",
  CreateMultipartUpload: "POST",
  CompleteMultipartUpload: "POST",
  UploadPart: "PUT",
};

/**
 * Parses access-log lines (S3 server access log format: owner, bucket, [time], remote, requester,
 * request id, `s3_<Operation>`, key, …) into request counts.
 */
export function countAccessLog(text: string, into = new Map<string, number>()) {
  for (const line of text.split("\n")) {
    const m = /^\S+ (\S+) \[[^\]]*\] \S+ \S+ \S+ s3_(\w+) (\S+)/.exec(line);
    if (!m) continue;
    const [, bucket, op, key] = m;
    const method = METHODS[op] ?? op;
    const k = `s3 ${method} ${bucket}/${key === "-" ? "" : key}`;
    into.set(k, (into.get(k) ?? 0) + 1);
  }
  return into;
}

/** Starts versitygw on a free loopback port with its objects in a fresh tmpfs directory. */
export async function startVersitygw(): Promise<Versitygw> {
  const root = await Deno.makeTempDir({ dir: "/dev/shm", prefix: "podmin-versitygw-" });
  const data = path.join(root, "data");
  const accessLog = path.join(root, "access.log");
  await Deno.mkdir(data);
  const port = await freePort();
  const endpoint = `http://127.0.0.1:${port}`;
  let child: Deno.ChildProcess;
  try {
    child = new Deno.Command("versitygw", {
      // Keep-alive as S3 does (versitygw closes every connection after one request without it).
      args: [
        "--port",
        `127.0.0.1:${port}`,
        "--keep-alive",
        "--access-log",
        accessLog,
        "posix",
        data,
      ],
      env: {
        ROOT_ACCESS_KEY: VERSITYGW_CREDENTIALS.accessKeyId,
        ROOT_SECRET_KEY: VERSITYGW_CREDENTIALS.secretAccessKey,
      },
      stdout: "null",
      stderr: "piped",
    }).spawn();
  } catch (err) {
    await Deno.remove(root, { recursive: true });
    throw new Error(
      `cannot start versitygw (${(err as Error).message}): run bash tests/setup.sh, which builds ` +
        `${VERSITYGW_MODULE} into /opt/podmin-test/bin, and put that directory on PATH`,
    );
  }
  const stderr = new Response(child.stderr).text();
  const s3 = new S3Client({
    region: "us-east-1",
    endpoint,
    forcePathStyle: true,
    credentials: VERSITYGW_CREDENTIALS,
  });
  const stop = async () => {
    s3.destroy();
    try {
      child.kill("SIGKILL");
    } catch { /* gone */ }
    await child.status;
    await stderr;
    await Deno.remove(root, { recursive: true }).catch(() => {});
  };
  try {
    await waitFor(`versitygw on ${endpoint}`, async () => {
      try {
        const res = await fetch(endpoint);
        await res.body?.cancel();
        return true; // any HTTP answer (403 without a signature) means it listens
      } catch {
        return false;
      }
    }, 15_000);
  } catch (err) {
    await stop();
    throw new Error(`${(err as Error).message}: ${(await stderr).slice(-500)}`);
  }
  let logOffset = 0;
  /** The log written since the last reset (the part before it is not read again). */
  const readLog = async () => {
    using file = await Deno.open(accessLog).catch(() => undefined);
    if (!file) return new Uint8Array();
    await file.seek(logOffset, Deno.SeekMode.Start);
    return new Uint8Array(await new Response(file.readable).arrayBuffer());
  };
  let n = 0;
  return {
    endpoint,
    pid: child.pid,
    async createBucket(name) {
      const bucket = name ?? `podmin-vgw-${Date.now().toString(36)}-${n++}`;
      await s3.send(new CreateBucketCommand({ Bucket: bucket }));
      return bucket;
    },
    store: (bucket) =>
      new S3Store({
        bucket,
        region: "us-east-1",
        endpoint,
        credentials: () => Promise.resolve(VERSITYGW_CREDENTIALS),
      }),
    async counts() {
      return countAccessLog(new TextDecoder().decode(await readLog()));
    },
    async reset() {
      // Only complete lines are counted: a line being written is counted after the next reset.
      const bytes = await readLog();
      logOffset += bytes.lastIndexOf(0x0a) + 1;
    },
    stop,
  };
}

/**
 * Checks what Podmin relies on of an S3 server, on `store`: a GET with the current ETag in
 * `If-None-Match` is not modified, a stale `If-Match` write is refused, and of 16 concurrent
 * writers (`If-Match` on one version, `If-None-Match: *` on a new key) exactly one wins.
 * Throws, saying which, when one does not hold.
 */
export async function checkConditionalWrites(store: S3Store): Promise<void> {
  const bytes = (s: string) => new TextEncoder().encode(s);
  const key = `conditional-check-${crypto.randomUUID()}.json`;
  const first = await store.put(key, bytes("1"));
  const get = await store.get(key, { ifNoneMatch: first.etag });
  if (!get.notModified) {
    throw new Error(`${store.url}: a GET with the current ETag in If-None-Match was not a 304`);
  }
  const second = await store.put(key, bytes("2"), { ifMatch: first.etag });
  const stale = await store.put(key, bytes("3"), { ifMatch: first.etag }).then(
    () => "written",
    (err) => (err instanceof PreconditionFailedError ? "refused" : String(err)),
  );
  if (stale !== "refused") throw new Error(`${store.url}: a stale If-Match write was ${stale}`);
  const race = async (what: string, write: (i: number) => Promise<unknown>) => {
    const results = await Promise.allSettled(Array.from({ length: 16 }, (_, i) => write(i)));
    const won = results.filter((r) => r.status === "fulfilled").length;
    const lost =
      results.filter((r) => r.status === "rejected" && r.reason instanceof PreconditionFailedError)
        .length;
    if (won !== 1 || lost !== 15) {
      throw new Error(`${store.url}: ${what}: ${won} of 16 won, ${lost} refused (want 1 and 15)`);
    }
  };
  await race("If-Match race", (i) => store.put(key, bytes(`w${i}`), { ifMatch: second.etag }));
  const fresh = `${key}.new`;
  await race(
    "If-None-Match: * race",
    (i) => store.put(fresh, bytes(`c${i}`), { ifNoneMatch: "*" }),
  );
  await store.delete(key);
  await store.delete(fresh);
}

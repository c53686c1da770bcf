/**
 * A counting HTTP forwarder in front of moto for the cluster-scale benchmark: every request of
 * every simulated agent (all worker processes) passes through it, is counted by what it is — an S3
 * request by method, bucket and key, an AWS JSON-protocol call (Parameter Store, Secrets Manager)
 * by its `X-Amz-Target` — and is forwarded unchanged to moto, whose answer is returned unchanged.
 * The counts are therefore the requests an AWS account would be billed for, whoever sent them.
 * (moto does not check signatures, so requests signed for the forwarder's host are accepted.)
 */

/** A running forwarder. */
export interface CountingProxy {
  endpoint: string;
  /** Requests counted since the last reset, by `what` (see `requestKind`). */
  counts(): Map<string, number>;
  reset(): void;
  close(): Promise<void>;
}

/**
 * What one request is: `s3 GET <bucket>/<key>` (`LIST` for a GET of the bucket itself), or
 * `aws <target>` (e.g. `aws AmazonSSM.GetParameters`).
 */
export function requestKind(req: Request): string {
  const target = req.headers.get("x-amz-target");
  if (target) return `aws ${target}`;
  const url = new URL(req.url);
  const [bucket, ...key] = url.pathname.slice(1).split("/");
  const k = decodeURIComponent(key.join("/"));
  const method = req.method === "GET" && !k ? "LIST" : req.method;
  return `s3 ${method} ${bucket}/${k}`;
}

/** Starts a forwarder on a free loopback port to `target` (e.g. moto's endpoint). */
export function countingProxy(target: string): CountingProxy {
  const counts = new Map<string, number>();
  const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen: () => {} }, async (req) => {
    const what = requestKind(req);
    counts.set(what, (counts.get(what) ?? 0) + 1);
    const url = new URL(req.url);
    const headers = new Headers(req.headers);
    headers.delete("host");
    const res = await fetch(`${target}${url.pathname}${url.search}`, {
      method: req.method,
      headers,
      body: req.body,
      redirect: "manual",
    });
    const empty = res.status === 204 || res.status === 304 || req.method === "HEAD";
    if (empty) await res.body?.cancel();
    return new Response(empty ? null : res.body, { status: res.status, headers: res.headers });
  });
  return {
    endpoint: `http://127.0.0.1:${server.addr.port}`,
    counts: () => new Map(counts),
    reset: () => counts.clear(),
    close: () => server.shutdown(),
  };
}

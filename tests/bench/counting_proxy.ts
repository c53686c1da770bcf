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
 * `aws <target>` (e.g. `aws AmazonSSM.GetParameters`). A request moto did not answer is also
 * counted as `forward failed`.
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

/**
 * Starts a forwarder on a free loopback port to `target` (e.g. moto's endpoint). At most
 * `maxInFlight` requests are forwarded at a time, the others wait in arrival order: moto is one
 * process whose listen backlog overflows (connections reset) when a thousand agents read at once,
 * which S3 never does; queued here, every request is still served, only later.
 */
export function countingProxy(
  target: string,
  options: { maxInFlight?: number } = {},
): CountingProxy {
  const counts = new Map<string, number>();
  const max = options.maxInFlight ?? 64;
  let inFlight = 0;
  const waiting: (() => void)[] = [];
  const acquire = async () => {
    if (inFlight >= max) await new Promise<void>((r) => waiting.push(r));
    else inFlight++;
  };
  // A released slot passes straight to the next waiter.
  const release = () => {
    const next = waiting.shift();
    if (next) next();
    else inFlight--;
  };
  const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen: () => {} }, async (req) => {
    const what = requestKind(req);
    counts.set(what, (counts.get(what) ?? 0) + 1);
    await acquire();
    try {
      return await forward(target, req);
    } catch (err) {
      // moto unreachable or the connection reset: the client sees a 502 (counted apart).
      counts.set("forward failed", (counts.get("forward failed") ?? 0) + 1);
      return new Response(`forward failed: ${(err as Error).message}`, { status: 502 });
    } finally {
      release();
    }
  });
  return {
    endpoint: `http://127.0.0.1:${server.addr.port}`,
    counts: () => new Map(counts),
    reset: () => counts.clear(),
    close: () => server.shutdown(),
  };
}

/** Forwards one request; the answer's body is read before the slot is released. */
async function forward(target: string, req: Request): Promise<Response> {
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
  const body = empty ? (await res.body?.cancel(), null) : await res.arrayBuffer();
  return new Response(body, { status: res.status, headers: res.headers });
}

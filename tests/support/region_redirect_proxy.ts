/**
 * A loopback proxy in front of moto that answers S3's region redirect, which moto does not
 * (moto serves a bucket of eu-west-1 to a request signed for us-east-1). A request for a bucket
 * of another region than the one its SigV4 credential scope names gets what S3 answers on a
 * wrong regional endpoint: `301 PermanentRedirect` with `x-amz-bucket-region: <region>` (and the
 * XML error body, except to HEAD). Every other request is passed to moto unchanged. The region
 * of each bucket is asked of moto once (GetBucketLocation).
 */

/** A running proxy. */
export interface RegionRedirectProxy {
  /** The proxy's endpoint (use it as AWS_ENDPOINT_URL_S3). */
  endpoint: string;
  /** Redirects answered so far, as `METHOD /bucket/key signed-region → bucket-region`. */
  redirects: string[];
  close(): Promise<void>;
}

/** Starts the proxy in front of the moto server at `motoEndpoint`. */
export function regionRedirectProxy(motoEndpoint: string): RegionRedirectProxy {
  const regions = new Map<string, string>();
  const redirects: string[] = [];
  const upstream = motoEndpoint.replace(/\/+$/, "");

  const bucketRegion = async (bucket: string): Promise<string | undefined> => {
    if (regions.has(bucket)) return regions.get(bucket);
    const r = await fetch(`${upstream}/${bucket}?location`);
    const text = await r.text();
    if (!r.ok) return undefined;
    // An empty LocationConstraint is us-east-1.
    const region = /<LocationConstraint[^>]*>([^<]*)<\/LocationConstraint>/.exec(text)?.[1] ||
      "us-east-1";
    regions.set(bucket, region);
    return region;
  };

  const server = Deno.serve(
    { hostname: "127.0.0.1", port: 0, onListen: () => {} },
    async (req) => {
      const url = new URL(req.url);
      const bucket = url.pathname.split("/")[1];
      const signed = /Credential=[^/]+\/\d{8}\/([^/]+)\/s3\//.exec(
        req.headers.get("authorization") ?? "",
      )?.[1];
      const region = bucket && signed ? await bucketRegion(bucket) : undefined;
      if (region && signed !== region) {
        redirects.push(`${req.method} ${url.pathname} ${signed} → ${region}`);
        await req.body?.cancel();
        const body = req.method === "HEAD" ? null : `<?xml version="1.0" encoding="UTF-8"?>
<Error><Code>PermanentRedirect</Code><Message>The bucket you are attempting to access must be addressed using the specified endpoint. Please send all future requests to this endpoint.</Message><Endpoint>${bucket}.s3.${region}.amazonaws.com</Endpoint><Bucket>${bucket}</Bucket><RequestId>PROXY</RequestId><HostId>PROXY</HostId></Error>`;
        return new Response(body, {
          status: 301,
          headers: { "x-amz-bucket-region": region, "content-type": "application/xml" },
        });
      }
      const headers = new Headers(req.headers);
      headers.delete("host");
      const body = req.body ? new Uint8Array(await req.arrayBuffer()) : undefined;
      const r = await fetch(`${upstream}${url.pathname}${url.search}`, {
        method: req.method,
        headers,
        body,
        redirect: "manual",
      });
      const out = new Headers(r.headers);
      if (bucket && region) out.set("x-amz-bucket-region", region);
      return new Response(req.method === "HEAD" ? null : r.body, {
        status: r.status,
        headers: out,
      });
    },
  );
  const { port } = server.addr as Deno.NetAddr;
  return {
    endpoint: `http://127.0.0.1:${port}`,
    redirects,
    async close() {
      await server.shutdown();
    },
  };
}

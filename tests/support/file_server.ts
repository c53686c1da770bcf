/** A loopback HTTP server of in-memory files (an upstream download site for setup tests). */

/** A running server. */
export interface FileServer {
  url(name: string): string;
  /** Number of GETs per file name. */
  hits: Map<string, number>;
  /**
   * Makes the next GET of `name` send its first `bytes` bytes and then stall (the body never
   * ends while the client stays connected): a client that has seen bytes of it is provably
   * mid-download. Resolves once the stalled response is made.
   */
  stallNext(name: string, bytes: number): Promise<void>;
  close(): Promise<void>;
}

/** Serves `files` at http://127.0.0.1:PORT/<name>. */
export function serveFiles(files: Map<string, Uint8Array>): FileServer {
  const hits = new Map<string, number>();
  const stalls = new Map<string, { bytes: number; reached: () => void }>();
  const stalled = new Set<ReadableStreamDefaultController<Uint8Array>>();
  const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen: () => {} }, (req) => {
    const name = decodeURIComponent(new URL(req.url).pathname.slice(1));
    const body = files.get(name);
    hits.set(name, (hits.get(name) ?? 0) + 1);
    if (!body) return new Response("not found", { status: 404 });
    const headers = { "Content-Length": String(body.byteLength) };
    const stall = stalls.get(name);
    if (!stall) return new Response(body as Uint8Array<ArrayBuffer>, { headers });
    stalls.delete(name);
    const stream = new ReadableStream<Uint8Array>({
      start(c) {
        c.enqueue(body.slice(0, stall.bytes));
        stalled.add(c);
        stall.reached();
      },
      cancel() {
        stalled.clear();
      },
    });
    return new Response(stream, { headers });
  });
  return {
    url: (name) => `http://127.0.0.1:${server.addr.port}/${encodeURIComponent(name)}`,
    hits,
    stallNext(name, bytes) {
      const { promise, resolve } = Promise.withResolvers<void>();
      stalls.set(name, { bytes, reached: resolve });
      return promise;
    },
    close: () => {
      for (const c of stalled) c.error(new Error("file server closed"));
      stalled.clear();
      return server.shutdown();
    },
  };
}

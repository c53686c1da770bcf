/** A loopback HTTP server of in-memory files (an upstream download site for setup tests). */

/** A running server. */
export interface FileServer {
  url(name: string): string;
  /** Number of GETs per file name. */
  hits: Map<string, number>;
  close(): Promise<void>;
}

/** Serves `files` at http://127.0.0.1:PORT/<name>. */
export function serveFiles(files: Map<string, Uint8Array>): FileServer {
  const hits = new Map<string, number>();
  const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen: () => {} }, (req) => {
    const name = decodeURIComponent(new URL(req.url).pathname.slice(1));
    const body = files.get(name);
    hits.set(name, (hits.get(name) ?? 0) + 1);
    if (!body) return new Response("not found", { status: 404 });
    return new Response(body as Uint8Array<ArrayBuffer>, {
      headers: { "Content-Length": String(body.byteLength) },
    });
  });
  return {
    url: (name) => `http://127.0.0.1:${server.addr.port}/${encodeURIComponent(name)}`,
    hits,
    close: () => server.shutdown(),
  };
}

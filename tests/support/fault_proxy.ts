/**
 * A loopback TCP proxy the test owns, in front of a real peer (moto): it passes traffic through,
 * or fails the way networks fail — refusing connections (not listening), resetting them (accept,
 * then close at once), or black-holing them (accept, never answer). Switching mode affects new
 * connections; `black-hole` and `reset` also cut the ones already open.
 */

/** How the proxy treats connections. */
export type ProxyMode = "pass" | "refuse" | "reset" | "black-hole";

/** A running proxy. */
export interface FaultProxy {
  endpoint: string;
  port: number;
  mode(): ProxyMode;
  setMode(mode: ProxyMode): void;
  close(): void;
}

/**
 * Starts a proxy on a free port of `listen` (default 127.0.0.1; e.g. a veth address another
 * network namespace reaches) in front of `target` (port on 127.0.0.1).
 */
export function faultProxy(targetPort: number, options: { listen?: string } = {}): FaultProxy {
  const hostname = options.listen ?? "127.0.0.1";
  let mode: ProxyMode = "pass";
  let listener: Deno.Listener | undefined;
  let closed = false;
  const open = new Set<Deno.Conn>();
  const first = Deno.listen({ hostname, port: 0 });
  const port = (first.addr as Deno.NetAddr).port;

  const cut = () => {
    for (const c of open) {
      try {
        c.close();
      } catch { /* already closed */ }
    }
    open.clear();
  };
  const serve = async (l: Deno.Listener) => {
    for await (const conn of l) {
      open.add(conn);
      if (mode === "reset") {
        open.delete(conn);
        conn.close();
      } else if (mode === "pass") {
        pipe(conn).finally(() => open.delete(conn));
      } // black-hole: hold it
    }
  };
  const pipe = async (conn: Deno.Conn) => {
    let upstream: Deno.Conn;
    try {
      upstream = await Deno.connect({ hostname: "127.0.0.1", port: targetPort });
    } catch {
      conn.close();
      return;
    }
    open.add(upstream);
    await Promise.allSettled([
      conn.readable.pipeTo(upstream.writable),
      upstream.readable.pipeTo(conn.writable),
    ]);
    open.delete(upstream);
  };
  const listen = (l?: Deno.Listener) => {
    listener = l ?? Deno.listen({ hostname, port });
    serve(listener).catch(() => {});
  };
  listen(first);
  return {
    endpoint: `http://${hostname.includes(":") ? `[${hostname}]` : hostname}:${port}`,
    port,
    mode: () => mode,
    setMode(next) {
      if (closed || next === mode) return;
      if (next === "refuse") {
        listener?.close();
        listener = undefined;
      } else if (mode === "refuse") {
        listen();
      }
      if (next !== "pass") cut();
      mode = next;
    },
    close() {
      closed = true;
      listener?.close();
      cut();
    },
  };
}

/** An S3 error answer the HTTP fault proxy gives instead of forwarding a request. */
export interface InjectedError {
  status: number;
  /** S3's error code (`SlowDown`, `OperationAborted`, …); the body is S3's XML error. */
  code: string;
  /** Only requests this matches are answered with the error (default: every request). */
  match?: (request: { method: string; path: string; headers: Headers }) => boolean;
  /** How many matching requests get the error (default 1; Infinity for all). */
  times?: number;
}

/** A running HTTP fault proxy. */
export interface HttpFaultProxy {
  endpoint: string;
  /** Requests seen, as "METHOD PATH STATUS" (STATUS is the injected or the forwarded one). */
  seen: string[];
  /** Answers the next matching requests with `error` (queued after earlier injections). */
  inject(error: InjectedError): void;
  /** Drops every pending injection: all requests reach the peer again. */
  clear(): void;
  close(): Promise<void>;
}

/**
 * An HTTP proxy in front of a real S3 endpoint (moto) that forwards every request, except those
 * an injection claims: they get S3's XML error with the injected status and code, as S3 sends
 * them, so the client's own error parsing runs. For error paths moto cannot produce on demand.
 */
export function httpFaultProxy(target: string): HttpFaultProxy {
  const injections: Required<InjectedError>[] = [];
  const seen: string[] = [];
  const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen: () => {} }, async (req) => {
    const url = new URL(req.url);
    const path = `${url.pathname}${url.search}`;
    const i = injections.findIndex((e) =>
      e.match({ method: req.method, path, headers: req.headers })
    );
    if (i >= 0) {
      const e = injections[i];
      if (--e.times <= 0) injections.splice(i, 1);
      await req.body?.cancel();
      seen.push(`${req.method} ${path} ${e.status}`);
      const body = `<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>${e.code}</Code>` +
        `<Message>injected by the test</Message><RequestId>FAULT</RequestId></Error>`;
      return new Response(body, {
        status: e.status,
        headers: { "Content-Type": "application/xml", "x-amz-request-id": "FAULT" },
      });
    }
    const headers = new Headers(req.headers);
    headers.delete("host");
    const res = await fetch(`${target}${path}`, {
      method: req.method,
      headers,
      body: req.body,
      redirect: "manual",
    });
    seen.push(`${req.method} ${path} ${res.status}`);
    return new Response(res.body, { status: res.status, headers: res.headers });
  });
  return {
    endpoint: `http://127.0.0.1:${server.addr.port}`,
    seen,
    inject(error) {
      injections.push({ match: () => true, times: 1, ...error });
    },
    clear() {
      injections.length = 0;
    },
    close: () => server.shutdown(),
  };
}

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

/** Starts a proxy on a free 127.0.0.1 port in front of `target` (port on 127.0.0.1). */
export function faultProxy(targetPort: number): FaultProxy {
  let mode: ProxyMode = "pass";
  let listener: Deno.Listener | undefined;
  let closed = false;
  const open = new Set<Deno.Conn>();
  const first = Deno.listen({ hostname: "127.0.0.1", port: 0 });
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
    listener = l ?? Deno.listen({ hostname: "127.0.0.1", port });
    serve(listener).catch(() => {});
  };
  listen(first);
  return {
    endpoint: `http://127.0.0.1:${port}`,
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

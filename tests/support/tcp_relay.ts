/**
 * A TCP relay: listens on one address and pipes every connection to a target (e.g. a loopback
 * server made reachable from the machine harness's "VPC" namespace through its host link).
 */

/** A running relay. */
export interface TcpRelay {
  /** The port it listens on. */
  port: number;
  /** Stops listening and closes every relayed connection. */
  close(): Promise<void>;
}

/** Relays connections to `listen.hostname` (port 0: a free one) to `target`. */
export function relayTcp(
  listen: { hostname: string; port?: number },
  target: { hostname: string; port: number },
): TcpRelay {
  const listener = Deno.listen({ hostname: listen.hostname, port: listen.port ?? 0 });
  const open = new Set<Deno.Conn>();
  const pipe = async (from: Deno.Conn, to: Deno.Conn) => {
    try {
      await from.readable.pipeTo(to.writable, { preventClose: true });
      await to.closeWrite().catch(() => {});
    } catch { /* either side went away */ }
  };
  const serve = async () => {
    for await (const client of listener) {
      open.add(client);
      Deno.connect(target).then(async (upstream) => {
        open.add(upstream);
        await Promise.all([pipe(client, upstream), pipe(upstream, client)]);
        for (const c of [client, upstream]) {
          open.delete(c);
          try {
            c.close();
          } catch { /* closed */ }
        }
      }, () => {
        open.delete(client);
        client.close();
      });
    }
  };
  const served = serve().catch(() => {});
  let closed = false;
  return {
    port: (listener.addr as Deno.NetAddr).port,
    /** Stops the relay; a second call does nothing. */
    async close() {
      if (closed) return await served;
      closed = true;
      listener.close();
      for (const c of open) {
        try {
          c.close();
        } catch { /* closed */ }
      }
      open.clear();
      await served;
    },
  };
}

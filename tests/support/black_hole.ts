/**
 * A loopback TCP peer that misbehaves the way a dead endpoint does: it accepts connections and
 * then never answers (`black-hole`), or answers the headers of a 200 and part of the body and
 * then stalls (`stall-body`). Connections are held until `close()`.
 */

/**
 * How the peer misbehaves: never answer, stall mid-body, or alternate between closing a
 * connection at once and answering 503 (so errors alternate from one request to the next).
 */
export type BlackHoleMode = "black-hole" | "stall-body" | "alternate";

/** A running peer. */
export interface BlackHole {
  endpoint: string;
  port: number;
  /** Connections accepted so far. */
  accepted(): number;
  close(): void;
}

/** Starts a peer on 127.0.0.1 (a free port). */
export function blackHole(mode: BlackHoleMode = "black-hole"): BlackHole {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const conns: Deno.Conn[] = [];
  let accepted = 0;
  (async () => {
    for await (const conn of listener) {
      accepted++;
      conns.push(conn);
      if (mode === "stall-body") stallBody(conn);
      if (mode === "alternate") {
        if (accepted % 2) conn.close();
        else answer503(conn);
      }
      // black-hole: read nothing, write nothing, keep the connection open.
    }
  })().catch(() => {});
  const port = (listener.addr as Deno.NetAddr).port;
  return {
    endpoint: `http://127.0.0.1:${port}`,
    port,
    accepted: () => accepted,
    close() {
      listener.close();
      for (const c of conns) {
        try {
          c.close();
        } catch { /* already closed */ }
      }
    },
  };
}

/** Reads the request head, answers 503 and closes the connection. */
async function answer503(conn: Deno.Conn): Promise<void> {
  const buf = new Uint8Array(64 * 1024);
  try {
    let head = "";
    while (!head.includes("\r\n\r\n")) {
      const n = await conn.read(buf);
      if (n === null) return;
      head += new TextDecoder().decode(buf.subarray(0, n));
    }
    await conn.write(
      new TextEncoder().encode(
        "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
      ),
    );
    conn.close();
  } catch { /* closed by the client */ }
}

/** Reads the request head, answers a 200 with 10 of 1,000 promised bytes, then stalls. */
async function stallBody(conn: Deno.Conn): Promise<void> {
  const buf = new Uint8Array(64 * 1024);
  let head = "";
  try {
    while (!head.includes("\r\n\r\n")) {
      const n = await conn.read(buf);
      if (n === null) return;
      head += new TextDecoder().decode(buf.subarray(0, n));
    }
    await conn.write(
      new TextEncoder().encode(
        'HTTP/1.1 200 OK\r\nContent-Length: 1000\r\nETag: "e"\r\n' +
          "Content-Type: application/octet-stream\r\n\r\n0123456789",
      ),
    );
  } catch { /* closed by the client */ }
}

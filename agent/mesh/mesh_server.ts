/**
 * The mesh's gRPC server on a TCP listener of its own (spec §7.9). grpc-js serves HTTP/2 over TLS
 * on every connection handed to it (its connection injector), and this module keeps every TCP
 * socket: closing the server destroys them first, so no session ever receives an HTTP/2 GOAWAY
 * from it — grpc-js's own shutdowns (`forceShutdown`, `tryShutdown`, `drain`) each send one, and
 * Deno's HTTP/2 client can abort the whole process on a GOAWAY (denoland/deno#36788). A peer sees
 * its streams end (the coordinator ends each call with a status first) and then a closed TCP
 * connection, from which it reconnects.
 */

import * as net from "node:net";
import * as grpc from "@grpc/grpc-js";
import { UsageError } from "../../core/kit/errors.ts";

/** Idle time before TCP keepalive probes start on a mesh connection. */
const TCP_KEEPALIVE_MS = 30_000;

/** Host and port of a listen address: `HOST:PORT`, `[IPv6]:PORT` (port 0: any free port). */
export function parseListenAddress(address: string): { host: string; port: number } {
  const m = /^\[([0-9A-Fa-f:.]+)\]:(\d{1,5})$/.exec(address) ??
    /^([^:\[\]]+):(\d{1,5})$/.exec(address);
  const port = m ? Number(m[2]) : NaN;
  if (!m || port > 65_535) {
    throw new UsageError(`mesh listen address ${JSON.stringify(address)} is not HOST:PORT`, {
      hint: "give --mesh-listen as [::]:7443, 0.0.0.0:7443 or 127.0.0.1:0",
    });
  }
  return { host: m[1], port };
}

/** A running mesh server: its port, and a close that sends no GOAWAY. */
export class MeshServer {
  readonly #grpc: grpc.Server;
  readonly #listener: net.Server;
  readonly #injector: ReturnType<grpc.Server["createConnectionInjector"]>;
  readonly #sockets = new Set<net.Socket>();
  /** Woken whenever a connection closes (`drained`). */
  readonly #onClose = new Set<() => void>();
  #closed = false;

  private constructor(
    server: grpc.Server,
    listener: net.Server,
    credentials: grpc.ServerCredentials,
  ) {
    this.#grpc = server;
    this.#listener = listener;
    this.#injector = server.createConnectionInjector(credentials);
    listener.on("connection", (socket: net.Socket) => {
      if (this.#closed) {
        socket.destroy();
        return;
      }
      this.#sockets.add(socket);
      // A dead peer's connection ends by TCP keepalive (the server sends no HTTP/2 pings).
      socket.setKeepAlive(true, TCP_KEEPALIVE_MS);
      socket.on("close", () => {
        this.#sockets.delete(socket);
        for (const wake of [...this.#onClose]) wake();
      });
      socket.on("error", () => {/* its close follows */});
      this.#injector.injectConnection(socket);
    });
  }

  /**
   * Listens on `address` (`parseListenAddress`) and serves `server`'s services with
   * `credentials` on every connection.
   */
  static async listen(
    server: grpc.Server,
    address: string,
    credentials: grpc.ServerCredentials,
  ): Promise<MeshServer> {
    const { host, port } = parseListenAddress(address);
    const listener = net.createServer();
    await new Promise<void>((resolve, reject) => {
      listener.once("error", reject);
      listener.listen({ host, port }, () => {
        listener.off("error", reject);
        resolve();
      });
    });
    return new MeshServer(server, listener, credentials);
  }

  /** The bound port. */
  get port(): number {
    return (this.#listener.address() as net.AddressInfo).port;
  }

  /** Open TCP connections (tests). */
  get connections(): number {
    return this.#sockets.size;
  }

  /**
   * Resolves once every connection was closed by its peer, or after `timeoutMs` (whichever comes
   * first): members close theirs when their calls end.
   */
  drained(timeoutMs: number): Promise<void> {
    return new Promise((resolve) => {
      const check = () => {
        if (this.#sockets.size > 0) return;
        clearTimeout(timer);
        this.#onClose.delete(check);
        resolve();
      };
      // A one-shot bound on the wait, not a periodic pass: no Loop.
      const timer = setTimeout(() => {
        this.#onClose.delete(check);
        resolve();
      }, timeoutMs);
      this.#onClose.add(check);
      check();
    });
  }

  /**
   * Closes without a GOAWAY: stops listening, destroys every TCP connection (a peer reads its
   * end, no frame), then lets grpc-js release its sessions, whose GOAWAYs have no socket left.
   */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#listener.close();
    for (const socket of this.#sockets) socket.destroy();
    this.#sockets.clear();
    this.#grpc.forceShutdown();
  }
}

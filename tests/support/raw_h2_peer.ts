/**
 * Raw HTTP/2 peers over mutual TLS for the GOAWAY tests (spec §7.9): a server a mesh member
 * connects to as its coordinator, and a client that connects to a mesh node's server as a member
 * would. Both speak HTTP/2 through hand-written frames (tests/support/h2_frames.ts) — SETTINGS and
 * PING acknowledgements are automatic, everything else (HEADERS, DATA, RST_STREAM, GOAWAY) is sent
 * when the test says — and record every frame they receive, so a test can send any sequence of
 * frames, in one write or several, and see exactly what the other side put on the wire.
 */

import { Buffer } from "node:buffer";
import * as net from "node:net";
import * as tls from "node:tls";
import {
  CLIENT_PREFACE,
  data,
  Flag,
  type Frame,
  FRAME_NAMES,
  FrameReader,
  FrameType,
  grpcMessage,
  headers,
  pingAck,
  settings,
} from "./h2_frames.ts";

/** PEM material of one side (a node certificate of the cluster CA, and that CA). */
export interface PeerTls {
  caPem: string;
  certPem: string;
  keyPem: string;
}

/** A frame as recorded, with when it arrived (performance.now()). */
export interface RecordedFrame extends Frame {
  at: number;
}

/** One HTTP/2 connection: frames in (recorded), frames out (by hand), its end. */
export class RawConnection {
  readonly socket: net.Socket;
  readonly frames: RecordedFrame[] = [];
  /** Client streams opened on this connection (a server's view). */
  readonly streams: number[] = [];
  /** Set when the socket closed (either side). */
  closedAt?: number;
  /** A protocol error of the peer (a wrong preface), if any. */
  error?: string;
  readonly #reader: FrameReader;
  readonly #waiters = new Set<() => void>();
  #pingAcks = true;

  constructor(socket: net.Socket, role: "server" | "client") {
    this.socket = socket;
    this.#reader = new FrameReader({ preface: role === "server" });
    socket.on("data", (chunk: Buffer) => this.#receive(chunk));
    socket.on("error", () => {/* its close follows */});
    socket.on("close", () => {
      this.closedAt = performance.now();
      this.#wake();
    });
  }

  /** Stops acknowledging PINGs (a peer that stalls). */
  stopPingAcks(): void {
    this.#pingAcks = false;
  }

  /** Writes frames in one write (one TLS record when they fit), so the peer reads them together. */
  send(...frames: Buffer[]): void {
    if (this.closedAt === undefined) this.socket.write(Buffer.concat(frames));
  }

  /** Response HEADERS of a gRPC call on `streamId` (status 200, application/grpc). */
  respond(streamId: number): void {
    this.send(
      headers(streamId, [[":status", "200"], ["content-type", "application/grpc"]]),
    );
  }

  /** One gRPC message of `value` (JSON) on `streamId`. */
  message(streamId: number, value: unknown): void {
    this.send(data(streamId, grpcMessage(value)));
  }

  /** Trailers ending `streamId` with gRPC `status` (the response HEADERS must have been sent). */
  trailers(streamId: number, status: number, message = ""): Buffer {
    return headers(streamId, [["grpc-status", String(status)], ["grpc-message", message]], true);
  }

  /** Destroys the socket: no frame, a TCP close. */
  destroy(): void {
    this.socket.destroy();
  }

  /** Frames received of `type`. */
  received(type: number): RecordedFrame[] {
    return this.frames.filter((f) => f.type === type);
  }

  /** Types of the frames received, by name, in order (for messages). */
  summary(): string {
    return this.frames.map((f) => `${FRAME_NAMES[f.type] ?? f.type}@${f.streamId}`).join(" ");
  }

  /** Resolves once `f()` holds (checked on every frame and on close); rejects after `timeoutMs`. */
  until(what: string, f: () => boolean, timeoutMs = 30_000): Promise<void> {
    if (f()) return Promise.resolve();
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.#waiters.delete(check);
        reject(new Error(`timed out waiting for ${what}; received: ${this.summary()}`));
      }, timeoutMs);
      const check = () => {
        if (!f()) return;
        clearTimeout(timer);
        this.#waiters.delete(check);
        resolve();
      };
      this.#waiters.add(check);
    });
  }

  /** Resolves when the socket closed. */
  closed(timeoutMs = 30_000): Promise<void> {
    return this.until("the connection's close", () => this.closedAt !== undefined, timeoutMs);
  }

  #receive(chunk: Buffer): void {
    let frames: Frame[];
    try {
      frames = this.#reader.push(chunk);
    } catch (err) {
      this.error = (err as Error).message;
      this.socket.destroy();
      return;
    }
    for (const f of frames) {
      this.frames.push({ ...f, at: performance.now() });
      if (f.type === FrameType.SETTINGS && !(f.flags & Flag.ACK)) this.send(settings(true));
      if (f.type === FrameType.PING && !(f.flags & Flag.ACK) && this.#pingAcks) {
        this.send(pingAck(f.payload));
      }
      if (f.type === FrameType.HEADERS && !this.streams.includes(f.streamId)) {
        this.streams.push(f.streamId);
      }
    }
    this.#wake();
  }

  #wake(): void {
    for (const w of [...this.#waiters]) w();
  }
}

/**
 * A raw HTTP/2 server: over TLS 1.3 (client certificates of the same CA required), or cleartext
 * (h2c with prior knowledge, as gRPC speaks it) on a unix socket.
 */
export class RawH2Server {
  readonly #server: net.Server;
  readonly connections: RawConnection[] = [];
  readonly #waiters = new Set<() => void>();

  private constructor(server: net.Server, event: "secureConnection" | "connection") {
    this.#server = server;
    server.on(event, (socket: net.Socket) => {
      const c = new RawConnection(socket, "server");
      c.send(settings());
      this.connections.push(c);
      for (const w of [...this.#waiters]) w();
    });
    server.on("tlsClientError", () => {/* a member gave up mid-handshake */});
  }

  /** Listens on 127.0.0.1 (an ephemeral port) with `t` as its identity. */
  static async listen(t: PeerTls): Promise<RawH2Server> {
    const server = tls.createServer({
      ca: t.caPem,
      cert: t.certPem,
      key: t.keyPem,
      requestCert: true,
      rejectUnauthorized: true,
      minVersion: "TLSv1.3",
      ALPNProtocols: ["h2"],
    });
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(0, "127.0.0.1", () => resolve());
    });
    return new RawH2Server(server, "secureConnection");
  }

  /** Listens on the unix socket `path`, cleartext. */
  static async listenUnix(path: string): Promise<RawH2Server> {
    const server = net.createServer();
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(path, () => resolve());
    });
    return new RawH2Server(server, "connection");
  }

  /** The bound port (TCP). */
  get port(): number {
    return (this.#server.address() as net.AddressInfo).port;
  }

  /** The `n`th connection (0-based), once it is made and its first stream opened. */
  async connection(n: number, timeoutMs = 30_000): Promise<RawConnection> {
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.#waiters.delete(check);
        reject(
          new Error(`timed out waiting for connection ${n} (${this.connections.length} made)`),
        );
      }, timeoutMs);
      const check = () => {
        if (this.connections.length <= n) return;
        clearTimeout(timer);
        this.#waiters.delete(check);
        resolve();
      };
      this.#waiters.add(check);
      check();
    });
    const c = this.connections[n];
    await c.until(`a stream on connection ${n}`, () => c.streams.length > 0, timeoutMs);
    return c;
  }

  /** Closes the listener and every connection (sockets destroyed: no frame). */
  async close(): Promise<void> {
    for (const c of this.connections) c.destroy();
    await new Promise<void>((resolve) => this.#server.close(() => resolve()));
  }
}

/** Options of `RawH2Client.connect`. */
export interface RawClientOptions extends PeerTls {
  host: string;
  port: number;
  /** The server certificate's DNS name (verified). */
  serverName: string;
}

/** A raw HTTP/2 client over TLS 1.3 with a client certificate: opens gRPC calls by hand. */
export class RawH2Client {
  readonly connection: RawConnection;
  #nextStream = 1;

  private constructor(connection: RawConnection) {
    this.connection = connection;
  }

  /** Connects, sends the preface and SETTINGS, and waits for the server's SETTINGS. */
  static async connect(o: RawClientOptions): Promise<RawH2Client> {
    const socket = await new Promise<tls.TLSSocket>((resolve, reject) => {
      const s = tls.connect({
        host: o.host,
        port: o.port,
        ca: o.caPem,
        cert: o.certPem,
        key: o.keyPem,
        servername: o.serverName,
        minVersion: "TLSv1.3",
        ALPNProtocols: ["h2"],
      }, () => resolve(s));
      s.once("error", reject);
    });
    const c = new RawConnection(socket, "client");
    socket.write(Buffer.concat([CLIENT_PREFACE, settings()]));
    await c.until("the server's SETTINGS", () => c.received(FrameType.SETTINGS).length > 0);
    return new RawH2Client(c);
  }

  /** Opens a gRPC call to `path` and sends `message` on it (the stream stays open); its id. */
  call(path: string, authority: string, message: unknown): number {
    const id = this.#nextStream;
    this.#nextStream += 2;
    this.connection.send(
      headers(id, [
        [":method", "POST"],
        [":scheme", "https"],
        [":path", path],
        [":authority", authority],
        ["content-type", "application/grpc"],
        ["te", "trailers"],
      ]),
      data(id, grpcMessage(message)),
    );
    return id;
  }
}

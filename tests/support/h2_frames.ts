/**
 * HTTP/2 frames written and read by hand (RFC 9113 §4, §6), for the raw peers of the GOAWAY tests
 * (tests/support/raw_h2_peer.ts): a frame encoder, an incremental frame reader, a minimal HPACK
 * encoder (literal fields, no Huffman, no dynamic table) and the gRPC message prefix. No HTTP/2
 * library is involved, so a peer built on them sends exactly the frames a test chooses.
 */

import { Buffer } from "node:buffer";

/** Frame types (RFC 9113 §6). */
export const FrameType = {
  DATA: 0,
  HEADERS: 1,
  PRIORITY: 2,
  RST_STREAM: 3,
  SETTINGS: 4,
  PUSH_PROMISE: 5,
  PING: 6,
  GOAWAY: 7,
  WINDOW_UPDATE: 8,
  CONTINUATION: 9,
} as const;

/** Frame type names by number, for records and messages. */
export const FRAME_NAMES: Record<number, string> = Object.fromEntries(
  Object.entries(FrameType).map(([k, v]) => [v, k]),
);

/** Frame flags used here. */
export const Flag = { END_STREAM: 0x1, ACK: 0x1, END_HEADERS: 0x4 } as const;

/** Error codes (RFC 9113 §7). */
export const ErrorCode = {
  NO_ERROR: 0,
  PROTOCOL_ERROR: 1,
  INTERNAL_ERROR: 2,
  REFUSED_STREAM: 7,
  CANCEL: 8,
  ENHANCE_YOUR_CALM: 11,
} as const;

/** The client connection preface (RFC 9113 §3.4). */
export const CLIENT_PREFACE = Buffer.from("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", "latin1");

/** The largest stream id (2^31 − 1): a GOAWAY naming it refuses no stream. */
export const MAX_STREAM_ID = 0x7fffffff;

/** One frame as read. */
export interface Frame {
  type: number;
  flags: number;
  streamId: number;
  payload: Buffer;
}

/** Encodes one frame. */
export function frame(
  type: number,
  flags: number,
  streamId: number,
  payload: Uint8Array = new Uint8Array(),
): Buffer {
  const head = Buffer.alloc(9);
  head.writeUIntBE(payload.length, 0, 3);
  head[3] = type;
  head[4] = flags;
  head.writeUInt32BE(streamId & MAX_STREAM_ID, 5);
  return Buffer.concat([head, payload]);
}

/** A SETTINGS frame with no parameters (the defaults), or its acknowledgement. */
export function settings(ack = false): Buffer {
  return frame(FrameType.SETTINGS, ack ? Flag.ACK : 0, 0);
}

/** A PING acknowledgement echoing `payload`. */
export function pingAck(payload: Uint8Array): Buffer {
  return frame(FrameType.PING, Flag.ACK, 0, payload);
}

/** RST_STREAM of `streamId` with `code`. */
export function rstStream(streamId: number, code: number): Buffer {
  const p = Buffer.alloc(4);
  p.writeUInt32BE(code >>> 0);
  return frame(FrameType.RST_STREAM, 0, streamId, p);
}

/** GOAWAY naming `lastStreamId` as the last stream processed, with `code` and debug data. */
export function goaway(lastStreamId: number, code: number, debug = ""): Buffer {
  const p = Buffer.alloc(8);
  p.writeUInt32BE(lastStreamId & MAX_STREAM_ID, 0);
  p.writeUInt32BE(code >>> 0, 4);
  return frame(FrameType.GOAWAY, 0, 0, Buffer.concat([p, Buffer.from(debug)]));
}

/** WINDOW_UPDATE of `streamId` (0: the connection) by `increment`. */
export function windowUpdate(streamId: number, increment: number): Buffer {
  const p = Buffer.alloc(4);
  p.writeUInt32BE(increment & MAX_STREAM_ID);
  return frame(FrameType.WINDOW_UPDATE, 0, streamId, p);
}

/** What a GOAWAY frame says. */
export interface Goaway {
  lastStreamId: number;
  code: number;
  debug: string;
}

/** Decodes a GOAWAY frame's payload. */
export function parseGoaway(f: Frame): Goaway {
  return {
    lastStreamId: f.payload.readUInt32BE(0) & MAX_STREAM_ID,
    code: f.payload.readUInt32BE(4),
    debug: f.payload.subarray(8).toString("latin1"),
  };
}

function hpackInt(value: number, prefixBits: number, firstByte: number): number[] {
  const max = (1 << prefixBits) - 1;
  if (value < max) return [firstByte | value];
  const out = [firstByte | max];
  let rest = value - max;
  while (rest >= 128) {
    out.push((rest % 128) + 128);
    rest = Math.floor(rest / 128);
  }
  out.push(rest);
  return out;
}

function hpackString(s: string): number[] {
  const bytes = [...Buffer.from(s, "latin1")];
  return [...hpackInt(bytes.length, 7, 0), ...bytes];
}

/** A header block of literal fields without indexing (HPACK §6.2.2), names lowercase. */
export function headerBlock(fields: [string, string][]): Buffer {
  const out: number[] = [];
  for (const [name, value] of fields) out.push(0x00, ...hpackString(name), ...hpackString(value));
  return Buffer.from(out);
}

/** HEADERS of `streamId` carrying `fields` in one block (END_HEADERS), optionally ending the stream. */
export function headers(streamId: number, fields: [string, string][], endStream = false): Buffer {
  return frame(
    FrameType.HEADERS,
    Flag.END_HEADERS | (endStream ? Flag.END_STREAM : 0),
    streamId,
    headerBlock(fields),
  );
}

/** A gRPC length-prefixed message (uncompressed) holding `value` as JSON (the mesh's encoding). */
export function grpcMessage(value: unknown): Buffer {
  const body = Buffer.from(JSON.stringify(value));
  const prefix = Buffer.alloc(5);
  prefix.writeUInt32BE(body.length, 1);
  return Buffer.concat([prefix, body]);
}

/** DATA of `streamId`. */
export function data(streamId: number, payload: Uint8Array, endStream = false): Buffer {
  return frame(FrameType.DATA, endStream ? Flag.END_STREAM : 0, streamId, payload);
}

/** Splits a byte stream into frames; `preface` first expects the client preface (a server's reader). */
export class FrameReader {
  #buffer = Buffer.alloc(0);
  #preface: boolean;

  constructor(options: { preface?: boolean } = {}) {
    this.#preface = options.preface ?? false;
  }

  /** Adds bytes; returns the frames they complete. Throws on a wrong preface. */
  push(chunk: Uint8Array): Frame[] {
    this.#buffer = Buffer.concat([this.#buffer, chunk]);
    if (this.#preface) {
      if (this.#buffer.length < CLIENT_PREFACE.length) return [];
      if (!this.#buffer.subarray(0, CLIENT_PREFACE.length).equals(CLIENT_PREFACE)) {
        throw new Error("not an HTTP/2 client preface");
      }
      this.#buffer = this.#buffer.subarray(CLIENT_PREFACE.length);
      this.#preface = false;
    }
    const frames: Frame[] = [];
    while (this.#buffer.length >= 9) {
      const length = this.#buffer.readUIntBE(0, 3);
      if (this.#buffer.length < 9 + length) break;
      frames.push({
        type: this.#buffer[3],
        flags: this.#buffer[4],
        streamId: this.#buffer.readUInt32BE(5) & MAX_STREAM_ID,
        payload: Buffer.from(this.#buffer.subarray(9, 9 + length)),
      });
      this.#buffer = this.#buffer.subarray(9 + length);
    }
    return frames;
  }
}

/**
 * The protobuf wire format, as far as the Pods API needs it: reading fields (varint, 64-bit,
 * length-delimited, 32-bit) of untrusted bytes with every length checked, and writing one string
 * field. Messages are declared by hand in `pod_proto.ts` (no code generation, no reflection).
 */

/** A malformed message. */
export class WireError extends Error {}

/** One field of a message. */
export type WireField =
  | { field: number; wire: 0; value: bigint }
  | { field: number; wire: 1 | 5; value: Uint8Array }
  | { field: number; wire: 2; value: Uint8Array };

/** Reads a varint at `at`; returns the value and the next offset. */
function varint(bytes: Uint8Array, at: number): [bigint, number] {
  let result = 0n;
  let shift = 0n;
  for (let i = 0; i < 10; i++) {
    if (at >= bytes.length) throw new WireError("truncated varint");
    const b = bytes[at++];
    result |= BigInt(b & 0x7f) << shift;
    if (!(b & 0x80)) return [result, at];
    shift += 7n;
  }
  throw new WireError("varint longer than 10 bytes");
}

/** The fields of a message, in order. Throws `WireError` for malformed bytes. */
export function* fields(bytes: Uint8Array): Generator<WireField> {
  let at = 0;
  while (at < bytes.length) {
    const [key, next] = varint(bytes, at);
    at = next;
    const field = Number(key >> 3n);
    const wire = Number(key & 7n);
    if (field === 0) throw new WireError("field number 0");
    switch (wire) {
      case 0: {
        const [value, n] = varint(bytes, at);
        at = n;
        yield { field, wire, value };
        break;
      }
      case 1:
      case 5: {
        const size = wire === 1 ? 8 : 4;
        if (at + size > bytes.length) throw new WireError("truncated fixed-width field");
        yield { field, wire, value: bytes.subarray(at, at + size) };
        at += size;
        break;
      }
      case 2: {
        const [len, n] = varint(bytes, at);
        if (len > BigInt(bytes.length - n)) throw new WireError("length past the end");
        at = n + Number(len);
        yield { field, wire, value: bytes.subarray(n, at) };
        break;
      }
      default:
        throw new WireError(`unsupported wire type ${wire}`);
    }
  }
}

/** UTF-8 of a length-delimited field. */
export function text(value: Uint8Array): string {
  return new TextDecoder().decode(value);
}

/** Encodes one length-delimited field (a string or bytes) — enough for `GetPodRequest`. */
export function lengthDelimited(field: number, value: Uint8Array): Uint8Array {
  const head: number[] = [];
  let key = (field << 3) | 2;
  do {
    head.push((key & 0x7f) | (key >= 0x80 ? 0x80 : 0));
    key >>>= 7;
  } while (key > 0);
  let len = value.length;
  do {
    head.push((len & 0x7f) | (len >= 0x80 ? 0x80 : 0));
    len >>>= 7;
  } while (len > 0);
  const out = new Uint8Array(head.length + value.length);
  out.set(head);
  out.set(value, head.length);
  return out;
}

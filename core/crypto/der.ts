/**
 * A minimal DER writer for the one structure Podmin signs on a hot path: the leaf certificate's
 * TBSCertificate (RFC 5280 §4.1), assembled from parts that are constant per CA or produced by
 * WebCrypto. Parsing stays with @peculiar/x509.
 */

type Bytes = Uint8Array<ArrayBuffer>;

/** The parts, joined. */
export function join(parts: readonly Uint8Array[]): Bytes {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.byteLength, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.byteLength;
  }
  return out;
}

/** A TLV with `tag` around `parts`. */
export function tlv(tag: number, ...parts: Uint8Array[]): Bytes {
  const body = join(parts);
  const n = body.byteLength;
  let head: number[];
  if (n < 0x80) head = [tag, n];
  else if (n < 0x100) head = [tag, 0x81, n];
  else if (n < 0x10000) head = [tag, 0x82, n >> 8, n & 0xff];
  else head = [tag, 0x83, n >> 16, (n >> 8) & 0xff, n & 0xff];
  return join([Uint8Array.from(head), body]);
}

/** SEQUENCE. */
export function sequence(...parts: Uint8Array[]): Bytes {
  return tlv(0x30, ...parts);
}

/** INTEGER from unsigned big-endian bytes (minimal, positive). */
export function unsignedInteger(bytes: Uint8Array): Bytes {
  let i = 0;
  while (i < bytes.length - 1 && bytes[i] === 0) i++;
  const v = bytes.subarray(i);
  return tlv(0x02, v[0] & 0x80 ? join([Uint8Array.of(0), v]) : v);
}

/** OBJECT IDENTIFIER from dotted form. */
export function oid(dotted: string): Bytes {
  const arcs = dotted.split(".").map(Number);
  const out = [arcs[0] * 40 + arcs[1]];
  for (const arc of arcs.slice(2)) {
    const base128 = [arc & 0x7f];
    for (let v = Math.floor(arc / 128); v > 0; v = Math.floor(v / 128)) {
      base128.unshift((v & 0x7f) | 0x80);
    }
    out.push(...base128);
  }
  return tlv(0x06, Uint8Array.from(out));
}

/** UTF8String. */
export function utf8String(s: string): Bytes {
  return tlv(0x0c, new TextEncoder().encode(s));
}

/** A certificate time: UTCTime through 2049, GeneralizedTime after (RFC 5280 §4.1.2.5). */
export function time(d: Date): Bytes {
  const iso = d.toISOString(); // YYYY-MM-DDTHH:MM:SS.sssZ
  const digits = iso.slice(0, 19).replace(/[-T:]/g, "") + "Z";
  const year = d.getUTCFullYear();
  if (year >= 1950 && year < 2050) return tlv(0x17, new TextEncoder().encode(digits.slice(2)));
  return tlv(0x18, new TextEncoder().encode(digits));
}

/** BIT STRING with no unused bits. */
export function bitString(bytes: Uint8Array): Bytes {
  return tlv(0x03, Uint8Array.of(0), bytes);
}

/** ECDSA-Sig-Value from WebCrypto's fixed-width r‖s signature. */
export function ecdsaSignature(raw: Uint8Array): Bytes {
  const half = raw.length / 2;
  return sequence(unsignedInteger(raw.subarray(0, half)), unsignedInteger(raw.subarray(half)));
}

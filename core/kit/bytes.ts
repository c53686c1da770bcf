/** Byte-buffer helpers shared by the stores and bounded readers. */

/** Joins chunks into one buffer of `size` bytes (the sum of their lengths); one chunk is returned as is. */
export function concatBytes(chunks: readonly Uint8Array[], size: number): Uint8Array {
  if (chunks.length === 1) return chunks[0];
  const out = new Uint8Array(size);
  let off = 0;
  for (const c of chunks) {
    out.set(c, off);
    off += c.byteLength;
  }
  return out;
}

/** SHA-256 and HMAC-SHA-256 in the shape `@smithy/signature-v4` wants (its `sha256` option). */

import { createHash, createHmac } from "node:crypto";

/** A `Checksum` constructor for `SignatureV4`: keyed (HMAC) when given a secret. */
export class SmithySha256 {
  #h: ReturnType<typeof createHash> | ReturnType<typeof createHmac>;
  constructor(secret?: string | ArrayBuffer | ArrayBufferView) {
    this.#h = secret === undefined ? createHash("sha256") : createHmac("sha256", bytes(secret));
  }
  update(data: string | ArrayBuffer | ArrayBufferView): void {
    this.#h.update(bytes(data));
  }
  digest(): Promise<Uint8Array> {
    return Promise.resolve(new Uint8Array(this.#h.digest()));
  }
}

function bytes(data: string | ArrayBuffer | ArrayBufferView): string | Uint8Array {
  if (typeof data === "string") return data;
  if (data instanceof ArrayBuffer) return new Uint8Array(data);
  return new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
}

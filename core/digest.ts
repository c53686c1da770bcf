/** SHA-256 helpers shared by stores, the registry and the dependency cache. */

import { createHash, type Hash } from "node:crypto";

/** Lower-case hex SHA-256 of bytes. */
export function sha256Hex(data: Uint8Array | string): string {
  return createHash("sha256").update(data).digest("hex");
}

/** True for a lower-case 64-digit hex string. */
export function isSha256Hex(value: string): boolean {
  return /^[0-9a-f]{64}$/.test(value);
}

/** An incremental SHA-256 that also counts bytes. */
export class Sha256Counter {
  #hash: Hash = createHash("sha256");
  bytes = 0;

  /** Adds a chunk. */
  update(chunk: Uint8Array): void {
    this.#hash.update(chunk);
    this.bytes += chunk.byteLength;
  }

  #digest?: string;

  /** Lower-case hex digest; the counter takes no more data after the first call. */
  hex(): string {
    return this.#digest ??= this.#hash.digest("hex");
  }
}

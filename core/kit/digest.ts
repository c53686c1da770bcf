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

/** Checks a digest string `sha256:<hex>` (the only algorithm stored). */
export function isDigest(value: unknown): boolean {
  return typeof value === "string" && value.startsWith("sha256:") && isSha256Hex(value.slice(7));
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

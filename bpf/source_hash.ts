/**
 * The digest that ties bpf/dataplane_object.ts to the sources it was built
 * from: a change to any of them without a rebuild is caught by a unit test.
 */

import { createHash } from "node:crypto";

/** Files (relative to the repository root) the embedded object is built from. */
export const DATAPLANE_SOURCES = ["bpf/dataplane.h", "bpf/dataplane.c", "bpf/build.sh"] as const;

/** SHA-256 (hex) over each source's path, length and bytes, in `DATAPLANE_SOURCES` order. */
export function dataplaneSourceHash(read: (path: string) => Uint8Array): string {
  const hash = createHash("sha256");
  for (const path of DATAPLANE_SOURCES) {
    const bytes = read(path);
    hash.update(`${path}\n${bytes.byteLength}\n`);
    hash.update(bytes);
  }
  return hash.digest("hex");
}

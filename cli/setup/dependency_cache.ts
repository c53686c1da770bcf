/**
 * The local dependency cache: `<dir>/sha256/<hex>`, one file per digest.
 * Every entry is validated independently (re-hashed) before reuse; a corrupt
 * entry is removed and downloaded again, the others are kept. Downloads go to
 * a temp file and are renamed in only after their digest (and size) matched.
 */

import * as path from "node:path";
import { Sha256Counter } from "../../core/digest.ts";
import { DigestMismatchError, UnavailableError } from "../../core/errors.ts";
import { progress } from "../../core/progress.ts";

/** What `ensure` did for one file. */
export type CacheOutcome = "reused" | "downloaded" | "replaced-corrupt";

/** Options of `DependencyCache`. */
export interface DependencyCacheOptions {
  dir: string;
  fetch?: typeof fetch;
  log?: (line: string) => void;
}

/** The default cache directory: $PODMIN_CACHE_DIR, $XDG_CACHE_HOME/podmin, ~/.cache/podmin. */
export function defaultCacheDir(): string {
  const explicit = Deno.env.get("PODMIN_CACHE_DIR");
  if (explicit) return explicit;
  const xdg = Deno.env.get("XDG_CACHE_HOME") ?? path.join(Deno.env.get("HOME") ?? "/tmp", ".cache");
  return path.join(xdg, "podmin", "dependencies");
}

/** A digest-addressed file cache. */
export class DependencyCache {
  readonly #options: DependencyCacheOptions;

  constructor(options: DependencyCacheOptions) {
    this.#options = options;
  }

  /** The path of a digest's entry. */
  pathOf(sha256: string): string {
    return path.join(this.#options.dir, "sha256", sha256);
  }

  /** Hashes a cached file; undefined when absent. */
  async #hash(p: string): Promise<{ sha256: string; size: number } | undefined> {
    let file: Deno.FsFile;
    try {
      file = await Deno.open(p);
    } catch {
      return undefined;
    }
    const h = new Sha256Counter();
    for await (const chunk of file.readable) h.update(chunk);
    return { sha256: h.hex(), size: h.bytes };
  }

  /** Makes sure the cache holds a valid file for `sha256`, downloading `url` when needed. */
  async ensure(
    options: { sha256: string; url: string; size?: number; label: string },
  ): Promise<{ path: string; size: number; outcome: CacheOutcome }> {
    const p = this.pathOf(options.sha256);
    const cached = await this.#hash(p);
    if (
      cached && cached.sha256 === options.sha256 &&
      (options.size === undefined || cached.size === options.size)
    ) {
      return { path: p, size: cached.size, outcome: "reused" };
    }
    if (cached) {
      this.#options.log?.(
        `${options.label}: cached copy is corrupt (sha256 ${
          cached.sha256.slice(0, 12)
        }…); downloading again`,
      );
      await Deno.remove(p).catch(() => {});
    }
    const size = await this.#download(options, p);
    return { path: p, size, outcome: cached ? "replaced-corrupt" : "downloaded" };
  }

  /** Adds local bytes (Podmin's own files) under their digest. */
  async put(bytes: Uint8Array, sha256: string): Promise<string> {
    const p = this.pathOf(sha256);
    await Deno.mkdir(path.dirname(p), { recursive: true });
    const tmp = `${p}.${crypto.randomUUID()}.tmp`;
    await Deno.writeFile(tmp, bytes);
    await Deno.rename(tmp, p);
    return p;
  }

  async #download(
    o: { sha256: string; url: string; size?: number; label: string },
    target: string,
  ): Promise<number> {
    await Deno.mkdir(path.dirname(target), { recursive: true });
    const f = this.#options.fetch ?? fetch;
    let res: Response;
    try {
      res = await f(o.url);
    } catch (err) {
      throw new UnavailableError(
        `${o.label}: download of ${o.url} failed: ${(err as Error).message}`,
        {
          hint: "check the network, or pre-seed the cache with the pinned file",
        },
      );
    }
    if (!res.ok || !res.body) {
      await res.body?.cancel();
      throw new UnavailableError(`${o.label}: ${o.url} answered ${res.status}`);
    }
    const total = o.size ?? (Number(res.headers.get("content-length")) || undefined);
    const bar = progress(`download ${o.label}`, total, { write: this.#options.log ?? (() => {}) });
    const tmp = `${target}.${crypto.randomUUID()}.tmp`;
    const file = await Deno.open(tmp, { write: true, createNew: true });
    const h = new Sha256Counter();
    try {
      for await (const chunk of res.body) {
        h.update(chunk);
        let off = 0;
        while (off < chunk.byteLength) off += await file.write(chunk.subarray(off));
        bar.update(h.bytes);
      }
      await file.sync();
    } catch (err) {
      file.close();
      await Deno.remove(tmp).catch(() => {});
      throw new UnavailableError(`${o.label}: download interrupted: ${(err as Error).message}`);
    }
    file.close();
    const sha = h.hex();
    if (sha !== o.sha256 || (o.size !== undefined && h.bytes !== o.size)) {
      await Deno.remove(tmp).catch(() => {});
      throw new DigestMismatchError(
        `${o.label}: ${o.url} has sha256 ${sha} (${h.bytes} bytes), pinned ${o.sha256}${
          o.size ? ` (${o.size} bytes)` : ""
        }`,
        {
          hint:
            "the upstream file changed or the download was tampered with; check the catalogue pin",
        },
      );
    }
    await Deno.rename(tmp, target);
    bar.done();
    return h.bytes;
  }
}

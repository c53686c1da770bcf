/**
 * The local dependency cache: `<dir>/sha256/<hex>`, one file per digest.
 * Every entry is validated independently (re-hashed) before reuse; a corrupt
 * entry is removed and downloaded again, the others are kept. Downloads go to
 * a temp file and are renamed in only after their digest (and size) matched, durably
 * (core/store/atomic_write.ts).
 * A file pinned inside an archive (the Deno runtime in its npm package) is
 * cached as the extracted member: the archive must match its registry
 * integrity, the member its sha256.
 */

import { createHash } from "node:crypto";
import * as path from "node:path";
import { Sha256Counter } from "../../core/kit/digest.ts";
import { DigestMismatchError, UnavailableError } from "../../core/kit/errors.ts";
import { progress } from "../../core/kit/progress.ts";
import { renameIntoPlace, syncFile, writeFileAtomic } from "../../core/store/atomic_write.ts";

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

  /** What to do when a download fails: the network, or this cache seeded by hand. */
  #seedHint(): string {
    return `check the network, or pre-seed the cache ${this.#options.dir} ($PODMIN_CACHE_DIR; ` +
      "default ~/.cache/podmin/dependencies) with the pinned file as sha256/<its sha256>";
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

  /**
   * Makes sure the cache holds a valid file for `sha256`, downloading `url` when needed.
   * `sha256Url` says the digest is the vendor's published checksum (named in a mismatch).
   */
  async ensure(
    options: { sha256: string; sha256Url?: string; url: string; size?: number; label: string },
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
    await writeFileAtomic(p, bytes);
    return p;
  }

  /**
   * Like `ensure` for one member of a tar.gz archive: downloads `url`, checks the archive against
   * `integrity` (`sha512-<base64>`, as the npm registry publishes it), extracts `member` and
   * caches it when its sha256 is `sha256`.
   */
  async ensureMember(
    options: { sha256: string; url: string; integrity: string; member: string; label: string },
  ): Promise<{ path: string; size: number; outcome: CacheOutcome }> {
    const p = this.pathOf(options.sha256);
    const cached = await this.#hash(p);
    if (cached?.sha256 === options.sha256) return { path: p, size: cached.size, outcome: "reused" };
    if (cached) await Deno.remove(p).catch(() => {});
    await Deno.mkdir(path.dirname(p), { recursive: true });
    const work = await Deno.makeTempDir({ dir: path.dirname(p), prefix: ".archive-" });
    try {
      const archive = path.join(work, "archive.tgz");
      const integrity = await this.#fetchTo(options, archive, "sha512");
      const want = options.integrity.replace(/^sha512-/, "");
      if (integrity !== want) {
        throw new DigestMismatchError(
          `${options.label}: ${options.url} has integrity sha512-${integrity}, pinned ${options.integrity}`,
          { hint: "the registry's package changed or the download was tampered with" },
        );
      }
      const tar = await new Deno.Command("tar", {
        args: ["-xzf", archive, "-C", work, "--no-same-owner", "--", options.member],
        stdout: "null",
        stderr: "piped",
      }).output();
      if (!tar.success) {
        throw new DigestMismatchError(
          `${options.label}: ${options.url} lacks ${options.member}: ${
            new TextDecoder().decode(tar.stderr).trim()
          }`,
        );
      }
      const extracted = path.join(work, options.member);
      const got = await this.#hash(extracted);
      if (got?.sha256 !== options.sha256) {
        throw new DigestMismatchError(
          `${options.label}: ${options.member} of ${options.url} has sha256 ${got?.sha256}, pinned ${options.sha256}`,
          { hint: "the archive matches its integrity but not the pinned member: check the pin" },
        );
      }
      await syncFile(extracted);
      await renameIntoPlace(extracted, p);
      return { path: p, size: got.size, outcome: cached ? "replaced-corrupt" : "downloaded" };
    } finally {
      await Deno.remove(work, { recursive: true }).catch(() => {});
    }
  }

  /** Streams `url` into `target`; returns the base64 digest of `algorithm` over the bytes. */
  async #fetchTo(
    o: { url: string; label: string },
    target: string,
    algorithm: "sha512",
  ): Promise<string> {
    const res = await this.#get(o);
    const total = Number(res.headers.get("content-length")) || undefined;
    const bar = progress(`download ${o.label}`, total, { write: this.#options.log ?? (() => {}) });
    const hash = createHash(algorithm);
    const file = await Deno.open(target, { write: true, createNew: true });
    let n = 0;
    try {
      for await (const chunk of res.body!) {
        hash.update(chunk);
        let off = 0;
        while (off < chunk.byteLength) off += await file.write(chunk.subarray(off));
        n += chunk.byteLength;
        bar.update(n);
      }
    } catch (err) {
      throw new UnavailableError(`${o.label}: download interrupted: ${(err as Error).message}`);
    } finally {
      file.close();
    }
    bar.done();
    return hash.digest("base64");
  }

  /** GET `url` with a typed error for every failure. */
  async #get(o: { url: string; label: string }): Promise<Response> {
    const f = this.#options.fetch ?? fetch;
    let res: Response;
    try {
      res = await f(o.url);
    } catch (err) {
      throw new UnavailableError(
        `${o.label}: download of ${o.url} failed: ${(err as Error).message}`,
        {
          hint: this.#seedHint(),
        },
      );
    }
    if (!res.ok || !res.body) {
      await res.body?.cancel();
      throw new UnavailableError(`${o.label}: ${o.url} answered ${res.status}`, {
        hint: this.#seedHint(),
      });
    }
    return res;
  }

  async #download(
    o: { sha256: string; sha256Url?: string; url: string; size?: number; label: string },
    target: string,
  ): Promise<number> {
    await Deno.mkdir(path.dirname(target), { recursive: true });
    const res = await this.#get(o);
    const total = o.size ?? (Number(res.headers.get("content-length")) || undefined);
    const bar = progress(`download ${o.label}`, total, { write: this.#options.log ?? (() => {}) });
    const tmp = `${target}.${crypto.randomUUID()}.tmp`;
    const file = await Deno.open(tmp, { write: true, createNew: true });
    const h = new Sha256Counter();
    try {
      for await (const chunk of res.body!) {
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
      if (o.sha256Url) {
        throw new DigestMismatchError(
          `${o.label}: ${o.url} has sha256 ${sha} (${h.bytes} bytes), but its published checksum ${o.sha256Url} says ${o.sha256}`,
          {
            hint: "the download or the vendor's checksum file is damaged or was tampered with " +
              "(a stale mirror?); nothing was cached or published: retry, or check the source",
          },
        );
      }
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
    await renameIntoPlace(tmp, target);
    bar.done();
    return h.bytes;
  }
}

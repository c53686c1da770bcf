/**
 * Extracts a tar archive (ustar, pax and GNU long names) into a directory.
 * Only regular files and directories are created: a link becomes a copy of
 * the archive file it names; devices, links leaving the archive and any entry
 * whose path is absolute or climbs out with `..` are rejected, so an untrusted
 * archive cannot write or read outside the destination.
 */

import * as path from "node:path";
import { ValidationError } from "../core/kit/errors.ts";

const BLOCK = 512;

/** Reads exact byte counts from a stream. */
class ExactReader {
  #reader: ReadableStreamDefaultReader<Uint8Array>;
  #buf: Uint8Array = new Uint8Array(0);
  constructor(stream: ReadableStream<Uint8Array>) {
    this.#reader = stream.getReader();
  }
  /** Returns exactly n bytes, or null at a clean end of stream. */
  async read(n: number): Promise<Uint8Array | null> {
    while (this.#buf.byteLength < n) {
      const { value, done } = await this.#reader.read();
      if (done) {
        if (this.#buf.byteLength === 0) return null;
        throw new ValidationError("tar archive is truncated");
      }
      const next = new Uint8Array(this.#buf.byteLength + value.byteLength);
      next.set(this.#buf);
      next.set(value, this.#buf.byteLength);
      this.#buf = next;
    }
    const out = this.#buf.slice(0, n);
    this.#buf = this.#buf.slice(n);
    return out;
  }
  /** Streams n bytes into `sink` in chunks. */
  async pipe(n: number, sink: (chunk: Uint8Array) => Promise<void>): Promise<void> {
    let left = n;
    while (left > 0) {
      if (this.#buf.byteLength === 0) {
        const { value, done } = await this.#reader.read();
        if (done) throw new ValidationError("tar archive is truncated");
        this.#buf = value;
      }
      const take = Math.min(left, this.#buf.byteLength);
      await sink(this.#buf.subarray(0, take));
      this.#buf = this.#buf.slice(take);
      left -= take;
    }
  }
  cancel(): Promise<void> {
    return this.#reader.cancel();
  }
}

function text(block: Uint8Array, start: number, len: number): string {
  const slice = block.subarray(start, start + len);
  const end = slice.indexOf(0);
  return new TextDecoder().decode(end < 0 ? slice : slice.subarray(0, end));
}

function octal(block: Uint8Array, start: number, len: number): number {
  const s = text(block, start, len).trim();
  if (s === "") return 0;
  if (!/^[0-7]+$/.test(s)) {
    throw new ValidationError(`tar header has a bad number ${JSON.stringify(s)}`);
  }
  return parseInt(s, 8);
}

function parsePax(data: Uint8Array): Record<string, string> {
  const out: Record<string, string> = {};
  const s = new TextDecoder().decode(data);
  let i = 0;
  while (i < s.length) {
    const sp = s.indexOf(" ", i);
    if (sp < 0) break;
    const len = Number(s.slice(i, sp));
    if (!Number.isInteger(len) || len <= 0) throw new ValidationError("bad pax record");
    const record = s.slice(sp + 1, i + len - 1);
    const eq = record.indexOf("=");
    if (eq > 0) out[record.slice(0, eq)] = record.slice(eq + 1);
    i += len;
  }
  return out;
}

/**
 * Resolves an entry name inside `dest`, rejecting traversal, absolute names and NUL. `./`
 * prefixes and `.` segments are ordinary (`tar -C DIR -cf x.tar .` writes them); a name that
 * resolves to the archive root itself is accepted only with `root: true` (a directory entry).
 */
export function safeJoin(dest: string, name: string, options: { root?: boolean } = {}): string {
  const segments = name.split("/").filter((s) => s !== "" && s !== ".");
  if (name === "" || name.startsWith("/") || segments.includes("..") || name.includes("\0")) {
    throw new ValidationError(`tar entry ${JSON.stringify(name)} escapes the archive`);
  }
  if (segments.length === 0) {
    if (options.root) return dest;
    throw new ValidationError(`tar entry ${JSON.stringify(name)} names the archive root`);
  }
  return path.join(dest, ...segments);
}

/** The entry name as extracted: no `./` prefixes, `.` segments or trailing `/`. */
function entryName(name: string): string {
  return name.split("/").filter((s) => s !== "" && s !== ".").join("/");
}

/** Extracts the archive stream into `dest` (which must exist). Returns the file names written. */
export async function extractTar(
  stream: ReadableStream<Uint8Array>,
  dest: string,
): Promise<string[]> {
  const r = new ExactReader(stream);
  const files: string[] = [];
  let longName: string | undefined;
  let pax: Record<string, string> = {};
  const links: { target: string; source: string; name: string }[] = [];
  try {
    for (;;) {
      const header = await r.read(BLOCK);
      if (header === null || header.every((b) => b === 0)) break;
      let sum = 0;
      for (let i = 0; i < BLOCK; i++) sum += i >= 148 && i < 156 ? 32 : header[i];
      if (sum !== octal(header, 148, 8)) throw new ValidationError("tar header checksum mismatch");
      const type = String.fromCharCode(header[156] || 48);
      const size = pax.size !== undefined ? Number(pax.size) : octal(header, 124, 12);
      const prefix = text(header, 257, 6).startsWith("ustar") ? text(header, 345, 155) : "";
      const name = pax.path ?? longName ??
        (prefix ? `${prefix}/${text(header, 0, 100)}` : text(header, 0, 100));
      const padded = Math.ceil(size / BLOCK) * BLOCK;
      if (type === "x" || type === "L") {
        const data = (await r.read(padded))!.subarray(0, size);
        if (type === "x") pax = parsePax(data);
        else longName = text(data, 0, data.length);
        continue;
      }
      if (type === "g") {
        await r.read(padded);
        continue;
      }
      const linkPath = pax.linkpath ?? text(header, 157, 100);
      longName = undefined;
      pax = {};
      const target = safeJoin(dest, name, { root: type === "5" });
      if (type === "5") {
        await Deno.mkdir(target, { recursive: true });
      } else if (type === "0" || type === "7") {
        await Deno.mkdir(path.dirname(target), { recursive: true });
        const file = await Deno.open(target, { write: true, createNew: true, mode: 0o644 });
        try {
          await r.pipe(size, async (chunk) => {
            let off = 0;
            while (off < chunk.byteLength) off += await file.write(chunk.subarray(off));
          });
        } finally {
          file.close();
        }
        await r.read(padded - size);
        files.push(entryName(name));
        continue;
      } else if (type === "1" || type === "2") {
        // Links between files of the archive (docker-archive uses them): resolved by copying
        // the target once everything is extracted; a target outside the archive is rejected.
        const base = type === "2" ? path.posix.dirname(entryName(name)) : "";
        links.push({ target, source: safeJoin(dest, path.posix.join(base, linkPath)), name });
      } else if (type === "3" || type === "4" || type === "6") {
        throw new ValidationError(
          `tar entry ${JSON.stringify(name)} is a device or FIFO; image archives hold files only`,
        );
      }
      if (padded) await r.read(padded);
    }
    for (const link of links) {
      const st = await Deno.lstat(link.source).catch(() => undefined);
      if (!st?.isFile) {
        throw new ValidationError(
          `tar link ${JSON.stringify(link.name)} points at no regular file of the archive`,
        );
      }
      await Deno.mkdir(path.dirname(link.target), { recursive: true });
      await Deno.copyFile(link.source, link.target);
      files.push(entryName(link.name));
    }
  } catch (err) {
    await r.cancel().catch(() => {});
    throw err;
  }
  return files;
}

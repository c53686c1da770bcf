/**
 * Fuzzes the registry's HTTP surface (paths, encodings, methods, `Range`, headers) over a real
 * filesystem store holding one pushed image. Findings: a 5xx answer, a thrown handler, an answer
 * later than 5 s, a read of a key outside `apps/` and `mirror/` (after normalising the key).
 */

import { posix } from "node:path";
import { FsStore } from "../../core/store/fs_store.ts";
import { silentLogger } from "../../core/kit/log.ts";
import type { ObjectStore } from "../../core/store/object_store.ts";
import { ImageReader } from "../../registry/image_reader.ts";
import { openImageSource } from "../../registry/image_source.ts";
import { writeImage } from "../../registry/image_writer.ts";
import { createRegistryHandler } from "../../registry/server.ts";
import { writeOciLayout } from "../support/oci_image.ts";
import { type Attack, bounded, Findings, Rand } from "./campaign.ts";

/**
 * Whether a key read by the registry lies outside `apps/` and `mirror/` once normalised: `.` and
 * `..` segments and doubled slashes resolved, as a filesystem store would resolve them, so that
 * `apps/../deployments/index.json` counts as outside.
 */
export function readsOutsideImages(key: string): boolean {
  const n = posix.normalize(key).replace(/^\/+/, "");
  if (n.split("/").includes("..")) return true;
  return !n.startsWith("apps/") && !n.startsWith("mirror/");
}

/** Wraps the real store and records every key read through it. */
function recording(inner: ObjectStore, keys: string[]): ObjectStore {
  return {
    url: inner.url,
    get: (k, o) => (keys.push(k), inner.get(k, o)),
    head: (k) => (keys.push(k), inner.head(k)),
    getStream: (k, o) => (keys.push(k), inner.getStream(k, o)),
    put: (k, b, o) => inner.put(k, b, o),
    putStream: (k, b, o) => inner.putStream(k, b, o),
    delete: (k, o) => inner.delete(k, o),
    list: (p) => (keys.push(p), inner.list(p)),
  };
}

const METHODS = ["GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS"];
const ESCAPES = ["%zz", "%", "%2", "%2e%2e", "%2F", "%00", "%C0%AE", "%E0%A4%A", "%25", "%ff"];

function piece(r: Rand, digests: string[]): string {
  switch (r.int(10)) {
    case 0:
      return r.pick(ESCAPES);
    case 1:
      return r.pick(["..", ".", "", "//", "deployments", "dependencies", "infra", "services"]);
    case 2:
      return r.pick(digests);
    case 3:
      return `sha256:${r.pick(["", "zz", "0".repeat(63), "0".repeat(65), "A".repeat(64)])}`;
    case 4:
      return "x".repeat(r.int(3) ? 10 : 5000);
    case 5:
      return String.fromCharCode(...Array.from({ length: 1 + r.int(6) }, () => 33 + r.int(94)));
    default:
      return r.pick(["apps", "hello", "mirror", "docker.io", "library", "1.0", "latest"]);
  }
}

function path(r: Rand, digests: string[]): string {
  const repo = r.int(4)
    ? r.pick(["apps/hello", "mirror/docker.io/library/x", "apps/missing", "apps"])
    : Array.from({ length: 1 + r.int(4) }, () => piece(r, digests)).join("/");
  const kind = r.pick([
    "manifests",
    "blobs",
    "tags/list",
    "_catalog",
    "uploads",
    piece(r, digests),
  ]);
  const ref = r.int(3) ? r.pick(["1.0", ...digests]) : piece(r, digests);
  const p = r.int(8) ? `/v2/${repo}/${kind}/${ref}` : `/${piece(r, digests)}/${piece(r, digests)}`;
  return r.int(10) ? p : p.replace(/\//g, r.pick(["%2F", "//", "/./"]));
}

function range(r: Rand): string | undefined {
  if (r.int(3)) return undefined;
  return r.pick([
    "bytes=0-",
    "bytes=-5",
    "bytes=5-1",
    "bytes=abc",
    "bytes=0-1,2-3",
    `bytes=${2 ** 60}-`,
    "bytes=-0",
    "items=0-1",
    "bytes= 1-2",
    "",
  ]);
}

/** The attack. */
export const registryFuzz: Attack = {
  name: "registry-http",
  tries: "random paths, percent-escapes, methods, Range and headers against the registry",
  async run({ cases, seed, deadline }) {
    const t0 = Date.now();
    const tmp = await Deno.makeTempDir({ prefix: "podmin-fault-registry-" });
    const findings = new Findings();
    let tried = 0;
    try {
      const layout = `${tmp}/layout`;
      const img = await writeOciLayout({
        dir: layout,
        ref: "1.0",
        platforms: [{ arch: "amd64", files: { hello: new TextEncoder().encode("hi\n") } }],
      });
      const fs = new FsStore({ root: `${tmp}/bucket`, durable: false });
      // Objects a traversal would be after.
      await fs.put("deployments/index.json", new TextEncoder().encode('{"secret":1}'));
      const source = await openImageSource(`oci:${layout}:1.0`);
      await writeImage({ store: fs, source, repo: { root: "apps", name: "hello" }, tag: "1.0" });
      await source.close();
      const digests = [img.digest, ...img.manifestDigests];
      const keys: string[] = [];
      const handler = createRegistryHandler({
        reader: new ImageReader({ store: recording(fs, keys) }),
        log: silentLogger,
      });
      const r = new Rand(seed);
      for (; tried < cases && Date.now() < deadline; tried++) {
        const method = r.pick(METHODS);
        const p = path(r, digests);
        const headers: Record<string, string> = {};
        const rg = range(r);
        if (rg !== undefined) headers.Range = rg;
        if (!r.int(5)) headers.Accept = r.pick(["*/*", "", "application/json", "x".repeat(300)]);
        let req: Request;
        try {
          req = new Request(`http://127.0.0.1:5000${p}`, { method, headers });
        } catch {
          continue; // not even a valid HTTP request: no server would see it
        }
        const what = `${method} ${p}${rg !== undefined ? ` Range: ${rg}` : ""}`;
        keys.length = 0;
        try {
          const res = await bounded(handler(req), 5_000);
          await bounded(res.arrayBuffer(), 5_000);
          if (res.status >= 500) findings.add(`${res.status}`, what);
        } catch (err) {
          findings.add("crash or hang", `${what}: ${(err as Error).message}`);
        }
        for (const k of keys) {
          if (readsOutsideImages(k)) {
            findings.add("read outside apps/ and mirror/", `${what} read ${k}`);
          }
        }
      }
    } finally {
      await Deno.remove(tmp, { recursive: true });
    }
    return { name: this.name, tried, findings: findings.lines, ms: Date.now() - t0 };
  },
};

/**
 * The read-only OCI distribution server (pull side) over the bucket, hosted
 * by the agent on loopback. Only `apps/` and `mirror/` repositories exist;
 * every write method and every listing endpoint is refused, so the server
 * never lists the bucket.
 */

import { type ImageRepository, parseImageRepository } from "../core/bucket/bucket_layout.ts";
import { isDigest } from "../core/kit/digest.ts";
import {
  NotFoundError,
  PodminError,
  UnavailableError,
  UsageError,
  ValidationError,
} from "../core/kit/errors.ts";
import { parseDuration } from "../core/kit/duration.ts";
import type { Logger } from "../core/kit/log.ts";
import { checkTag } from "../core/model/names.ts";
import type { ByteRange } from "../core/store/object_store.ts";
import type { ImageReader } from "./image_reader.ts";

/** OCI error body. */
function ociError(
  status: number,
  code: string,
  message: string,
  headers: HeadersInit = {},
): Response {
  return new Response(JSON.stringify({ errors: [{ code, message }] }) + "\n", {
    status,
    headers: { "Content-Type": "application/json", ...headers },
  });
}

const API_HEADERS = { "Docker-Distribution-API-Version": "registry/2.0" };

/** Parses `Range: bytes=a-b` against a size. Returns null when unsatisfiable. */
export function parseRange(header: string, size: number): ByteRange | null | undefined {
  const m = /^bytes=(\d*)-(\d*)$/.exec(header.trim());
  if (!m || (m[1] === "" && m[2] === "")) return undefined; // not a single range we understand: whole body
  let start: number, end: number;
  if (m[1] === "") {
    const suffix = Number(m[2]);
    if (suffix === 0) return null;
    start = Math.max(0, size - suffix);
    end = size - 1;
  } else {
    start = Number(m[1]);
    end = m[2] === "" ? size - 1 : Math.min(Number(m[2]), size - 1);
  }
  if (start >= size || end < start) return null;
  return { start, end };
}

/**
 * Redirected blob pulls: a blob GET of at least `minBytes` is answered `307` to a presigned URL of
 * the blob's key in the S3 store, valid for `expiresSeconds` (the client verifies the digest, as
 * every OCI client does).
 */
export interface RegistryRedirect {
  minBytes: number;
  expiresSeconds: number;
}

/** Longest lifetime `--redirect-ttl` accepts: a presigned URL is a bearer token for its blob. */
export const REDIRECT_TTL_MAX_SECONDS = 3600;

/**
 * Parses the redirect flags: `minBytes` is `off` (no redirects), a byte count, or one with a
 * `KiB`/`MiB`/`GiB` suffix; `ttl` a duration (`5m`) of 1 s to 1 h. Usage errors name the flags.
 */
export function parseRedirect(
  options: { minBytes: string; ttl: string; minBytesFlag?: string; ttlFlag?: string },
): RegistryRedirect | undefined {
  const minFlag = options.minBytesFlag ?? "--redirect-min-bytes";
  const ttlFlag = options.ttlFlag ?? "--redirect-ttl";
  if (options.minBytes.trim() === "off" || options.ttl.trim() === "off") return undefined;
  const m = /^(\d+)\s*(|B|KiB|MiB|GiB)$/.exec(options.minBytes.trim());
  if (!m) {
    throw new UsageError(`${minFlag}: ${JSON.stringify(options.minBytes)} is not a size`, {
      hint:
        `a byte count (1048576), with KiB, MiB or GiB (1MiB), or off to serve every blob directly`,
    });
  }
  const unit = { "": 1, B: 1, KiB: 1024, MiB: 1024 ** 2, GiB: 1024 ** 3 }[m[2]]!;
  const ms = parseDuration(options.ttl, ttlFlag);
  const expiresSeconds = Math.floor(ms / 1000);
  if (expiresSeconds < 1 || expiresSeconds > REDIRECT_TTL_MAX_SECONDS) {
    throw new UsageError(`${ttlFlag} ${options.ttl}: must be 1s to 1h`, {
      hint: "the presigned URL only has to outlive the start of the client's GET; minutes suffice",
    });
  }
  return { minBytes: Number(m[1]) * unit, expiresSeconds };
}

/** Options of `createRegistryHandler`. */
export interface RegistryHandlerOptions {
  reader: ImageReader;
  log: Logger;
  /** Redirected blob pulls (effective on stores with presigned URLs: S3); absent: none. */
  redirect?: RegistryRedirect;
}

/** Builds the HTTP handler (usable with Deno.serve and in tests). */
export function createRegistryHandler(
  options: RegistryHandlerOptions,
): (req: Request) => Promise<Response> {
  const { log } = options;
  return async (req) => {
    const url = new URL(req.url);
    const method = req.method;
    let path: string;
    try {
      path = decodeURIComponent(url.pathname);
    } catch {
      return ociError(400, "NAME_INVALID", "malformed percent-escape in the path", API_HEADERS);
    }
    try {
      if (path === "/v2/" || path === "/v2") {
        if (method !== "GET" && method !== "HEAD") return refused(method);
        return new Response(method === "HEAD" ? null : "{}", {
          headers: { ...API_HEADERS, "Content-Type": "application/json" },
        });
      }
      if (!path.startsWith("/v2/")) return ociError(404, "NOT_FOUND", "not a registry API path");
      const rest = path.slice(4);
      if (rest === "_catalog" || rest.endsWith("/tags/list")) {
        return ociError(
          404,
          "UNSUPPORTED",
          "listing is not offered: this registry never lists its bucket",
          API_HEADERS,
        );
      }
      const m = rest.lastIndexOf("/manifests/");
      const b = rest.lastIndexOf("/blobs/");
      if (m < 0 && b < 0) return ociError(404, "NOT_FOUND", "unknown endpoint", API_HEADERS);
      if (method !== "GET" && method !== "HEAD") return refused(method);
      const isManifest = m > b;
      const name = rest.slice(0, isManifest ? m : b);
      const ref = rest.slice(isManifest ? m + "/manifests/".length : b + "/blobs/".length);
      let repo: ImageRepository;
      try {
        repo = parseImageRepository(name);
      } catch {
        return ociError(
          404,
          "NAME_UNKNOWN",
          `repository ${name} is not served (only apps/… and mirror/…)`,
          API_HEADERS,
        );
      }
      return isManifest
        ? await serveManifest(options, { repo, ref, method })
        : await serveBlob(options, { repo, ref, method, range: req.headers.get("range") });
    } catch (err) {
      if (err instanceof UnavailableError) {
        log.warn("bucket unavailable", { path, error: err.message });
        return ociError(503, "UNAVAILABLE", "the image store is unavailable; retry", {
          ...API_HEADERS,
          "Retry-After": "1",
        });
      }
      log.error("registry request failed", { path, error: (err as Error).message });
      const message = err instanceof PodminError ? err.message : "internal error";
      return ociError(500, "UNKNOWN", message, API_HEADERS);
    }
  };
}

/** A blob or manifest request: the repository, the reference after `/blobs/` or `/manifests/`. */
interface ObjectRequest {
  repo: ImageRepository;
  ref: string;
  method: string;
  /** The Range header of a blob GET. */
  range?: string | null;
}

/** Serves `GET`/`HEAD /v2/<name>/manifests/<ref>`. */
async function serveManifest(
  options: RegistryHandlerOptions,
  { repo, ref, method }: ObjectRequest,
): Promise<Response> {
  const { reader, log } = options;
  if (!isDigest(ref)) {
    if (ref.startsWith("sha256:") || ref.includes(":")) {
      return ociError(400, "DIGEST_INVALID", `invalid digest ${ref}`, API_HEADERS);
    }
    try {
      checkTag(ref);
    } catch {
      return ociError(404, "MANIFEST_UNKNOWN", `invalid tag ${ref}`, API_HEADERS);
    }
  }
  let content;
  try {
    content = await reader.manifest(repo, ref);
  } catch (err) {
    if (err instanceof NotFoundError) {
      return ociError(404, "MANIFEST_UNKNOWN", `manifest ${ref} not found`, API_HEADERS);
    }
    if (err instanceof ValidationError) {
      log.error("corrupt manifest in the bucket", { ref, error: err.message });
      return ociError(500, "MANIFEST_INVALID", "stored manifest failed validation", API_HEADERS);
    }
    throw err;
  }
  return new Response(method === "HEAD" ? null : content.bytes as Uint8Array<ArrayBuffer>, {
    headers: {
      ...API_HEADERS,
      "Content-Type": content.mediaType,
      "Content-Length": String(content.bytes.byteLength),
      "Docker-Content-Digest": content.digest,
      "ETag": `"${content.digest}"`,
    },
  });
}

/** Serves `GET`/`HEAD /v2/<name>/blobs/<digest>`: redirected, ranged or whole. */
async function serveBlob(
  options: RegistryHandlerOptions,
  { repo, ref, method, range }: ObjectRequest,
): Promise<Response> {
  const { reader, log, redirect } = options;
  if (!isDigest(ref)) {
    return ociError(400, "DIGEST_INVALID", `invalid digest ${ref}`, API_HEADERS);
  }
  const headers: Record<string, string> = {
    ...API_HEADERS,
    "Content-Type": "application/octet-stream",
    "Docker-Content-Digest": ref,
    "Accept-Ranges": "bytes",
    "ETag": `"${ref}"`,
  };
  try {
    if (method === "GET" && redirect) {
      // HEADs the blob first: a missing one is BLOB_UNKNOWN here, never a redirect to a 404.
      const to = await reader.blobRedirect(repo.root, ref, redirect);
      if (to) {
        // The URL is a bearer token for the blob until it expires: the key is logged, never it.
        log.debug("blob redirected", { key: to.key, bytes: to.size });
        return new Response(null, {
          status: 307,
          headers: {
            ...API_HEADERS,
            "Docker-Content-Digest": ref,
            "Location": to.url.href,
            "Cache-Control": "no-store",
          },
        });
      }
    }
    if (method === "HEAD" || range) {
      const size = await reader.blobSize(repo.root, ref);
      if (method === "HEAD") {
        return new Response(null, { headers: { ...headers, "Content-Length": String(size) } });
      }
      const r = parseRange(range!, size);
      if (r === null) {
        return ociError(416, "BLOB_UNKNOWN", "range not satisfiable", {
          ...headers,
          "Content-Range": `bytes */${size}`,
        });
      }
      if (r !== undefined) {
        const { body } = await reader.blob(repo.root, ref, r);
        return new Response(body, {
          status: 206,
          headers: {
            ...headers,
            "Content-Length": String(r.end! - r.start + 1),
            "Content-Range": `bytes ${r.start}-${r.end}/${size}`,
          },
        });
      }
    }
    const { body, size } = await reader.blob(repo.root, ref);
    return new Response(body, { headers: { ...headers, "Content-Length": String(size) } });
  } catch (err) {
    if (err instanceof NotFoundError) {
      return ociError(404, "BLOB_UNKNOWN", `blob ${ref} not found`, API_HEADERS);
    }
    throw err;
  }
}

function refused(method: string): Response {
  return ociError(
    405,
    "UNSUPPORTED",
    `${method} is not allowed: this registry is read-only; push with 'podmin push'`,
    {
      ...API_HEADERS,
      Allow: "GET, HEAD",
    },
  );
}

/** Options of `serveRegistry`. */
export interface ServeRegistryOptions extends RegistryHandlerOptions {
  hostname: string;
  port: number;
  signal?: AbortSignal;
}

/** Serves the registry until the signal aborts; resolves once listening. */
export function serveRegistry(options: ServeRegistryOptions): Deno.HttpServer<Deno.NetAddr> {
  return Deno.serve({
    hostname: options.hostname,
    port: options.port,
    signal: options.signal,
    onListen: ({ hostname, port }) => options.log.info("registry listening", { hostname, port }),
  }, createRegistryHandler(options));
}

/** True for a loopback address: 127.0.0.0/8, ::1 (or its long forms) and `localhost`. */
export function isLoopback(hostname: string): boolean {
  if (hostname === "localhost") return true;
  if (/^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(hostname)) return true;
  return /^(0{0,4}:){2,7}0{0,3}1$/i.test(hostname) || hostname === "::1";
}

/**
 * Parses `HOST:PORT` (IPv6 as `[::1]:PORT`). A non-loopback host is refused unless
 * `allowNonLoopback`: the registry serves every image in the bucket without authentication.
 */
export function parseListen(
  text: string,
  options: { allowNonLoopback?: boolean; flag?: string; allowFlag?: string } = {},
): { hostname: string; port: number } {
  const m = /^(?:\[([0-9a-fA-F:]+)\]|([^:]+)):(\d{1,5})$/.exec(text);
  const port = m ? Number(m[3]) : NaN;
  if (!m || port < 0 || port > 65535) {
    throw new ValidationError(`invalid listen address ${JSON.stringify(text)}: expected HOST:PORT`);
  }
  const hostname = m[1] ?? m[2];
  if (!options.allowNonLoopback && !isLoopback(hostname)) {
    const flag = options.flag ?? "--listen";
    throw new UsageError(
      `refusing to serve the registry on ${text}: not a loopback address. The registry answers ` +
        `every pull of every image in the bucket without authentication, so it binds loopback ` +
        `only (containerd on the same node is its only client)`,
      {
        hint: `use ${flag} 127.0.0.1:PORT, or pass ${
          options.allowFlag ?? "--allow-non-loopback"
        } if a firewall restricts who reaches ${text}`,
      },
    );
  }
  return { hostname, port };
}

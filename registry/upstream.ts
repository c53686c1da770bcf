/**
 * An upstream registry as an image source, over the OCI distribution API:
 * anonymous bearer tokens (Docker Hub, registry.k8s.io, ghcr.io), bearer
 * tokens with credentials, and basic auth.
 */

import { sha256Hex } from "../core/kit/digest.ts";
import {
  NotFoundError,
  PodminError,
  UnavailableError,
  ValidationError,
} from "../core/kit/errors.ts";
import type { UpstreamRef } from "../core/model/image_ref.ts";
import { idleBounded, requestTimeoutMs, timeoutError } from "../core/kit/request_bounds.ts";
import type { ImageSource, ManifestDoc } from "./image_source.ts";
import type { Descriptor } from "./manifest.ts";
import { MANIFEST_TYPES } from "./media_types.ts";

/** Options of `UpstreamSource`. */
export interface UpstreamOptions {
  ref: UpstreamRef;
  /** `user:password` for basic auth or the token service. */
  credentials?: string;
  /** Use http:// instead of https:// (local test registries). */
  plainHttp?: boolean;
  fetch?: typeof fetch;
  /** Bound of each request's answer and of each body's idle time (default `requestTimeoutMs()`). */
  requestTimeoutMs?: number;
}

/** Pulls manifests and blobs from an upstream registry. */
export class UpstreamSource implements ImageSource {
  readonly name: string;
  readonly #options: UpstreamOptions;
  readonly #base: string;
  #auth?: string;

  constructor(options: UpstreamOptions) {
    this.#options = options;
    const { registry, repository } = options.ref;
    const host = registry === "docker.io" ? "registry-1.docker.io" : registry;
    this.#base = `${options.plainHttp ? "http" : "https"}://${host}/v2/${repository}`;
    this.name = `${registry}/${repository}`;
  }

  async root(): Promise<ManifestDoc> {
    const ref = this.#options.ref.digest ?? this.#options.ref.tag!;
    return await this.#manifest(ref, this.#options.ref.digest);
  }

  manifest(d: Descriptor): Promise<ManifestDoc> {
    return this.#manifest(d.digest, d.digest);
  }

  async #manifest(reference: string, expected?: string): Promise<ManifestDoc> {
    const res = await this.#get(`${this.#base}/manifests/${reference}`, {
      Accept: MANIFEST_TYPES.join(", "),
    });
    const bytes = new Uint8Array(await res.arrayBuffer());
    const digest = `sha256:${sha256Hex(bytes)}`;
    if (expected && digest !== expected) {
      throw new ValidationError(`${this.name}: manifest ${expected} arrived with digest ${digest}`);
    }
    const mediaType = (res.headers.get("content-type") ?? "").split(";")[0].trim();
    return { bytes, mediaType, digest };
  }

  async blob(d: Descriptor): Promise<ReadableStream<Uint8Array>> {
    const res = await this.#get(`${this.#base}/blobs/${d.digest}`, {});
    return res.body!;
  }

  close(): Promise<void> {
    return Promise.resolve();
  }

  /** One bounded fetch: no answer within the bound, or a body idle as long, is an error. */
  async #fetch(url: string | URL, init: RequestInit): Promise<Response> {
    const f = this.#options.fetch ?? fetch;
    const timeoutMs = this.#options.requestTimeoutMs ?? requestTimeoutMs();
    const endpoint = new URL(url).origin;
    const abort = new AbortController();
    const timer = setTimeout(() => abort.abort(), timeoutMs);
    let res: Response;
    try {
      res = await f(url, { ...init, signal: abort.signal });
    } catch (err) {
      if (abort.signal.aborted) {
        throw timeoutError({ endpoint, timeoutMs, what: this.name, cause: err });
      }
      throw new UnavailableError(`${this.name}: ${(err as Error).message}`, {
        hint: "check the network path to the upstream registry",
      });
    } finally {
      clearTimeout(timer);
    }
    if (!res.body) return res;
    const body = idleBounded(res.body, {
      idleMs: timeoutMs,
      onIdle: () =>
        new UnavailableError(
          `${this.name}: the body from ${endpoint} stalled for ${timeoutMs} ms`,
          {
            hint: "the upstream registry stopped sending; retry, or check the network path",
          },
        ),
    });
    return new Response(body, {
      status: res.status,
      statusText: res.statusText,
      headers: res.headers,
    });
  }

  async #get(url: string, headers: Record<string, string>): Promise<Response> {
    for (let attempt = 0; attempt < 2; attempt++) {
      const res = await this.#fetch(url, {
        headers: this.#auth ? { ...headers, Authorization: this.#auth } : headers,
      });
      if (res.status === 401 && attempt === 0) {
        await res.body?.cancel();
        this.#auth = await this.#authorize(res.headers.get("www-authenticate") ?? "");
        continue;
      }
      if (res.ok) return res;
      await res.body?.cancel();
      if (res.status === 404) {
        throw new NotFoundError(`${url.replace(/^https?:\/\//, "")} not found upstream`);
      }
      if (res.status === 401 || res.status === 403) {
        throw new PodminError(`${this.name}: access denied (${res.status})`, {
          hint: "pass --creds USER:PASSWORD (or PODMIN_MIRROR_CREDS) for private images",
        });
      }
      if (res.status >= 500 || res.status === 429) {
        throw new UnavailableError(`${this.name}: upstream answered ${res.status}`);
      }
      throw new PodminError(`${this.name}: upstream answered ${res.status} for ${url}`);
    }
    throw new PodminError(`${this.name}: authorization failed`);
  }

  /** Answers a WWW-Authenticate challenge (Bearer token service or Basic). */
  async #authorize(challenge: string): Promise<string> {
    const creds = this.#options.credentials;
    const basic = creds ? `Basic ${btoa(creds)}` : undefined;
    const scheme = challenge.split(" ")[0].toLowerCase();
    if (scheme === "basic") {
      if (!basic) {
        throw new PodminError(`${this.name} needs credentials`, {
          hint: "pass --creds USER:PASSWORD",
        });
      }
      return basic;
    }
    if (scheme !== "bearer") {
      throw new PodminError(
        `${this.name}: unsupported auth challenge ${JSON.stringify(challenge)}`,
      );
    }
    const params: Record<string, string> = {};
    for (const m of challenge.slice(7).matchAll(/(\w+)="([^"]*)"/g)) params[m[1]] = m[2];
    if (!params.realm) throw new PodminError(`${this.name}: bearer challenge without realm`);
    const url = new URL(params.realm);
    if (params.service) url.searchParams.set("service", params.service);
    url.searchParams.set(
      "scope",
      params.scope ?? `repository:${this.#options.ref.repository}:pull`,
    );
    const res = await this.#fetch(url, { headers: basic ? { Authorization: basic } : {} });
    if (!res.ok) {
      await res.body?.cancel();
      throw new PodminError(`${this.name}: token service answered ${res.status}`, {
        hint: "check --creds, or whether the image is public",
      });
    }
    const body = await res.json() as { token?: string; access_token?: string };
    const token = body.token ?? body.access_token;
    if (!token) throw new PodminError(`${this.name}: token service returned no token`);
    return `Bearer ${token}`;
  }
}
